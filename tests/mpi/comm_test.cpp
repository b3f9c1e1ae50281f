// Multi-rank tests of the communicator (MPI backend), run on 2 and 4 ranks. Each rank fills its
// tensors from a formula of (rank, index); the expected result is the single-process answer
// computed here with plain loops over all ranks' formulas. Values are small integers, so every
// dtype (bf16 and f16 included) represents inputs and results exactly and the comparison is exact.
#include <chrono>
#include <functional>
#include <vector>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "testing.h"

namespace {

using mf::DType;
using mf::Shape;
using mf::Tensor;
using mf::comm::CommPtr;
using mf::comm::OpKind;
using mf::comm::ReduceOp;
using mf::comm::WorkPtr;

const std::vector<DType> kDTypes = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64};

// Rank r's value at flat index i.
double val(int r, int64_t i) { return (r + 1) * (i % 5 + 1) - 3; }

Tensor make(const Shape& shape, DType dt, const std::function<double(int64_t)>& f) {
  std::vector<double> v(static_cast<size_t>(mf::shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = f(static_cast<int64_t>(i));
  return mf::contiguous(mf::cast(mf::from_vector(v, shape), dt));
}

Tensor filled(const Shape& shape, DType dt, int rank) {
  return make(shape, dt, [rank](int64_t i) { return val(rank, i); });
}

void expect_values(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  std::vector<double> g = mft::to_f64(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], want[i]) << what << " element " << i;
}

class Comm : public ::testing::Test {
 protected:
  void SetUp() override {
    world = mf::comm::mpi_world();
    rank = world->rank();
    n = world->size();
  }
  CommPtr world;
  int rank = 0, n = 1;
};

TEST_F(Comm, WorldIsDuplicateOfMpiWorld) {
  int r = -1, s = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  EXPECT_EQ(rank, r);
  EXPECT_EQ(n, s);
  EXPECT_GE(n, 2);
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  EXPECT_EQ(world->world_ranks(), all);
  EXPECT_STREQ(world->backend(), "mpi");
}

TEST_F(Comm, AllReduceSumEveryDtypeAndShape) {
  for (DType dt : kDTypes) {
    for (const Shape& shape : std::vector<Shape>{{7}, {3, 5}, {}, {0}}) {
      Tensor t = filled(shape, dt, rank);
      world->all_reduce(t)->wait();
      std::vector<double> want(static_cast<size_t>(mf::shape_numel(shape)), 0.0);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < want.size(); ++i) want[i] += val(r, static_cast<int64_t>(i));
      expect_values(t, want, std::string("all_reduce ") + mf::dtype_name(dt) + mf::shape_str(shape));
    }
  }
}

TEST_F(Comm, AllReduceProdMinMax) {
  auto f = [](int r, int64_t i) { return 1.0 + static_cast<double>((r + i) % 2) - (i % 3 == 0 ? 3.0 : 0.0); };
  for (DType dt : {DType::kF32, DType::kI64, DType::kBF16, DType::kF16}) {
    for (ReduceOp op : {ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      Tensor t = make({9}, dt, [&](int64_t i) { return f(rank, i); });
      world->all_reduce(t, op)->wait();
      std::vector<double> want(9);
      for (int64_t i = 0; i < 9; ++i) {
        double acc = f(0, i);
        for (int r = 1; r < n; ++r)
          acc = op == ReduceOp::kProd ? acc * f(r, i) : op == ReduceOp::kMin ? std::min(acc, f(r, i))
                                                                             : std::max(acc, f(r, i));
        want[i] = acc;
      }
      expect_values(t, want, std::string("all_reduce ") + mf::comm::reduce_op_name(op) + " " + mf::dtype_name(dt));
    }
  }
}

TEST_F(Comm, ReduceScatter) {
  const int64_t m = 3, c = 5;  // odd block sizes
  for (DType dt : kDTypes) {
    Tensor in = filled({n * m, c}, dt, rank);
    Tensor out = mf::zeros({m, c}, dt);
    world->reduce_scatter(in, out)->wait();
    std::vector<double> want(m * c, 0.0);
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < m * c; ++i) want[i] += val(r, rank * m * c + i);
    expect_values(out, want, std::string("reduce_scatter ") + mf::dtype_name(dt));
  }
}

