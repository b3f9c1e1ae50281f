// Global ops against the single-process op, for every combination of input SBPs that fits the
// shapes: on a 1-D placement of the world (2 and 4 ranks) and on the (dp, tp) = (2, 2) stage of a
// (1, 2, 2) DeviceMesh (4 ranks). Shapes have axes that do not divide by the ranks (uneven
// splits) and axes shorter than the ranks (signatures splitting them must be dropped).
//
// As in global_tensor_test.cpp: the logical inputs are formulas of the element index; a P input
// piece is its slice times a weight per P mesh axis (the weights sum to 1). Forward: the output,
// summed over its P mesh axes, must be the slice of the single-process result for its SBP.
// Backward: the loss is sum(local y * c), c the slice of a logical H times (index + 1) along each
// B mesh axis of y, so the loss summed over ranks is g * <Y, H> with g = prod over y's B axes of
// n(n+1)/2. Each input's local gradient, summed over its B mesh axes, must be the slice of g times
// the single-process gradient of <Y, H>.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/global/boxing.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/global/global_ops.h"
#include "mpi/dist_testing.h"

namespace {

using mf::Shape;
using mf::Tensor;
using mf::comm::Communicator;
using namespace mf::global;  // NOLINT

using GlobalFn = std::function<GlobalTensor(const GlobalContext&, const std::vector<GlobalTensor>&)>;
using LocalRef = std::function<Tensor(const std::vector<Tensor>&)>;

struct OpCase {
  std::string name;
  std::vector<Shape> shapes;  // the inputs' logical shapes
  LocalRef reference;         // the single-process op
  GlobalFn global;
  SignatureList signatures;   // the op's 1-d list for these shapes
};

struct Mesh {
  const Placement* placement;
  std::vector<Communicator*> comms;
  int world_rank;
  std::vector<int64_t> coord() const { return mft::coord_of(comms); }
};

// One op under one combination of input SBPs, forward and backward. Returns the failures.
int check_op(const Mesh& mesh, const OpCase& op, const std::vector<const NdSbp*>& src) {
  const std::vector<int64_t>& shape = mesh.placement->mesh_shape();
  const std::vector<int64_t> coord = mesh.coord();
  const int nd = mesh.placement->ndim();
  std::string what = op.name + " inputs";
  for (size_t i = 0; i < src.size(); ++i) what += " " + mf::shape_str(op.shapes[i]) + " " + src[i]->str();
  what += " on " + mesh.placement->str() + " (rank " + std::to_string(mesh.world_rank) + ")";

  std::vector<Tensor> X, x;
  std::vector<GlobalTensor> gx;
  for (size_t i = 0; i < src.size(); ++i) {
    const double fi = static_cast<double>(i);
    X.push_back(mft::formula(op.shapes[i], 0.3 - 0.2 * fi, 0.15 + 0.05 * fi, 7 + 2 * static_cast<int>(i)));
    Tensor p = mft::piece(X[i], *src[i], shape, coord);
    for (int m = 0; m < nd; ++m)
      if ((*src[i])[m].is_partial_sum()) {
        const double n = static_cast<double>(shape[static_cast<size_t>(m)]), r = static_cast<double>(coord[m]);
        p = mf::scale(p, 2.0 * (r + 1.0) / (n * (n + 1.0)));
      }
    x.push_back(mf::contiguous(p).detach().set_requires_grad(true));
    gx.push_back(to_global(x[i], mesh.placement, src[i], op.shapes[i], mesh.world_rank));
    X[i].set_requires_grad(true);
  }
  const GlobalContext ctx{mesh.comms, mesh.world_rank};
  GlobalTensor gy = op.global(ctx, gx);
  Tensor Y = op.reference(X);
  what += " -> " + gy.nd_sbp->str();
  EXPECT_EQ(gy.logical_shape, Y.shape()) << what;
  EXPECT_EQ(gy.placement, mesh.placement) << what;
  // Inputs that already match a signature on every mesh axis run it as they are.
  std::vector<Sbp> want(static_cast<size_t>(nd));
  bool matched = true;
  for (int m = 0; matched && m < nd; ++m) {
    matched = false;
    for (const Signature& sig : op.signatures) {
      bool same = true;
      for (size_t i = 0; i < src.size(); ++i) same = same && sig.inputs[i] == (*src[i])[m];
      if (same) {
        want[static_cast<size_t>(m)] = sig.outputs[0];
        matched = true;
        break;
      }
    }
  }
  if (matched) {
    EXPECT_EQ(gy.nd_sbp, nd_sbp(want)) << what << " matches a signature exactly";
  }

  // Forward.
  Tensor ys = mf::clone(gy.local.detach());
  for (int m = 0; m < nd; ++m)
    if ((*gy.nd_sbp)[m].is_partial_sum()) mesh.comms[static_cast<size_t>(m)]->all_reduce(ys)->wait();
  int bad = mft::expect_tensor_close(ys, mft::piece(Y.detach(), *gy.nd_sbp, shape, coord), what + " forward", 1e-10);

  // Backward.
  Tensor H = mft::formula(Y.shape(), -0.4, 0.1, 5);
  Tensor c = mft::piece(H, *gy.nd_sbp, shape, coord);
  double g_scale = 1.0;
  for (int m = 0; m < nd; ++m)
    if ((*gy.nd_sbp)[m].is_broadcast()) {
      const double n = static_cast<double>(shape[static_cast<size_t>(m)]);
      c = mf::scale(c, static_cast<double>(coord[m]) + 1.0);
      g_scale *= n * (n + 1.0) / 2.0;
    }
  mf::sum(mf::mul(gy.local, c)).backward();
  mf::sum(mf::mul(Y, H)).backward();
  for (size_t i = 0; i < src.size(); ++i) {
    const std::string wi = what + " backward of input " + std::to_string(i);
    EXPECT_TRUE(x[i].grad().defined()) << wi;
    if (!x[i].grad().defined()) return bad + 1;
    Tensor gl = mf::clone(x[i].grad());
    for (int m = 0; m < nd; ++m)
      if ((*src[i])[m].is_broadcast()) mesh.comms[static_cast<size_t>(m)]->all_reduce(gl)->wait();
    bad += mft::expect_tensor_close(gl, mf::scale(mft::piece(X[i].grad(), *src[i], shape, coord), g_scale), wi, 1e-10);
  }
  return bad;
}

// Every NdSbp on `nd` mesh axes (each axis B, P or S(k)) that fits `shape` on `mesh`.
std::vector<const NdSbp*> all_fitting(const Shape& shape, const std::vector<int64_t>& mesh) {
  std::vector<Sbp> one{Sbp::broadcast(), Sbp::partial_sum()};
  for (size_t k = 0; k < shape.size(); ++k) one.push_back(Sbp::split(static_cast<int>(k)));
  std::vector<const NdSbp*> out;
  size_t total = 1;
  for (size_t m = 0; m < mesh.size(); ++m) total *= one.size();
  for (size_t t = 0; t < total; ++t) {
    std::vector<Sbp> v(mesh.size());
    size_t rest = t;
    for (size_t m = mesh.size(); m-- > 0;) {
      v[m] = one[rest % one.size()];
      rest /= one.size();
    }
    const NdSbp* s = nd_sbp(v);
    try {
      check_sbp(shape, *s, mesh);
      out.push_back(s);
    } catch (const mf::Error&) {
    }
  }
  return out;
}

// Checks every `stride`-th combination (MESHFLOW_TEST_COMBO_STRIDE, default 1 = all; the
// sanitizer build sets a larger one to stay within its time), starting at a different offset per
// op so that together they still cover every residue.
size_t combo_stride() {
  const char* v = std::getenv("MESHFLOW_TEST_COMBO_STRIDE");
  const long s = v ? std::atol(v) : 1;
  return s > 1 ? static_cast<size_t>(s) : 1;
}

// Every combination of fitting input SBPs (see combo_stride); returns how many were checked.
int check_all(const Mesh& mesh, const OpCase& op) {
  std::vector<std::vector<const NdSbp*>> per_input;
  size_t total = 1;
  for (const Shape& s : op.shapes) {
    per_input.push_back(all_fitting(s, mesh.placement->mesh_shape()));
    total *= per_input.back().size();
  }
  int failures = 0, checked = 0;
  const size_t stride = combo_stride(), first = std::hash<std::string>{}(op.name) % std::min(stride, total);
  for (size_t t = first; t < total && failures < 5; t += stride) {
    ++checked;
    std::vector<const NdSbp*> src(per_input.size());
    size_t rest = t;
    for (size_t i = per_input.size(); i-- > 0;) {
      src[i] = per_input[i][rest % per_input[i].size()];
      rest /= per_input[i].size();
    }
    failures += check_op(mesh, op, src);
  }
  return checked;
}

// Every op with the shapes it is tested on.
std::vector<OpCase> all_ops() {
  using V = const std::vector<Tensor>&;
  using G = const std::vector<GlobalTensor>&;
  using C = const GlobalContext&;
  std::vector<OpCase> ops;
  auto mm = [](V t) { return mf::matmul(t[0], t[1]); };
  auto gmm = [](C c, G g) { return matmul(c, g[0], g[1]); };
  ops.push_back({"matmul", {{7, 5}, {5, 6}}, mm, gmm, {}});
  ops.push_back({"matmul", {{3, 6}, {6, 5}}, mm, gmm, {}});
  ops.push_back({"batched matmul", {{4, 5, 3}, {4, 3, 6}}, mm, gmm, {}});
  ops.push_back({"batched matmul 2-d b", {{5, 3, 4}, {4, 6}}, mm, gmm, {}});
  ops.push_back({"affine", {{5, 3, 6}, {6, 7}, {7}}, [](V t) { return mf::affine(t[0], t[1], t[2]); },
                 [](C c, G g) { return affine(c, g[0], g[1], g[2]); }, {}});
  ops.push_back({"affine(no bias)", {{7, 6}, {6, 5}}, [](V t) { return mf::affine(t[0], t[1]); },
                 [](C c, G g) { return affine(c, g[0], g[1]); }, {}});
  ops.push_back({"linear", {{6, 5}, {7, 5}, {7}}, [](V t) { return mf::linear(t[0], t[1], t[2]); },
                 [](C c, G g) { return linear(c, g[0], g[1], g[2]); }, {}});
  ops.push_back({"add", {{7, 6}, {7, 6}}, [](V t) { return mf::add(t[0], t[1]); },
                 [](C c, G g) { return add(c, g[0], g[1]); }, {}});
  ops.push_back({"add bias", {{5, 3, 6}, {6}}, [](V t) { return mf::add(t[0], t[1]); },
                 [](C c, G g) { return add(c, g[0], g[1]); }, {}});
  ops.push_back({"sub", {{7, 6}, {7, 6}}, [](V t) { return mf::sub(t[0], t[1]); },
                 [](C c, G g) { return sub(c, g[0], g[1]); }, {}});
  ops.push_back({"mul", {{7, 6}, {7, 6}}, [](V t) { return mf::mul(t[0], t[1]); },
                 [](C c, G g) { return mul(c, g[0], g[1]); }, {}});
  ops.push_back({"mul broadcast", {{5, 6}, {6}}, [](V t) { return mf::mul(t[0], t[1]); },
                 [](C c, G g) { return mul(c, g[0], g[1]); }, {}});
  ops.push_back({"scale", {{7, 6}}, [](V t) { return mf::scale(t[0], -1.5); },
                 [](C c, G g) { return scale(c, g[0], -1.5); }, {}});
  ops.push_back({"gelu", {{7, 6}}, [](V t) { return mf::gelu(t[0]); }, [](C c, G g) { return gelu(c, g[0]); }, {}});
  ops.push_back({"relu", {{7, 6}}, [](V t) { return mf::relu(t[0]); },
                 [](C c, G g) { return relu(c, g[0]); }, {}});
  ops.push_back({"silu", {{5, 3, 6}}, [](V t) { return mf::silu(t[0]); }, [](C c, G g) { return silu(c, g[0]); }, {}});
  ops.push_back({"exp", {{7, 6}}, [](V t) { return mf::exp(t[0]); }, [](C c, G g) { return exp(c, g[0]); }, {}});
  ops.push_back({"tanh", {{7, 6}}, [](V t) { return mf::tanh(t[0]); }, [](C c, G g) { return tanh(c, g[0]); }, {}});
  ops.push_back({"softmax", {{5, 3, 7}}, [](V t) { return mf::softmax(t[0], -1); },
                 [](C c, G g) { return softmax(c, g[0]); }, {}});
  ops.push_back({"layer_norm", {{5, 7}, {7}, {7}}, [](V t) { return mf::layer_norm(t[0], t[1], t[2]); },
                 [](C c, G g) { return layer_norm(c, g[0], g[1], g[2]); }, {}});
  ops.push_back({"sum(axis=0)", {{7, 6}}, [](V t) { return mf::sum(t[0], {0}); },
                 [](C c, G g) { return sum(c, g[0], 0); }, {}});
  ops.push_back({"sum(axis=1)", {{5, 3, 6}}, [](V t) { return mf::sum(t[0], {1}); },
                 [](C c, G g) { return sum(c, g[0], 1); }, {}});
  ops.push_back({"transpose(0,2)", {{5, 3, 6}}, [](V t) { return mf::transpose(t[0], 0, 2); },
                 [](C c, G g) { return transpose(c, g[0], 0, 2); }, {}});
  // Layout ops, on their inputs' bound context (their signatures are checked through the results).
  ops.push_back({"reshape split axis", {{5, 12, 3}}, [](V t) { return mf::reshape(t[0], {5, 4, 9}); },
                 [](C, G g) { return reshape(g[0], {5, 4, 9}); }, {}});
  ops.push_back({"reshape merge axes", {{5, 4, 6}}, [](V t) { return mf::reshape(t[0], {5, 24}); },
                 [](C, G g) { return reshape(g[0], {5, -1}); }, {}});
  ops.push_back({"select", {{5, 3, 6}}, [](V t) { return mf::squeeze(mf::narrow(t[0], 1, 2, 1), 1); },
                 [](C, G g) { return select(g[0], 1, 2); }, {}});
  // unbind's pieces 0 and 2 (piece 1 gets no gradient: zeros in its slot).
  ops.push_back({"unbind", {{5, 3, 6}},
                 [](V t) { return mf::add(mf::squeeze(mf::narrow(t[0], 1, 0, 1), 1), mf::scale(mf::squeeze(mf::narrow(t[0], 1, 2, 1), 1), 3.0)); },
                 [](C c, G g) {
                   const std::vector<GlobalTensor> p = unbind(g[0], 1);
                   return add(c, p[0], scale(c, p[2], 3.0));
                 }, {}});
  static const Tensor rows = mf::from_vector<int64_t>({4, 0, 4, 2}, {4});  // a repeat: gradients add up
  ops.push_back({"index_select", {{6, 3, 5}}, [](V t) { return mf::index_select(t[0], 0, rows); },
                 [](C, G g) { return index_select(g[0], 0, rows); }, {}});
  ops.push_back({"permute", {{5, 3, 6}}, [](V t) { return mf::permute(t[0], {2, 0, 1}); },
                 [](C, G g) { return permute(g[0], {2, 0, 1}); }, {}});
  ops.push_back({"expand", {{5, 1, 6}}, [](V t) { return mf::expand(t[0], {5, 3, 6}); },
                 [](C, G g) { return expand(g[0], {5, 3, 6}); }, {}});
  ops.push_back({"rms_norm", {{5, 7}, {7}}, [](V t) { return mf::rms_norm(t[0], t[1], 1e-5); },
                 [](C, G g) { return rms_norm(g[0], g[1], 1e-5); }, {}});
  static const std::vector<double> freq = {1.0, 0.1, 0.01};
  ops.push_back({"rope", {{2, 5, 3, 6}}, [](V t) { return mf::rope(t[0], freq); },
                 [](C, G g) { return rope(g[0], freq); }, {}});
  for (OpCase& op : ops) {
    const std::vector<Shape>& sh = op.shapes;
    const std::string& n = op.name;
    if (n.find("matmul") != std::string::npos) op.signatures = matmul_signatures(sh[0], sh[1]);
    else if (n.rfind("affine", 0) == 0) op.signatures = affine_signatures(sh[0], sh.size() == 3);
    else if (n == "linear") op.signatures = linear_signatures(sh[0], true);
    else if (n.rfind("add", 0) == 0 || n == "sub") op.signatures = binary_signatures(sh[0], sh[1], Linearity::kAdditive);
    else if (n.rfind("mul", 0) == 0) op.signatures = binary_signatures(sh[0], sh[1], Linearity::kMultiplicative);
    else if (n == "scale") op.signatures = unary_signatures(sh[0], true);
    else if (n == "softmax") op.signatures = last_axis_signatures(sh[0], 0);
    else if (n == "layer_norm") op.signatures = last_axis_signatures(sh[0], 2);
    else if (n == "sum(axis=0)") op.signatures = sum_signatures(sh[0], 0);
    else if (n == "sum(axis=1)") op.signatures = sum_signatures(sh[0], 1);
    else if (n == "transpose(0,2)") op.signatures = transpose_signatures(sh[0], 0, 2);
    else if (n.rfind("reshape", 0) == 0 || n == "select" || n == "unbind" || n == "index_select" || n == "permute" || n == "expand" || n == "rope") continue;
    else if (n == "rms_norm") op.signatures = last_axis_signatures(sh[0], 1);
    else op.signatures = unary_signatures(sh[0], false);  // gelu, relu, silu, tanh, exp
  }
  return ops;
}

class GlobalOpsTest : public ::testing::Test {
 protected:
  void SetUp() override { world = mf::comm::mpi_world(); }
  mf::comm::CommPtr world;
  std::unique_ptr<PlacementBinding> binding;  // for the ops that take no context
  Mesh world_mesh() {
    std::vector<int> r(static_cast<size_t>(world->size()));
    for (int i = 0; i < world->size(); ++i) r[static_cast<size_t>(i)] = i;
    return bound(Mesh{placement(mf::DeviceType::kCPU, r), {world.get()}, world->rank()});
  }
  Mesh bound(Mesh m) {
    binding = std::make_unique<PlacementBinding>(m.placement, m.comms, m.world_rank);
    return m;
  }
};

TEST_F(GlobalOpsTest, EverySignatureOneAxis) {
  const Mesh mesh = world_mesh();
  int combos = 0;
  for (const OpCase& op : all_ops()) {
    const int n = check_all(mesh, op);
    EXPECT_GT(n, 0) << op.name;
    combos += n;
  }
  RecordProperty("combinations", combos);
  if (world->rank() == 0) std::printf("%d input SBP combinations on %s\n", combos, mesh.placement->str().c_str());
}

TEST_F(GlobalOpsTest, EverySignatureTwoByTwoMesh) {
  if (world->size() != 4) GTEST_SKIP() << "a 2x2 mesh needs 4 ranks";
  DeviceMesh dm(mf::global::ParallelDims{{"dp", 2}, {"tp", 2}}, *world);
  // The (dp, tp) square of the mesh (its pp and cp axes have one rank).
  const Placement* square = placement(mf::DeviceType::kCPU, std::vector<int64_t>{2, 2}, std::vector<int>{0, 1, 2, 3});
  const Mesh mesh = bound(Mesh{square, {&dm.comm("dp"), &dm.comm("tp")}, world->rank()});
  int combos = 0;
  for (const OpCase& op : all_ops()) {
    const int n = check_all(mesh, op);
    EXPECT_GT(n, 0) << op.name;
    combos += n;
  }
  RecordProperty("combinations", combos);
  if (world->rank() == 0) std::printf("%d input SBP combinations on %s\n", combos, mesh.placement->str().c_str());
}

// Megatron's MLP on the world as one tensor-parallel group: x B, w1 S(1) (columns), w2 S(0)
// (rows). Inference needs no communication until the output, which comes out P; boxing it to B
// is the one all-reduce. The second step hits the signature cache for every op.
TEST_F(GlobalOpsTest, TensorParallelMlpMovesNothingUntilTheOutput) {
  const Mesh mesh = world_mesh();
  const std::vector<int64_t> coord = mesh.coord(), shape = mesh.placement->mesh_shape();
  const NdSbp* B = nd_sbp({Sbp::broadcast()});
  const NdSbp* S0 = nd_sbp({Sbp::split(0)});
  const NdSbp* S1 = nd_sbp({Sbp::split(1)});
  Tensor X = mft::formula({6, 8}, 0.1, 0.2, 7), W1 = mft::formula({8, 12}, -0.3, 0.05, 9), B1 = mft::formula({12}, 0.2, 0.1, 5);
  Tensor W2 = mft::formula({12, 8}, 0.4, -0.07, 11), B2 = mft::formula({8}, -0.1, 0.03, 3);
  auto global = [&](const Tensor& t, const NdSbp* s) {
    return to_global(mft::piece(t, *s, shape, coord), mesh.placement, s, t.shape(), mesh.world_rank);
  };
  const GlobalContext ctx{mesh.comms, mesh.world_rank};
  for (int step = 0; step < 2; ++step) {
    const SignatureCacheStats before = signature_cache_stats();
    world->reset_stats();
    GlobalTensor h = gelu(ctx, affine(ctx, global(X, B), global(W1, S1), global(B1, S0)));
    GlobalTensor y = affine(ctx, h, global(W2, S0), global(B2, B));
    EXPECT_EQ(h.nd_sbp, S1);
    EXPECT_EQ(y.nd_sbp, nd_sbp({Sbp::partial_sum()}));
    EXPECT_EQ(world->stats().total_bytes(), 0u);
    GlobalTensor yb = box_to(y, B, ctx.axis_comms);
    EXPECT_EQ(world->stats().count(mf::comm::OpKind::kAllReduce), 1u);
    mft::expect_tensor_close(yb.local, mf::affine(mf::gelu(mf::affine(X, W1, B1)), W2, B2), "mlp step " + std::to_string(step), 1e-10);
    const SignatureCacheStats after = signature_cache_stats();
    if (step == 1) {
      EXPECT_EQ(after.hits - before.hits, 3u);
      EXPECT_EQ(after.misses, before.misses);
    }
  }
}

// Data parallel: x S(0), w B -> y S(0) with nothing moved; x's rows uneven on 4 ranks.
TEST_F(GlobalOpsTest, DataParallelAffineMovesNothing) {
  const Mesh mesh = world_mesh();
  const std::vector<int64_t> coord = mesh.coord(), shape = mesh.placement->mesh_shape();
  const NdSbp* S0 = nd_sbp({Sbp::split(0)});
  const NdSbp* B = nd_sbp({Sbp::broadcast()});
  Tensor X = mft::formula({7, 5}, 0.1, 0.2, 7), W = mft::formula({5, 3}, -0.3, 0.05, 9);
  const GlobalContext ctx{mesh.comms, mesh.world_rank};
  world->reset_stats();
  GlobalTensor y = affine(ctx, to_global(mft::piece(X, *S0, shape, coord), mesh.placement, S0, {7, 5}, mesh.world_rank),
                          to_global(W, mesh.placement, B, {5, 3}, mesh.world_rank));
  EXPECT_EQ(world->stats().total_bytes(), 0u);
  EXPECT_EQ(y.nd_sbp, S0);
  mft::expect_tensor_close(y.local, mft::piece(mf::affine(X, W), *S0, shape, coord), "data parallel affine", 1e-10);
}

// Dropout on a split tensor draws the numbers of its logical positions: each piece, forward and
// backward, is the slice of the whole tensor's dropout (uneven splits included).
TEST_F(GlobalOpsTest, DropoutPiecesAreTheWholeTensorsSlices) {
  const Mesh mesh = world_mesh();
  const std::vector<int64_t> coord = mesh.coord(), shape = mesh.placement->mesh_shape();
  Tensor X = mft::formula({5, 7, 6}, 0.1, 0.2, 7);
  mf::manual_seed(11);
  Tensor Xw = mf::clone(X).set_requires_grad(true);
  Tensor Y = mf::dropout(Xw, 0.4);
  mf::sum(mf::mul(Y, X)).backward();
  for (const NdSbp* s : {nd_sbp({Sbp::broadcast()}), nd_sbp({Sbp::split(0)}), nd_sbp({Sbp::split(1)}),
                         nd_sbp({Sbp::split(2)})}) {
    mf::manual_seed(11);
    Tensor xl = mf::contiguous(mft::piece(X, *s, shape, coord)).set_requires_grad(true);
    GlobalTensor y = dropout(to_global(xl, mesh.placement, s, X.shape(), mesh.world_rank), 0.4);
    EXPECT_EQ(y.nd_sbp, s);
    mft::expect_tensor_close(y.local, mft::piece(Y.detach(), *s, shape, coord), "dropout " + s->str(), 0.0);
    mf::sum(mf::mul(y.local, mft::piece(X, *s, shape, coord))).backward();
    mft::expect_tensor_close(xl.grad(), mft::piece(Xw.grad(), *s, shape, coord), "dropout grad " + s->str(), 0.0);
  }
}

// Global attention of q, k, v (B, H, T, D) split by `sbp` on the world against the whole's, both
// seeded alike: the output and every input's gradient (of sum(y * q)) are the whole's slices, and
// the bytes moved are `sent(stats)`'s.
void expect_attention_is_the_wholes(const Mesh& mesh, Communicator& world, const NdSbp* sbp, const Shape& shape,
                                    const mf::AttentionOptions& o, const std::string& what,
                                    const std::function<bool(const mf::comm::CommStats&)>& sent) {
  const std::vector<int64_t> coord = mesh.coord(), mesh_shape = mesh.placement->mesh_shape();
  Tensor Q = mft::formula(shape, 0.1, 0.2, 7), K = mft::formula(shape, -0.2, 0.1, 5), V = mft::formula(shape, 0.3, -0.1, 9);
  mf::manual_seed(4);
  std::vector<Tensor> whole{mf::clone(Q).set_requires_grad(true), mf::clone(K).set_requires_grad(true),
                            mf::clone(V).set_requires_grad(true)};
  Tensor Y = mf::scaled_dot_product_attention(whole[0], whole[1], whole[2], o);
  mf::sum(mf::mul(Y, Q)).backward();
  std::vector<Tensor> loc;
  std::vector<GlobalTensor> g;
  for (const Tensor& t : {Q, K, V}) {
    loc.push_back(mf::contiguous(mft::piece(t, *sbp, mesh_shape, coord)).set_requires_grad(true));
    g.push_back(to_global(loc.back(), mesh.placement, sbp, t.shape(), mesh.world_rank));
  }
  mf::manual_seed(4);
  world.reset_stats();
  GlobalTensor y = attention(g[0], g[1], g[2], o);
  EXPECT_EQ(y.nd_sbp, sbp) << what;
  mft::expect_tensor_close(y.local, mft::piece(Y.detach(), *sbp, mesh_shape, coord), what, 1e-12);
  mf::sum(mf::mul(y.local, mft::piece(Q, *sbp, mesh_shape, coord))).backward();
  EXPECT_TRUE(sent(world.stats())) << what << ": " << world.stats().total_bytes() << " bytes";
  for (size_t i = 0; i < 3; ++i)
    mft::expect_tensor_close(loc[i].grad(), mft::piece(whole[i].grad(), *sbp, mesh_shape, coord),
                             what + " grad " + std::to_string(i), 1e-12);
}

// Attention with its heads split (S(1)) computes and drops out exactly the whole's heads, moving
// nothing.
TEST_F(GlobalOpsTest, AttentionWithSplitHeadsIsTheWholesSlice) {
  mf::AttentionOptions o;
  o.causal = true;
  o.dropout_p = 0.3;
  expect_attention_is_the_wholes(world_mesh(), *world, nd_sbp({Sbp::split(1)}), {2, 2 * world->size(), 5, 3}, o,
                                 "attention heads", [](const mf::comm::CommStats& s) { return s.total_bytes() == 0; });
}

// The sequence split (context parallelism): attention of S(2) q, k, v runs around the ring and
// equals the whole's slice, forward and backward — causal (load-balanced when the chunks halve,
// and not), non-causal, with a sliding window that reaches back over chunk borders, with dropout on
// the probabilities (each score's draw by its logical position) and with padded keys. Nothing but
// the ring's point-to-point messages moves: no gathered keys.
TEST_F(GlobalOpsTest, AttentionWithSplitSequenceIsTheWholesSlice) {
  const int64_t n = world->size(), B = 2, H = 2, D = 4;
  struct Case {
    const char* name;
    int64_t chunk;  // positions per rank: even chunks of causal attention are load-balanced
    bool causal;
    int64_t window;
    double dropout;
    bool padded;
  };
  for (const Case& c : {Case{"causal, balanced", 4, true, 0, 0.0, false}, Case{"causal, odd chunks", 3, true, 0, 0.0, false},
                        Case{"full", 3, false, 0, 0.0, false}, Case{"window", 4, true, 5, 0.0, false},
                        Case{"dropout, balanced", 4, true, 0, 0.3, false}, Case{"padded", 3, false, 0, 0.2, true}}) {
    const int64_t T = c.chunk * n;
    Tensor pad = mf::zeros({B, T}, mf::DType::kBool);
    pad.data<bool>()[T - 1] = pad.data<bool>()[T + 1] = true;  // a last key of row 0, a key of row 1
    mf::AttentionOptions o;
    o.causal = c.causal;
    o.window = c.window;
    o.dropout_p = c.dropout;
    if (c.padded) o.key_padding_mask = pad;
    expect_attention_is_the_wholes(world_mesh(), *world, nd_sbp({Sbp::split(2)}), {B, H, T, D}, o,
                                   std::string("ring attention (") + c.name + ")", [](const mf::comm::CommStats& s) {
                                     return s.total_bytes() == s.bytes(mf::comm::OpKind::kSend);
                                   });
  }
}

// The embedding of a vocabulary-split table and the cross-entropy of vocabulary-split logits
// equal the whole ones; the local gradients are the whole's slices summed over the ranks (each
// rank's copy of the B result is differentiated).
TEST_F(GlobalOpsTest, VocabularySplitEmbeddingAndCrossEntropy) {
  const Mesh mesh = world_mesh();
  const std::vector<int64_t> coord = mesh.coord(), shape = mesh.placement->mesh_shape();
  const double n = static_cast<double>(world->size());
  const NdSbp* S0 = nd_sbp({Sbp::split(0)});
  const NdSbp* S1 = nd_sbp({Sbp::split(1)});
  const NdSbp* B = nd_sbp({Sbp::broadcast()});
  Tensor W = mft::formula({11, 4}, 0.1, 0.2, 7).set_requires_grad(true);
  Tensor ids = mf::from_vector(std::vector<int64_t>{3, 10, 0, 7, 7, 1}, {2, 3});
  Tensor C = mft::formula({2, 3, 4}, -0.3, 0.1, 5);
  mf::sum(mf::mul(mf::embedding(W, ids), C)).backward();
  Tensor wl = mf::contiguous(mft::piece(W.detach(), *S0, shape, coord)).set_requires_grad(true);
  GlobalTensor e = embedding(to_global(wl, mesh.placement, S0, {11, 4}, mesh.world_rank),
                             to_global(ids, mesh.placement, B, {2, 3}, mesh.world_rank));
  EXPECT_EQ(e.nd_sbp, B);
  mft::expect_tensor_close(e.local, mf::embedding(W.detach(), ids), "vocabulary-split embedding", 1e-12);
  mf::sum(mf::mul(e.local, C)).backward();
  mft::expect_tensor_close(wl.grad(), mf::scale(mft::piece(W.grad(), *S0, shape, coord), n), "embedding grad", 1e-12);

  Tensor L = mft::formula({6, 11}, 0.2, 0.3, 7).set_requires_grad(true);
  Tensor labels = mf::from_vector(std::vector<int64_t>{3, -100, 10, 0, 5, 9}, {6});
  mf::cross_entropy(L, labels).backward();
  Tensor ll = mf::contiguous(mft::piece(L.detach(), *S1, shape, coord)).set_requires_grad(true);
  GlobalTensor loss = cross_entropy(to_global(ll, mesh.placement, S1, {6, 11}, mesh.world_rank),
                                    to_global(labels, mesh.placement, B, {6}, mesh.world_rank));
  EXPECT_EQ(loss.nd_sbp, B);
  EXPECT_NEAR(loss.local.item(), mf::cross_entropy(L.detach(), labels).item(), 1e-12);
  loss.local.backward();
  mft::expect_tensor_close(ll.grad(), mf::scale(mft::piece(L.grad(), *S1, shape, coord), n), "cross-entropy grad", 1e-12);
}

// Recomputation of global ops: the same outputs, SBPs and gradients as running them directly.
TEST_F(GlobalOpsTest, CheckpointKeepsSbpsAndGradients) {
  const Mesh mesh = world_mesh();
  const std::vector<int64_t> coord = mesh.coord(), shape = mesh.placement->mesh_shape();
  const NdSbp* B = nd_sbp({Sbp::broadcast()});
  const NdSbp* S1 = nd_sbp({Sbp::split(1)});
  Tensor X = mft::formula({3, 8}, 0.1, 0.2, 7), W = mft::formula({8, 2 * world->size()}, -0.3, 0.05, 9);
  auto fn = [](const std::vector<GlobalTensor>& in) { return std::vector<GlobalTensor>{gelu(affine(in[0], in[1]))}; };
  std::vector<Tensor> grads[2];
  for (int recompute = 0; recompute < 2; ++recompute) {
    Tensor xl = mf::clone(X).set_requires_grad(true);
    Tensor wl = mf::contiguous(mft::piece(W, *S1, shape, coord)).set_requires_grad(true);
    std::vector<GlobalTensor> in{to_global(xl, mesh.placement, B, X.shape(), mesh.world_rank),
                                 to_global(wl, mesh.placement, S1, W.shape(), mesh.world_rank)};
    GlobalTensor y = recompute ? mf::global::checkpoint(fn, in)[0] : fn(in)[0];
    EXPECT_EQ(y.nd_sbp, S1) << "recompute " << recompute;
    EXPECT_EQ(y.logical_shape, Shape({3, 2 * world->size()}));
    mf::sum(mf::mul(y.local, y.local)).backward();
    grads[recompute] = {xl.grad(), wl.grad()};
  }
  for (size_t i = 0; i < 2; ++i) mft::expect_tensor_close(grads[1][i], grads[0][i], "checkpoint grad", 0.0);
}

TEST_F(GlobalOpsTest, InputsOnDifferentPlacementsThrow) {
  if (world->size() < 2) GTEST_SKIP();
  const Mesh mesh = world_mesh();
  const NdSbp* B = nd_sbp({Sbp::broadcast()});
  const Placement* other = placement(mf::DeviceType::kCPU, {2}, {1, 0});
  Tensor t = mf::zeros({2, 2}, mf::DType::kF64);
  const GlobalContext ctx{mesh.comms, mesh.world_rank};
  GlobalTensor a = to_global(t, mesh.placement, B, {2, 2}, mesh.world_rank);
  GlobalTensor b = mesh.world_rank < 2 ? to_global(t, other, B, {2, 2}, mesh.world_rank) : a;
  if (mesh.world_rank < 2) MFT_EXPECT_ERROR(add(ctx, a, b), "global add", "input 1 is on cpu:[1,0]");
}

}  // namespace
