// SBP: printing, interning (pointer identity, also across threads), the local pieces of even and
// uneven splits on 1-D and 2-D meshes checked against a naive row-by-row assignment, and errors.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "meshflow/core/error.h"
#include "meshflow/global/sbp.h"

namespace {

using mf::Shape;
using mf::global::nd_sbp;
using mf::global::Sbp;

const Sbp S0 = Sbp::split(0), S1 = Sbp::split(1), B = Sbp::broadcast(), P = Sbp::partial_sum();

// Naive: deal n rows to p ranks one block at a time — rank i gets the next n/p rows, plus one
// more while i < n % p. Returns the owner of every row.
std::vector<int64_t> naive_owner(int64_t n, int64_t p) {
  std::vector<int64_t> owner;
  for (int64_t i = 0; i < p; ++i)
    for (int64_t k = 0; k < n / p + (i < n % p ? 1 : 0); ++k) owner.push_back(i);
  return owner;
}

TEST(DistSbp, Printing) {
  EXPECT_EQ(S0.str(), "S(0)");
  EXPECT_EQ(Sbp::split(3).str(), "S(3)");
  EXPECT_EQ(B.str(), "B");
  EXPECT_EQ(P.str(), "P");
  EXPECT_EQ(nd_sbp({S0, B})->str(), "(S(0), B)");
  EXPECT_EQ(nd_sbp({P})->str(), "(P)");
  EXPECT_EQ(nd_sbp({B, S1, P})->str(), "(B, S(1), P)");
}

TEST(DistSbp, InterningGivesOnePointerPerValue) {
  const auto* a = nd_sbp({S0, B});
  EXPECT_EQ(a, nd_sbp({S0, B}));
  EXPECT_EQ(a, nd_sbp(std::vector<Sbp>{Sbp::split(0), Sbp::broadcast()}));
  EXPECT_NE(a, nd_sbp({S1, B}));
  EXPECT_NE(a, nd_sbp({B, S0}));
  EXPECT_NE(a, nd_sbp({S0}));
  EXPECT_NE(nd_sbp({P}), nd_sbp({B}));
  EXPECT_EQ(a->ndim(), 2);
  EXPECT_EQ((*a)[0], S0);
  EXPECT_EQ((*a)[1], B);
}

TEST(DistSbp, InterningIsThreadSafe) {
  constexpr int kThreads = 8;
  std::vector<std::vector<const mf::global::NdSbp*>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&got, t] {
      for (int i = 0; i < 200; ++i) got[t].push_back(nd_sbp({Sbp::split(i % 7), Sbp::partial_sum()}));
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(got[t], got[0]);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(got[0][i], nd_sbp({Sbp::split(i), P}));
}

TEST(DistSbp, UnevenSplitsMatchNaiveOn2To4Ranks) {
  for (int64_t p : {2, 3, 4}) {
    for (int64_t n = p; n <= 11; ++n) {
      std::vector<int64_t> owner = naive_owner(n, p);
      ASSERT_EQ(static_cast<int64_t>(owner.size()), n);
      for (int64_t r = 0; r < p; ++r) {
        int64_t count = 0, first = -1;
        for (int64_t row = 0; row < n; ++row)
          if (owner[row] == r) count++, first = first < 0 ? row : first;
        const std::string what = "n=" + std::to_string(n) + " p=" + std::to_string(p) + " r=" + std::to_string(r);
        // Tensor (5, n) split on axis 1; axis 0 untouched.
        EXPECT_EQ(mf::global::local_shape({5, n}, *nd_sbp({S1}), {p}, {r}), (Shape{5, count})) << what;
        mf::LogicalSlice sl = mf::global::local_slice({5, n}, *nd_sbp({S1}), {p}, {r});
        EXPECT_EQ(sl.logical_shape, (Shape{5, n})) << what;
        EXPECT_EQ(sl.start, (Shape{0, first})) << what;
        // B and P: every rank holds the full shape at offset 0.
        EXPECT_EQ(mf::global::local_shape({5, n}, *nd_sbp({B}), {p}, {r}), (Shape{5, n}));
        EXPECT_EQ(mf::global::local_slice({5, n}, *nd_sbp({P}), {p}, {r}).start, (Shape{0, 0}));
      }
    }
  }
}

TEST(DistSbp, TwoDMeshPieces) {
  const std::vector<int64_t> mesh = {2, 2};
  // (S(0), S(1)) on (7, 5): rows 4/3 by mesh axis 0, columns 3/2 by mesh axis 1.
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      mf::LogicalSlice sl = mf::global::local_slice({7, 5}, *nd_sbp({S0, S1}), mesh, {i, j});
      EXPECT_EQ(sl.start, (Shape{i * 4, j * 3}));
      EXPECT_EQ(mf::global::local_shape({7, 5}, *nd_sbp({S0, S1}), mesh, {i, j}), (Shape{i ? 3 : 4, j ? 2 : 3}));
      EXPECT_EQ(mf::global::local_shape({7, 5}, *nd_sbp({S0, B}), mesh, {i, j}), (Shape{i ? 3 : 4, 5}));
      EXPECT_EQ(mf::global::local_shape({7, 5}, *nd_sbp({P, S1}), mesh, {i, j}), (Shape{7, j ? 2 : 3}));
    }
  // (S(0), S(0)) nests: each mesh-axis-0 piece is split again, and the pieces cover every row
  // exactly once, in row-major rank order.
  for (int64_t n : {4, 5, 6, 7, 9, 10}) {
    int64_t next = 0;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        mf::LogicalSlice sl = mf::global::local_slice({n, 3}, *nd_sbp({S0, S0}), mesh, {i, j});
        Shape shape = mf::global::local_shape({n, 3}, *nd_sbp({S0, S0}), mesh, {i, j});
        const int64_t outer = n / 2 + (i < n % 2 ? 1 : 0);
        EXPECT_EQ(shape[0], outer / 2 + (j < outer % 2 ? 1 : 0)) << n;
        EXPECT_EQ(sl.start[0], next) << n;
        EXPECT_GE(shape[0], 1);
        next += shape[0];
      }
    EXPECT_EQ(next, n);
  }
}