TEST_F(Comm, AllGather) {
  for (DType dt : kDTypes) {
    Tensor in = filled({3, 1, 3}, dt, rank);
    Tensor out = mf::zeros({n * 3, 1, 3}, dt);
    world->all_gather(in, out)->wait();
    std::vector<double> want;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < 9; ++i) want.push_back(val(r, i));
    expect_values(out, want, std::string("all_gather ") + mf::dtype_name(dt));
  }
}

TEST_F(Comm, AllToAll) {
  const int64_t chunk = 2 * 3;
  for (DType dt : kDTypes) {
    Tensor in = filled({n * 2, 3}, dt, rank);
    Tensor out = mf::zeros({n * 2, 3}, dt);
    world->all_to_all(in, out)->wait();
    std::vector<double> want;  // block i of out = block `rank` of rank i's in
    for (int i = 0; i < n; ++i)
      for (int64_t e = 0; e < chunk; ++e) want.push_back(val(i, rank * chunk + e));
    expect_values(out, want, std::string("all_to_all ") + mf::dtype_name(dt));
  }
}

TEST_F(Comm, BroadcastFromEveryRoot) {
  for (DType dt : kDTypes) {
    for (int root = 0; root < n; ++root) {
      Tensor t = filled({11}, dt, rank);
      world->broadcast(t, root)->wait();
      std::vector<double> want(11);
      for (int64_t i = 0; i < 11; ++i) want[i] = val(root, i);
      expect_values(t, want, std::string("broadcast ") + mf::dtype_name(dt) + " root " + std::to_string(root));
    }
  }
}

TEST_F(Comm, SendRecvRing) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (DType dt : kDTypes) {
    Tensor out = filled({13}, dt, rank);
    Tensor in = mf::zeros({13}, dt);
    WorkPtr r = world->recv(in, prev, 5);  // receive posted first: order must not matter
    WorkPtr s = world->send(out, next, 5);
    s->wait();
    r->wait();
    std::vector<double> want(13);
    for (int64_t i = 0; i < 13; ++i) want[i] = val(prev, i);
    expect_values(in, want, std::string("send/recv ") + mf::dtype_name(dt));
  }
}

TEST_F(Comm, RecvOfWrongSizeThrows) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  Tensor out = filled({5}, DType::kF32, rank);
  Tensor in = mf::zeros({8}, DType::kF32);
  WorkPtr r = world->recv(in, prev, 9);
  world->send(out, next, 9)->wait();
  MFT_EXPECT_ERROR(r->wait(), "recv", "expected 32 bytes", "the message had 20");
  EXPECT_TRUE(r->error() != nullptr);
}

TEST_F(Comm, BarrierAndAsyncOverlap) {
  // Issue several operations at once, then wait in issue order; one is polled to completion.
  Tensor a = filled({64}, DType::kF32, rank);
  Tensor b_in = filled({4}, DType::kF64, rank), b_out = mf::zeros({4 * n}, DType::kF64);
  Tensor c = filled({10}, DType::kBF16, rank);
  Tensor d_in = filled({2 * n}, DType::kI64, rank), d_out = mf::zeros({2 * n}, DType::kI64);
  Tensor e_in = filled({3 * n}, DType::kF16, rank), e_out = mf::zeros({3}, DType::kF16);
  std::vector<WorkPtr> works = {world->all_reduce(a), world->all_gather(b_in, b_out), world->broadcast(c, n - 1),
                                world->all_to_all(d_in, d_out), world->reduce_scatter(e_in, e_out), world->barrier()};
  while (!works[0]->is_completed()) {
  }
  for (auto& w : works) w->wait();
  for (auto& w : works) EXPECT_TRUE(w->is_completed());
  std::vector<double> wa(64, 0.0), wb, wc(10), wd, we(3, 0.0);
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < 64; ++i) wa[i] += val(r, i);
    for (int64_t i = 0; i < 4; ++i) wb.push_back(val(r, i));
    for (int64_t i = 0; i < 2; ++i) wd.push_back(val(r, rank * 2 + i));
    for (int64_t i = 0; i < 3; ++i) we[i] += val(r, rank * 3 + i);
  }
  for (int64_t i = 0; i < 10; ++i) wc[i] = val(n - 1, i);
  expect_values(a, wa, "overlap all_reduce");
  expect_values(b_out, wb, "overlap all_gather");
  expect_values(c, wc, "overlap broadcast");
  expect_values(d_out, wd, "overlap all_to_all");
  expect_values(e_out, we, "overlap reduce_scatter");
}

