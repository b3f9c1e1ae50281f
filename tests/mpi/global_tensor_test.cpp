// Global tensors and boxing on 2 and 4 ranks (1-D placements of the world) and on a (1, 2, 2)
// DeviceMesh on 4 ranks: every SBP conversion, forward and backward, against the logical tensor.
// The logical X is a formula of the element index, the same on every rank; a P source piece is
// X's slice times a weight per P mesh axis (the weights sum to 1). A P result is summed over its
// P axes before the comparison. Backward: the loss is sum(local y * c) on every rank, with c the
// slice of a logical H times (index + 1) along each B axis of y and plain along its P axes, so the
// total loss is <X, G> with G = H * prod over y's B axes of n(n+1)/2. The local x.grad summed over
// x's B axes (gradients of B pieces are partial) must be G's slice for x's SBP.
#include <cmath>
#include <string>
#include <vector>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/global/boxing.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/global/global_tensor.h"
#include "mpi/dist_testing.h"

namespace {

using mf::Shape;
using mf::Tensor;
using mf::comm::Communicator;
using namespace mf::global;  // NOLINT

// Boxes X from `src` to `dst` and checks forward and backward (see the file comment).
void check_box(const Placement* pl, const std::vector<Communicator*>& comms, const Shape& shape, const NdSbp* src,
               const NdSbp* dst, int world_rank, bool strided = false) {
  const std::string what = "box " + mf::shape_str(shape) + " " + src->str() + " -> " + dst->str() + " on " + pl->str() +
                           " (rank " + std::to_string(world_rank) + ")";
  const std::vector<int64_t>& mesh = pl->mesh_shape();
  const std::vector<int64_t> coord = mft::coord_of(comms);
  const int nd = pl->ndim();
  Tensor X = mft::formula(shape, 1.0, 0.25, 11), H = mft::formula(shape, -0.5, 0.125, 5);
  Tensor x = mft::piece(X, *src, mesh, coord);
  for (int m = 0; m < nd; ++m)
    if ((*src)[m].is_partial_sum()) {
      const double n = static_cast<double>(mesh[m]), r = static_cast<double>(coord[m]);
      x = mf::scale(x, 2.0 * (r + 1.0) / (n * (n + 1.0)));
    }
  x = strided ? mft::non_contiguous(x) : mf::contiguous(x).detach();
  x.set_requires_grad(true);
  GlobalTensor gx = to_global(x, pl, src, shape, world_rank);
  GlobalTensor gy = box_to(gx, dst, comms);
  ASSERT_EQ(gy.nd_sbp, dst) << what;
  ASSERT_EQ(gy.logical_shape, shape) << what;
  Tensor y = to_local(gy);

  // Forward.
  Tensor ys = mf::clone(y.detach());
  for (int m = 0; m < nd; ++m)
    if ((*dst)[m].is_partial_sum()) comms[static_cast<size_t>(m)]->all_reduce(ys)->wait();
  mft::expect_tensor_close(ys, mft::piece(X, *dst, mesh, coord), what + " forward");

  // Backward.
  Tensor c = mft::piece(H, *dst, mesh, coord);
  double g_scale = 1.0;
  for (int m = 0; m < nd; ++m)
    if ((*dst)[m].is_broadcast()) {
      const double n = static_cast<double>(mesh[m]);
      c = mf::scale(c, static_cast<double>(coord[m]) + 1.0);
      g_scale *= n * (n + 1.0) / 2.0;
    }
  mf::sum(mf::mul(y, c)).backward();
  ASSERT_TRUE(x.grad().defined()) << what;
  Tensor gl = mf::clone(x.grad());
  for (int m = 0; m < nd; ++m)
    if ((*src)[m].is_broadcast()) comms[static_cast<size_t>(m)]->all_reduce(gl)->wait();
  mft::expect_tensor_close(gl, mf::scale(mft::piece(H, *src, mesh, coord), g_scale), what + " backward");
}

std::vector<Sbp> sbps_for(int ndim) {
  std::vector<Sbp> v{Sbp::broadcast(), Sbp::partial_sum()};
  for (int k = 0; k < ndim; ++k) v.push_back(Sbp::split(k));
  return v;
}

class GlobalTensorTest : public ::testing::Test {
 protected:
  void SetUp() override { world = mf::comm::mpi_world(); }
  mf::comm::CommPtr world;
  const Placement* world_placement() const {
    std::vector<int> r(static_cast<size_t>(world->size()));
    for (int i = 0; i < world->size(); ++i) r[static_cast<size_t>(i)] = i;
    return placement(mf::DeviceType::kCPU, r);
  }
};

TEST_F(GlobalTensorTest, ToGlobalChecksTheLocalShape) {
  const Placement* pl = world_placement();
  const int n = world->size(), r = world->rank();
  const NdSbp* s0 = nd_sbp({Sbp::split(0)});
  Tensor ok = mf::zeros({split_size(7, n, r), 3}, mf::DType::kF64);
  GlobalTensor g = to_global(ok, pl, s0, {7, 3}, r);
  EXPECT_EQ(to_local(g).impl(), ok.impl());
  EXPECT_EQ(g.placement, pl);
  const std::string rank_str = "rank " + std::to_string(r);
  MFT_EXPECT_ERROR(to_global(mf::zeros({7, 3}, mf::DType::kF64), pl, s0, {7, 3}, r), "to_global", "(7, 3)", "S(0)",
                   rank_str.c_str(), "prescribes");
  MFT_EXPECT_ERROR(to_global(ok, pl, s0, {7, 3}, n + 5), "to_global", "not in placement");
}

TEST_F(GlobalTensorTest, EveryConversionOneAxis) {
  const Placement* pl = world_placement();
  std::vector<Communicator*> comms{world.get()};
  for (const Shape& shape : {Shape{7, 5}, Shape{8, 4}, Shape{4, 6, 5}}) {
    const std::vector<Sbp> all = sbps_for(static_cast<int>(shape.size()));
    for (const Sbp& a : all)
      for (const Sbp& b : all) {
        check_box(pl, comms, shape, nd_sbp({a}), nd_sbp({b}), world->rank());
        if (shape.size() == 3) check_box(pl, comms, shape, nd_sbp({a}), nd_sbp({b}), world->rank(), true);
      }
  }
}

// The loss counted once (on rank 0) after P -> B: every rank's x.grad is the whole gradient,
// because the logical value is the sum of the pieces (so the backward is an all-reduce, not the
// identity). After B -> P only rank 0's piece reaches the output.
TEST_F(GlobalTensorTest, GradientOfALossOnOneRank) {
  const Placement* pl = world_placement();
  const int r = world->rank();
  const NdSbp* P = nd_sbp({Sbp::partial_sum()});
  const NdSbp* B = nd_sbp({Sbp::broadcast()});
  Tensor x = mf::full({3, 2}, r + 1.0, mf::DType::kF64).set_requires_grad(true);
  Tensor y = to_local(box_to(to_global(x, pl, P, {3, 2}, r), B, *world));
  mf::sum(mf::scale(y, r == 0 ? 2.0 : 0.0)).backward();
  for (double g : mft::to_f64(x.grad())) EXPECT_EQ(g, 2.0);
  Tensor b = mf::full({3, 2}, 1.0, mf::DType::kF64).set_requires_grad(true);
  Tensor p = to_local(box_to(to_global(b, pl, B, {3, 2}, r), P, *world));
  for (double v : mft::to_f64(p)) EXPECT_EQ(v, r == 0 ? 1.0 : 0.0);
  mf::sum(mf::scale(p, 3.0)).backward();
  for (double g : mft::to_f64(b.grad())) EXPECT_EQ(g, r == 0 ? 3.0 : 0.0);
}

// Boxing works on any dtype the communicator carries: f32 S(1) -> S(0) -> B.
TEST_F(GlobalTensorTest, Float32) {
  const Placement* pl = world_placement();
  const int n = world->size(), r = world->rank();
  Tensor X = mf::cast(mft::formula({5, 6}, 1.0, 0.5, 7), mf::DType::kF32);
  const NdSbp* s1 = nd_sbp({Sbp::split(1)});
  GlobalTensor g = to_global(mft::piece(X, *s1, {n}, {r}), pl, s1, {5, 6}, r);
  GlobalTensor s0 = box_to(g, nd_sbp({Sbp::split(0)}), *world);
  EXPECT_EQ(s0.local.dtype(), mf::DType::kF32);
  EXPECT_EQ(mft::to_f64(s0.local), mft::to_f64(mft::piece(X, *nd_sbp({Sbp::split(0)}), {n}, {r})));
  EXPECT_EQ(mft::to_f64(box_to(s0, nd_sbp({Sbp::broadcast()}), *world).local), mft::to_f64(X));
}

TEST_F(GlobalTensorTest, AllReduceBytes) {
  const Placement* pl = world_placement();
  const int n = world->size();
  Tensor x = mf::full({6, 5}, 1.0, mf::DType::kF64);
  GlobalTensor g = to_global(x, pl, nd_sbp({Sbp::partial_sum()}), {6, 5}, world->rank());
  world->reset_stats();
  GlobalTensor b = box_to(g, nd_sbp({Sbp::broadcast()}), *world);
  const uint64_t nbytes = 6 * 5 * 8;
  EXPECT_EQ(world->stats().bytes(mf::comm::OpKind::kAllReduce), 2 * (n - 1) * nbytes / n);
  EXPECT_EQ(world->stats().count(mf::comm::OpKind::kAllReduce), 1u);
  EXPECT_EQ(world->stats().total_bytes(), 2 * (n - 1) * nbytes / n);
  EXPECT_EQ(mft::to_f64(b.local)[0], n);
  // Even splits send what the cost table says: P -> S and S -> B move T(N-1)/N each, B -> S none.
  const uint64_t T = static_cast<uint64_t>(8 * n) * 5 * 8;
  Tensor p = mf::full({8 * n, 5}, 1.0, mf::DType::kF64);
  GlobalTensor gp = to_global(p, pl, nd_sbp({Sbp::partial_sum()}), {8 * n, 5}, world->rank());
  world->reset_stats();
  GlobalTensor s = box_to(gp, nd_sbp({Sbp::split(0)}), *world);
  EXPECT_EQ(world->stats().total_bytes(), T * (n - 1) / n);
  world->reset_stats();
  GlobalTensor bb = box_to(s, nd_sbp({Sbp::broadcast()}), *world);
  EXPECT_EQ(world->stats().total_bytes(), T * (n - 1) / n);
  world->reset_stats();
  box_to(bb, nd_sbp({Sbp::split(1)}), *world);
  EXPECT_EQ(world->stats().total_bytes(), 0u);
}

TEST_F(GlobalTensorTest, MeshTwoByTwo) {
  if (world->size() != 4) GTEST_SKIP() << "a 2x2 mesh needs 4 ranks";
  DeviceMesh mesh(mf::global::ParallelDims{{"dp", 2}, {"tp", 2}}, *world);
  std::vector<Communicator*> comms = mesh.comms();
  const Shape shape{9, 6};
  const std::vector<Sbp> all = sbps_for(2);
  int done = 0, unsupported = 0;
  for (const Sbp& a0 : all)
    for (const Sbp& a1 : all)
      for (const Sbp& b0 : all)
        for (const Sbp& b1 : all) {
          const NdSbp* src = nd_sbp({Sbp::broadcast(), a0, Sbp::broadcast(), a1});  // (pp, dp, cp, tp)
          const NdSbp* dst = nd_sbp({Sbp::broadcast(), b0, Sbp::broadcast(), b1});
          try {
            check_box(mesh.placement(), comms, shape, src, dst, world->rank());
            ++done;
          } catch (const mf::Error& e) {
            ASSERT_NE(std::string(e.what()).find("not yet supported"), std::string::npos) << e.what();
            ++unsupported;
          }
        }
  EXPECT_EQ(done + unsupported, 256);
  EXPECT_EQ(unsupported, 24) << done << " supported";
  // The ones the plan order exists for.
  const Sbp s0 = Sbp::split(0), s1 = Sbp::split(1), B = Sbp::broadcast(), P = Sbp::partial_sum();
  check_box(mesh.placement(), comms, shape, nd_sbp({B, s0, B, s0}), nd_sbp({B, B, B, B}), world->rank());
  check_box(mesh.placement(), comms, shape, nd_sbp({B, B, B, B}), nd_sbp({B, s0, B, s0}), world->rank());
  check_box(mesh.placement(), comms, shape, nd_sbp({B, P, B, P}), nd_sbp({B, s0, B, s0}), world->rank());
  check_box(mesh.placement(), comms, shape, nd_sbp({B, s0, B, P}), nd_sbp({B, B, B, s1}), world->rank());
  MFT_EXPECT_ERROR(box_to(to_global(mft::piece(mft::formula(shape, 1, 1, 3), *nd_sbp({B, s0, B, s0}), mesh.placement()->mesh_shape(),
                                          mesh.coordinate()),
                                    mesh.placement(), nd_sbp({B, s0, B, s0}), shape, world->rank()),
                          nd_sbp({B, s1, B, s0}), comms),
                   "not yet supported", "nested splits");
}

}  // namespace
