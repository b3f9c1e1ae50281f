// DeviceMesh on 2 and 4 ranks: coordinates, the members of each dimension's communicator and of
// the stage group (computed here naively from the row-major (pp, dp, cp, tp) layout), an all_reduce on
// each that must sum over exactly that group, derived sizes, and size mismatches that throw on
// every rank before any collective (the world communicator still works afterwards).
#include <string>
#include <vector>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/global/device_mesh.h"
#include "testing.h"

namespace {

using mf::global::DeviceMesh;
using mf::global::ParallelDims;

const char* const kDims[] = {"pp", "dp", "cp", "tp"};
constexpr int kNumDims = 4;

ParallelDims dims(int64_t pp, int64_t dp, int64_t tp, int64_t cp = 1) {
  return ParallelDims{{"pp", pp}, {"dp", dp}, {"cp", cp}, {"tp", tp}};
}

// Sum of (world rank + 1) and of 1 over `c`, against the expected members.
void check_sum(mf::comm::Communicator& c, const std::vector<int>& group, int rank, const std::string& what) {
  mf::Tensor t = mf::from_vector(std::vector<double>{rank + 1.0, 1.0}, {2});
  c.all_reduce(t)->wait();
  double want = 0;
  for (int r : group) want += r + 1.0;
  std::vector<double> got = mft::to_f64(t);
  EXPECT_EQ(got[0], want) << what;
  EXPECT_EQ(got[1], static_cast<double>(group.size())) << what;
}

std::vector<int64_t> decode(int r, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c(kNumDims);
  for (int d = kNumDims - 1; d >= 0; --d) {
    c[d] = r % shape[d];
    r /= static_cast<int>(shape[d]);
  }
  return c;
}

// Checks a mesh of the given (resolved) shape built on the world communicator.
void check_mesh(const DeviceMesh& mesh, const std::vector<int64_t>& shape, mf::comm::Communicator& world) {
  const int n = world.size(), rank = world.rank();
  const std::string what = mesh.str();
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  EXPECT_EQ(mesh.placement()->mesh_shape(), shape) << what;
  EXPECT_EQ(mesh.placement()->ranks(), all) << what;
  const std::vector<int64_t> me = decode(rank, shape);
  EXPECT_EQ(mesh.coordinate(), me) << what;
  for (int a = 0; a < kNumDims; ++a) {
    const char* dim = kDims[a];
    EXPECT_EQ(mesh.size(dim), shape[a]) << what;
    EXPECT_EQ(mesh.index(dim), me[a]) << what;
    // Expected group: every rank equal to me except along a, ordered by its index along a.
    std::vector<int> group;
    for (int64_t i = 0; i < shape[a]; ++i)
      for (int r = 0; r < n; ++r) {
        std::vector<int64_t> c = decode(r, shape);
        bool same = c[a] == i;
        for (int d = 0; d < kNumDims; ++d) same = same && (d == a || c[d] == me[d]);
        if (same) group.push_back(r);
      }
    mf::comm::Communicator& c = mesh.comm(dim);
    EXPECT_EQ(c.world_ranks(), group) << what << " dimension " << dim;
    EXPECT_EQ(c.rank(), me[a]) << what;
    check_sum(c, group, rank, what + " dimension " + dim);
  }
  // The stage group (dp, cp and tp): the ranks with my pp index, in rank order.
  std::vector<int> stage;
  for (int r = 0; r < n; ++r)
    if (decode(r, shape)[0] == me[0]) stage.push_back(r);
  mf::comm::CommPtr sg = mesh.split_over(world, {"dp", "cp", "tp"});
  EXPECT_EQ(sg->world_ranks(), stage) << what;
  check_sum(*sg, stage, rank, what + " stage group");
  // Stage placements: (dp, cp, tp) blocks of consecutive ranks.
  for (int64_t s = 0; s < shape[0]; ++s) {
    const mf::global::Placement* st = mesh.stage_placement(s);
    EXPECT_EQ(st->mesh_shape(), (std::vector<int64_t>{shape[1], shape[2], shape[3]})) << what;
    const int per = static_cast<int>(shape[1] * shape[2] * shape[3]);
    for (int i = 0; i < per; ++i) EXPECT_EQ(st->ranks()[i], s * per + i) << what;
  }
  EXPECT_THROW(mesh.stage_placement(shape[0]), mf::Error);
}

class DistMesh : public ::testing::Test {
 protected:
  void SetUp() override { world = mf::comm::mpi_world(); }
  mf::comm::CommPtr world;
};

TEST_F(DistMesh, MeshesOfTheWorld) {
  struct Case {
    ParallelDims sizes;
    std::vector<int64_t> shape;
  };
  std::vector<Case> cases;
  if (world->size() == 4) {
    cases = {{dims(1, 4, 1), {1, 4, 1, 1}}, {dims(1, 2, 2), {1, 2, 1, 2}}, {dims(2, 2, 1), {2, 2, 1, 1}},
             {dims(2, 1, 2), {2, 1, 1, 2}}, {dims(1, 0, 2), {1, 2, 1, 2}}, {dims(4, 1, 1), {4, 1, 1, 1}},
             {dims(1, 1, 2, 2), {1, 1, 2, 2}}, {dims(1, 0, 1, 2), {1, 2, 2, 1}}, {dims(2, 1, 1, 2), {2, 1, 2, 1}}};
  } else if (world->size() == 2) {
    cases = {{dims(1, 2, 1), {1, 2, 1, 1}}, {dims(1, 0, 2), {1, 1, 1, 2}}, {dims(2, 1, 1), {2, 1, 1, 1}},
             {dims(1, 0, 1), {1, 2, 1, 1}}, {dims(1, 1, 1, 2), {1, 1, 2, 1}}};
  } else {
    GTEST_SKIP() << "written for 2 and 4 ranks";
  }
  for (const Case& c : cases) {
    DeviceMesh mesh(c.sizes, *world);
    check_mesh(mesh, c.shape, *world);
  }
}

TEST_F(DistMesh, FromConfig) {
  mf::Config config;
  config.set("train.dist.data_parallel_size", "0");
  config.set("train.dist.tensor_parallel_size", "2");
  DeviceMesh mesh = DeviceMesh::from_config(config, *world);
  check_mesh(mesh, {1, world->size() / 2, 1, 2}, *world);
}

TEST_F(DistMesh, MismatchThrowsOnEveryRankBeforeAnyCollective) {
  const int n = world->size();
  auto message = [&](const ParallelDims& s) -> std::string {
    try {
      DeviceMesh mesh(s, *world);
    } catch (const mf::Error& e) {
      return e.what();
    }
    return "no error";
  };
  std::string m = message(dims(1, 1, 3));
  EXPECT_NE(m.find("pipeline_parallel_size=1, data_parallel_size=1, context_parallel_size=1, tensor_parallel_size=3"), std::string::npos) << m;
  EXPECT_NE(m.find("does not equal the world size " + std::to_string(n)), std::string::npos) << m;
  m = message(dims(1, 0, 3));  // cannot derive dp
  EXPECT_NE(m.find("tensor_parallel_size=3"), std::string::npos) << m;
  EXPECT_NE(m.find("world of " + std::to_string(n) + " ranks"), std::string::npos) << m;
  m = message(dims(0, 0, 1));
  EXPECT_NE(m.find("at most one size may be 0"), std::string::npos) << m;
  m = message(dims(-1, 1, 1));
  EXPECT_NE(m.find("must be >= 1"), std::string::npos) << m;
  m = message(dims(2 * n, 1, 1));
  EXPECT_NE(m.find("= " + std::to_string(2 * n) + " does not equal"), std::string::npos) << m;
  // No rank issued a collective: the world still lines up (a stray split would desynchronise it).
  mf::Tensor t = mf::from_vector(std::vector<double>{1.0}, {1});
  world->all_reduce(t)->wait();
  EXPECT_EQ(mft::to_f64(t)[0], n);
  DeviceMesh ok(dims(1, n, 1), *world);
  check_mesh(ok, {1, n, 1, 1}, *world);
}

}  // namespace