TEST_F(Comm, WorkKeepsTensorsAlive) {
  WorkPtr w;
  {
    Tensor t = filled({1 << 12}, DType::kF32, rank);
    w = world->all_reduce(t);
  }  // our handle is gone; the Work still owns the buffer MPI writes into (ASan checks this)
  w->wait();
  EXPECT_TRUE(w->is_completed());
}

TEST_F(Comm, ByteCountersFollowTheRing) {
  world->reset_stats();
  const uint64_t N = n;
  Tensor a = filled({8 * n}, DType::kF32, rank);  // nbytes = 32 N
  world->all_reduce(a)->wait();
  Tensor rs_in = filled({4 * n}, DType::kF32, rank), rs_out = mf::zeros({4}, DType::kF32);
  world->reduce_scatter(rs_in, rs_out)->wait();
  Tensor ag_in = filled({4}, DType::kBF16, rank), ag_out = mf::zeros({4 * n}, DType::kBF16);
  world->all_gather(ag_in, ag_out)->wait();
  Tensor aa_in = filled({2 * n}, DType::kF64, rank), aa_out = mf::zeros({2 * n}, DType::kF64);
  world->all_to_all(aa_in, aa_out)->wait();
  Tensor bc = filled({10}, DType::kF32, rank);
  world->broadcast(bc, 0)->wait();
  Tensor s = filled({3}, DType::kF32, rank), r = mf::zeros({3}, DType::kF32);
  WorkPtr rw = world->recv(r, (rank + n - 1) % n, 1);
  world->send(s, (rank + 1) % n, 1)->wait();
  rw->wait();
  world->barrier()->wait();

  const auto& st = world->stats();
  EXPECT_EQ(st.bytes(OpKind::kAllReduce), static_cast<uint64_t>(2.0 * (N - 1) / N * 32 * N + 0.5));
  EXPECT_EQ(st.bytes(OpKind::kReduceScatter), static_cast<uint64_t>(double(N - 1) / N * 16 * N + 0.5));
  EXPECT_EQ(st.bytes(OpKind::kAllGather), static_cast<uint64_t>(double(N - 1) / N * 8 * N + 0.5));
  EXPECT_EQ(st.bytes(OpKind::kAllToAll), static_cast<uint64_t>(double(N - 1) / N * 16 * N + 0.5));
  EXPECT_EQ(st.bytes(OpKind::kBroadcast), rank == 0 ? 40u : 0u);
  EXPECT_EQ(st.bytes(OpKind::kSend), 12u);
  EXPECT_EQ(st.bytes(OpKind::kRecv), 0u);
  EXPECT_EQ(st.bytes(OpKind::kBarrier), 0u);
  EXPECT_EQ(st.total_bytes(), 64 * (N - 1) + 16 * (N - 1) + 8 * (N - 1) + 16 * (N - 1) + (rank == 0 ? 40 : 0) + 12);
  for (OpKind k : {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather, OpKind::kAllToAll,
                   OpKind::kBroadcast, OpKind::kSend, OpKind::kRecv, OpKind::kBarrier})
    EXPECT_EQ(st.count(k), 1u) << mf::comm::op_kind_name(k);

  // Counters are per communicator; a group of one rank sends nothing.
  CommPtr self = world->split(rank, 0);
  ASSERT_TRUE(self);
  EXPECT_EQ(self->size(), 1);
  Tensor x = filled({16}, DType::kF32, rank);
  self->all_reduce(x)->wait();
  expect_values(x, mft::to_f64(filled({16}, DType::kF32, rank)), "all_reduce on a group of one");
  EXPECT_EQ(self->stats().total_bytes(), 0u);
  EXPECT_EQ(self->stats().count(OpKind::kAllReduce), 1u);
  EXPECT_EQ(world->stats().count(OpKind::kAllReduce), 1u);
  world->reset_stats();
  EXPECT_EQ(world->stats().total_bytes(), 0u);
  EXPECT_EQ(world->stats().count(OpKind::kSend), 0u);
}