TEST(DistSbp, Errors) {
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const mf::Error& e) {
      return e.what();
    }
    return "no error";
  };
  // An axis shorter than the mesh axis.
  std::string m = message([] { mf::global::check_sbp({3, 2}, *nd_sbp({S1}), {4}); });
  EXPECT_NE(m.find("S(1) on mesh axis 0"), std::string::npos) << m;
  EXPECT_NE(m.find("has 2 elements, fewer than the 4 ranks"), std::string::npos) << m;
  EXPECT_NE(m.find("(3, 2)"), std::string::npos) << m;
  // Nested: 3 rows over 2 x 2 ranks.
  m = message([] { mf::global::local_shape({3}, *nd_sbp({S0, S0}), {2, 2}, {0, 0}); });
  EXPECT_NE(m.find("fewer than the 4 ranks"), std::string::npos) << m;
  // A split axis outside the tensor.
  m = message([] { mf::global::local_shape({3, 4}, *nd_sbp({Sbp::split(2)}), {2}, {0}); });
  EXPECT_NE(m.find("tensor axis 2 out of range for logical shape (3, 4)"), std::string::npos) << m;
  m = message([] { mf::global::check_sbp({}, *nd_sbp({S0}), {2}); });
  EXPECT_NE(m.find("out of range"), std::string::npos) << m;
  // Mesh and NdSbp disagree; coordinate out of range; negative split axis.
  m = message([] { mf::global::check_sbp({4}, *nd_sbp({S0, B}), {4}); });
  EXPECT_NE(m.find("has 2 entries for a mesh (4,)"), std::string::npos) << m;
  EXPECT_THROW(mf::global::local_shape({4}, *nd_sbp({S0}), {2}, {2}), mf::Error);
  EXPECT_THROW(mf::global::local_shape({4}, *nd_sbp({S0}), {2}, {}), mf::Error);
  EXPECT_THROW(Sbp::split(-1), mf::Error);
  EXPECT_THROW(nd_sbp(std::vector<Sbp>{}), mf::Error);
  // Fine: exactly as many rows as ranks; B/P never constrain.
  EXPECT_NO_THROW(mf::global::check_sbp({4}, *nd_sbp({S0}), {4}));
  EXPECT_NO_THROW(mf::global::check_sbp({1}, *nd_sbp({B, P}), {4, 4}));
}

}  // namespace