TEST_F(Comm, SplitIntoGroupsOfTwo) {
  if (n % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  CommPtr pair = world->split(rank / 2, rank);
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->size(), 2);
  EXPECT_EQ(pair->rank(), rank % 2);
  const int base = rank / 2 * 2;
  EXPECT_EQ(pair->world_ranks(), (std::vector<int>{base, base + 1}));
  EXPECT_EQ(pair->timeout_seconds(), world->timeout_seconds());
  Tensor t = filled({6}, DType::kF32, rank);
  pair->all_reduce(t)->wait();
  std::vector<double> want(6);
  for (int64_t i = 0; i < 6; ++i) want[i] = val(base, i) + val(base + 1, i);
  expect_values(t, want, "all_reduce in pair");
}

TEST_F(Comm, MeshRowsAndColumns) {
  // Ranks as an (n/2) x 2 mesh: rank = 2 * row + col. On 4 ranks: the 2 x 2 mesh.
  if (n % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const int row = rank / 2, col = rank % 2;
  CommPtr rows = world->split(row, col);  // the ranks of my row, ordered by column
  CommPtr cols = world->split(col, row);  // the ranks of my column, ordered by row
  ASSERT_TRUE(rows && cols);
  EXPECT_EQ(rows->size(), 2);
  EXPECT_EQ(cols->size(), n / 2);
  EXPECT_EQ(rows->rank(), col);
  EXPECT_EQ(cols->rank(), row);
  std::vector<int> col_ranks;
  for (int r = 0; r < n / 2; ++r) col_ranks.push_back(2 * r + col);
  EXPECT_EQ(cols->world_ranks(), col_ranks);

  Tensor tr = filled({5}, DType::kF64, rank);
  Tensor tc = filled({5}, DType::kI32, rank);
  WorkPtr wr = rows->all_reduce(tr);  // both in flight on different groups at once
  WorkPtr wc = cols->all_reduce(tc);
  wr->wait();
  wc->wait();
  std::vector<double> want_r(5, 0.0), want_c(5, 0.0);
  for (int64_t i = 0; i < 5; ++i) {
    for (int c = 0; c < 2; ++c) want_r[i] += val(2 * row + c, i);
    for (int r = 0; r < n / 2; ++r) want_c[i] += val(2 * r + col, i);
  }
  expect_values(tr, want_r, "row all_reduce");
  expect_values(tc, want_c, "column all_reduce");

  Tensor g_in = filled({2}, DType::kF32, rank), g_out = mf::zeros({2 * (n / 2)}, DType::kF32);
  cols->all_gather(g_in, g_out)->wait();
  std::vector<double> want_g;
  for (int r = 0; r < n / 2; ++r)
    for (int64_t i = 0; i < 2; ++i) want_g.push_back(val(2 * r + col, i));
  expect_values(g_out, want_g, "column all_gather");
}

TEST_F(Comm, SubGroupOfListedRanks) {
  CommPtr g = world->sub_group({n - 1, 0});  // listed order sets the group ranks
  if (rank != 0 && rank != n - 1) {
    EXPECT_FALSE(g);
  } else {
    ASSERT_TRUE(g);
    EXPECT_EQ(g->size(), 2);
    EXPECT_EQ(g->rank(), rank == n - 1 ? 0 : 1);
    EXPECT_EQ(g->world_ranks(), (std::vector<int>{n - 1, 0}));
    Tensor t = filled({4}, DType::kF32, rank);
    g->broadcast(t, 0)->wait();  // group rank 0 = world rank n-1
    std::vector<double> want(4);
    for (int64_t i = 0; i < 4; ++i) want[i] = val(n - 1, i);
    expect_values(t, want, "broadcast in sub_group");
  }
  EXPECT_FALSE(world->split(-1, rank));  // every rank opts out
  MFT_EXPECT_ERROR(world->sub_group({0, 0}), "sub_group", "listed twice");
  MFT_EXPECT_ERROR(world->sub_group({n}), "sub_group", "is not a rank of group");
}

TEST_F(Comm, ArgumentErrorsNameOpShapesDtypeRankGroup) {
  const std::string where = "rank " + std::to_string(rank) + " of group [0, 1";
  Tensor b = mf::zeros({4}, DType::kBool);
  MFT_EXPECT_ERROR(world->all_reduce(b), "all_reduce", "bool(4,)", "dtype bool", where.c_str());
  Tensor m = mft::non_contiguous(filled({3, 4}, DType::kF32, rank));
  MFT_EXPECT_ERROR(world->all_reduce(m), "all_reduce", "f32(3, 4)", "not contiguous", where.c_str());
  Tensor rs_in = mf::zeros({n * 2 + 1, 3}), rs_out = mf::zeros({2, 3});
  MFT_EXPECT_ERROR(world->reduce_scatter(rs_in, rs_out), "reduce_scatter", "must be size", "f32(2, 3)",
                   where.c_str());
  Tensor ag_in = mf::zeros({2}, DType::kF32), ag_out = mf::zeros({2 * n}, DType::kF64);
  MFT_EXPECT_ERROR(world->all_gather(ag_in, ag_out), "all_gather", "dtype mismatch", "f32(2,)", "f64(", "dtype mismatch", where.c_str());
  Tensor ag_bad = mf::zeros({2 * n, 2}, DType::kF32);
  MFT_EXPECT_ERROR(world->all_gather(ag_in, ag_bad), "all_gather", "must be size", where.c_str());
  Tensor aa_in = mf::zeros({n + 1}), aa_out = mf::zeros({n + 1});
  MFT_EXPECT_ERROR(world->all_to_all(aa_in, aa_out), "all_to_all", "equal chunks", where.c_str());
  Tensor aa_small = mf::zeros({n});
  MFT_EXPECT_ERROR(world->all_to_all(aa_in, aa_small), "all_to_all", "same shape", where.c_str());
  Tensor whole = mf::zeros({2 * n});
  Tensor first = mf::narrow(whole, 0, 0, 2);
  MFT_EXPECT_ERROR(world->all_gather(first, whole), "all_gather", "overlap", where.c_str());
  Tensor t = mf::zeros({3});
  MFT_EXPECT_ERROR(world->broadcast(t, n), "broadcast", "root", "is not a rank of group", where.c_str());
  MFT_EXPECT_ERROR(world->send(t, -1, 0), "send", "peer -1", where.c_str());
  MFT_EXPECT_ERROR(world->recv(t, 0, -2), "recv", "tag -2", where.c_str());
  MFT_EXPECT_ERROR(world->set_timeout_seconds(0), "set_timeout_seconds");
}

TEST_F(Comm, TimeoutNamesTheCollectiveWhenARankSkipsIt) {
  // On a dedicated communicator, the last rank skips an all_reduce the others enter. They must
  // get an mf::Error naming it within the timeout. Then the late rank joins (after a world
  // barrier the waiters enter once they have seen the error), and waiting again completes it, so
  // nothing stays pending.
  CommPtr c = world->split(0, rank);
  ASSERT_TRUE(c);
  c->set_timeout_seconds(1.0);
  const int late = n - 1;
  Tensor t = filled({8}, DType::kF32, rank);
  std::vector<double> want(8, 0.0);
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < 8; ++i) want[i] += val(r, i);
  if (rank == late) {
    world->barrier()->wait();
    c->all_reduce(t)->wait();
  } else {
    WorkPtr w = c->all_reduce(t);
    auto start = std::chrono::steady_clock::now();
    const std::string group = "group [0, 1";
    MFT_EXPECT_ERROR(w->wait(), "all_reduce", "f32(8,)", "timed out after 1 s", group.c_str(), "another rank may have died",
                     "issued a different collective");
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 1.0);
    EXPECT_LT(waited, 30.0);  // not a hang (4 ranks on 2 busy cores took 10.7 s to see it)
    EXPECT_TRUE(w->error() != nullptr);
    EXPECT_FALSE(w->is_completed());
    world->barrier()->wait();
    w->wait();  // the late rank has joined now
  }
  expect_values(t, want, "all_reduce after the late rank joined");
}

}  // namespace
