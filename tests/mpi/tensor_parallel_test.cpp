// Tensor parallelism on the world as one tp group (2 or 4 ranks): a GPT-2 split by heads, MLP
// columns/rows and vocabulary against the same model on one process (computed on every rank),
// the bytes each rank holds, and Megatron's communication count per layer.
#include <cmath>
#include <string>
#include <vector>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/global/sbp.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/generator.h"
#include "meshflow/tensor/allocator.h"
#include "testing.h"

namespace {

using mf::DType;
using mf::Tensor;
using mf::comm::OpKind;

mf::models::Gpt2Config small_config() {
  mf::models::Gpt2Config c;
  c.vocab_size = 67;  // split unevenly over 2 and 4 ranks
  c.max_seq_length = 10;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_attention_heads = 4;
  c.ffn_hidden_size = 32;
  c.dtype = DType::kF64;
  return c;  // dropout 0.1 everywhere
}

std::pair<Tensor, Tensor> batch(int64_t rows, int64_t T, int64_t vocab) {
  std::vector<int64_t> ids, labels;
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t t = 0; t < T; ++t) {
      ids.push_back((b * 29 + t * 11 + 5) % vocab);
      labels.push_back((b * 13 + t * 3 + 2) % vocab);
    }
  return {mf::from_vector(ids, {rows, T}), mf::from_vector(labels, {rows, T})};
}

// The world as the layers' one dimension "tp".
mf::layers::Place world_tp(bool sequence_parallel = false) {
  return mf::layers::Place({{"tp", mf::comm::mpi_world()}}, mf::comm::mpi_world(), sequence_parallel);
}

// Loss and gradients of the tp model equal the one-process model's: split parameters' local
// gradients are their slices of the full gradient; replicated ones are partial sums over tp.
TEST(TensorParallel, GradientsMatchOneProcess) {
  const mf::layers::Place tp = world_tp();
  const mf::models::Gpt2Config cfg = small_config();
  auto [ids, labels] = batch(3, 10, cfg.vocab_size);

  mf::models::Gpt2Model ref(cfg);
  ref.init_weights(21);
  mf::manual_seed(8);
  Tensor ref_loss = ref.loss(ids, labels);
  ref_loss.backward();

  mf::models::Gpt2Model par(cfg, {tp, {}});
  par.init_weights(21);
  mf::manual_seed(8);
  Tensor loss = par.loss(ids, labels);
  EXPECT_NEAR(loss.item(), ref_loss.item(), 1e-12);
  loss.backward();  // the loss head seeds each tp rank with 1/tp of the gradient

  auto want = ref.named_parameters(), got = par.named_parameters();
  auto layouts = par.parameter_layouts();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& layout = layouts[i];
    // Values: the slice of the one-process parameter (initialisation by logical position).
    std::vector<double> v = mft::to_f64(got[i].second), vw = mft::to_f64(mf::nn::slice_local(want[i].second, layout, tp.size(), tp.rank()));
    ASSERT_EQ(v.size(), vw.size()) << got[i].first;
    for (size_t k = 0; k < v.size(); ++k) ASSERT_EQ(v[k], vw[k]) << got[i].first << "[" << k << "]";
    Tensor g = got[i].second.grad();
    if (layout.replicated()) {
      mf::NoGradGuard ng;
      g = mf::contiguous(g);
      tp.comm("tp")->all_reduce(g)->wait();
    }
    std::vector<double> gg = mft::to_f64(g), gw = mft::to_f64(mf::nn::slice_local(want[i].second.grad(), layout, tp.size(), tp.rank()));
    int bad = 0;
    for (size_t k = 0; k < gg.size() && bad < 3; ++k)
      if (std::abs(gg[k] - gw[k]) > 1e-12 + 1e-9 * std::abs(gw[k])) {
        ADD_FAILURE() << got[i].first << "[" << k << "]: tp " << gg[k] << ", one process " << gw[k];
        ++bad;
      }
  }
}

// Split weights take 1/tp of the bytes (a rank's share of an uneven vocabulary split is
// ceil(V / tp) rows), counted by the allocator.
TEST(TensorParallel, SplitWeightsTakeTheirShareOfTheBytes) {
  const mf::layers::Place tp = world_tp();
  mf::models::Gpt2Config cfg = small_config();
  cfg.vocab_size = 64;  // even split: exactly 1/tp
  cfg.dtype = DType::kF32;
  auto& alloc = mf::allocator_for(mf::cpu_device());
  const int64_t before = alloc.stats().current_bytes;
  mf::models::Gpt2Model par(cfg, {tp, {}});
  const int64_t held = alloc.stats().current_bytes - before;
  mf::models::Gpt2Model whole(cfg);
  int64_t split_logical = 0, replicated = 0, local = 0;
  auto layouts = par.parameter_layouts();
  auto params = par.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t logical = mf::shape_numel(layouts[i].logical) * 4;
    local += static_cast<int64_t>(params[i].nbytes());
    if (layouts[i].replicated()) {
      replicated += logical;
      EXPECT_EQ(static_cast<int64_t>(params[i].nbytes()), logical);
    } else {
      split_logical += logical;
      EXPECT_EQ(static_cast<int64_t>(params[i].nbytes()) * tp.size(), logical) << i;
    }
  }
  EXPECT_EQ(split_logical + replicated, whole.num_parameters() * 4);
  EXPECT_EQ(local, split_logical / tp.size() + replicated);
  EXPECT_EQ(held, local);  // the allocator holds exactly the local pieces
  EXPECT_GT(split_logical, 8 * replicated);  // the split weights are nearly all of the model
}

// Megatron's count: per transformer layer, 2 all-reduces forward (attention and MLP outputs)
// and 2 backward (their duals), each of the (B, T, C) activation, and nothing else.
TEST(TensorParallel, LayerCommunicatesLikeMegatron) {
  const mf::layers::Place tp = world_tp();
  const int n = tp.size();
  mf::models::Gpt2Config cfg = small_config();
  const mf::layers::Place& place = tp;
  mf::models::Gpt2Block block(cfg, place);
  Tensor x = mf::full({2, 10, cfg.hidden_size}, 0.25, DType::kF64).set_requires_grad(true);
  tp.comm("tp")->reset_stats();
  Tensor y = block.forward(place.wrap(x)).local;
  const auto fwd = tp.comm("tp")->stats();
  EXPECT_EQ(fwd.count(OpKind::kAllReduce), 2u);
  EXPECT_EQ(fwd.total_bytes(), fwd.bytes(OpKind::kAllReduce));
  mf::scale(mf::sum(y), 1.0 / n).backward();
  const auto all = tp.comm("tp")->stats();
  EXPECT_EQ(all.count(OpKind::kAllReduce), 4u);
  uint64_t calls = 0;
  for (uint64_t c : all.calls) calls += c;
  EXPECT_EQ(calls, 4u);
  const double activation = 2.0 * 10 * cfg.hidden_size * 8;
  EXPECT_EQ(static_cast<double>(all.bytes(OpKind::kAllReduce)), 4 * std::floor(2.0 * (n - 1) / n * activation));
}

// With sequence parallelism the layer's input and output are S(1) pieces of the sequence: each
// all-reduce becomes a reduce-scatter (row outputs) and the column inputs are all-gathered;
// forward 2 all-gathers + 2 reduce-scatters, backward their duals (2 reduce-scatters + 2
// all-gathers) — Megatron-LM's count, half the bytes of each all-reduce per collective. The
// output equals the whole layer's slice (uneven sequence: 11 positions).
TEST(TensorParallel, SequenceParallelLayerUsesGatherAndReduceScatter) {
  const mf::layers::Place tp = world_tp();
  const int n = tp.size();
  mf::models::Gpt2Config cfg = small_config();
  cfg.embedding_dropout_prob = cfg.attention_dropout_prob = cfg.output_dropout_prob = 0.0;
  const int64_t T = 11, C = cfg.hidden_size;
  const mf::layers::Place& whole_place = tp;
  mf::models::Gpt2Block whole(cfg, whole_place);
  const mf::layers::Place sp_place = world_tp(true);
  mf::models::Gpt2Block sp(cfg, sp_place);
  {  // same weights
    mf::NoGradGuard ng;
    auto a = whole.parameters(), b = sp.parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      mf::normal_(a[i], 0.0, 0.2);
      mf::copy_(b[i], a[i]);
    }
  }
  std::vector<double> xv(static_cast<size_t>(2 * T * C));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.37 * static_cast<double>(i));
  Tensor x = mf::from_vector(xv, {2, T, C});
  Tensor y_whole = whole.forward(whole_place.wrap(x)).local;
  const int64_t t0 = mf::global::split_start(T, n, tp.rank()), tl = mf::global::split_size(T, n, tp.rank());
  Tensor x_piece = mf::contiguous(mf::narrow(x, 1, t0, tl)).set_requires_grad(true);
  tp.comm("tp")->reset_stats();
  Tensor y = sp.forward(sp_place.wrap(x_piece, sp_place.hidden_sbp(), {2, T, C})).local;
  const auto fwd = tp.comm("tp")->stats();
  EXPECT_EQ(fwd.count(OpKind::kAllGather), 2u);
  EXPECT_EQ(fwd.count(OpKind::kReduceScatter), 2u);
  EXPECT_EQ(fwd.count(OpKind::kAllReduce), 0u);
  std::vector<double> got = mft::to_f64(y), want = mft::to_f64(mf::contiguous(mf::narrow(y_whole, 1, t0, tl)));
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) ASSERT_NEAR(got[k], want[k], 1e-12) << k;
  mf::sum(y).backward();
  const auto all = tp.comm("tp")->stats();
  EXPECT_EQ(all.count(OpKind::kAllGather), 4u);
  EXPECT_EQ(all.count(OpKind::kReduceScatter), 4u);
  uint64_t calls = 0;
  for (uint64_t c : all.calls) calls += c;
  EXPECT_EQ(calls, 8u);
}

// The layers on a Place of two named dimensions (4 ranks as dp=2 x tp=2): the batch S(0) on "dp",
// the weights split on "tp" as on one dimension. The block's output is its rows of the one-rank
// block's; "tp" carries Megatron's two all-reduces forward and two backward, "dp" nothing until
// the gradients (their sum over dp, and over tp for the replicated ones, is the one-rank gradient).
TEST(TensorParallel, LayersRunOnATwoDimensionalPlace) {
  const mf::comm::CommPtr world = mf::comm::mpi_world();
  if (world->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  const mf::global::DeviceMesh mesh(mf::global::ParallelDims({{"dp", 2}, {"tp", 2}}), *world);
  const mf::layers::Place place({{"dp", mesh.comm_ptr("dp")}, {"tp", mesh.comm_ptr("tp")}}, world, false);
  ASSERT_EQ(place.placement(mf::cpu_device())->mesh_shape(), (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(place.size(), 2);
  mf::models::Gpt2Config cfg = small_config();
  cfg.embedding_dropout_prob = cfg.attention_dropout_prob = cfg.output_dropout_prob = 0.0;
  const int64_t B = 4, T = 10, C = cfg.hidden_size, rows = B / 2, r0 = rows * place.rank("dp");
  const mf::layers::Place one;
  mf::models::Gpt2Block whole(cfg, one), split(cfg, place);
  const auto layouts = split.parameter_layouts();
  {
    mf::NoGradGuard ng;
    auto a = whole.parameters(), b = split.parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      mf::normal_(a[i], 0.0, 0.2);  // the same numbers on every rank (the default generator)
      mf::copy_(b[i], mf::nn::slice_local(a[i], layouts[i], place.size(), place.rank()));
    }
  }
  std::vector<double> xv(static_cast<size_t>(B * T * C));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::cos(0.29 * static_cast<double>(i));
  const Tensor x = mf::from_vector(xv, {B, T, C});
  const Tensor y_whole = whole.forward(one.wrap(x)).local;
  mf::sum(y_whole).backward();

  const mf::global::NdSbp* rows_on_dp = place.sbp({{"dp", mf::global::Sbp::split(0)}});
  ASSERT_EQ(rows_on_dp->str(), "(S(0), B)");
  mesh.comm("dp").reset_stats();
  mesh.comm("tp").reset_stats();
  const mf::layers::GlobalTensor y =
      split.forward(place.wrap(mf::contiguous(mf::narrow(x, 0, r0, rows)), rows_on_dp, {B, T, C}));
  EXPECT_EQ(y.nd_sbp, rows_on_dp);
  std::vector<double> got = mft::to_f64(y.local), want = mft::to_f64(mf::contiguous(mf::narrow(y_whole, 0, r0, rows)));
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) ASSERT_NEAR(got[k], want[k], 1e-12) << k;
  EXPECT_EQ(mesh.comm("tp").stats().count(OpKind::kAllReduce), 2u);
  mf::scale(mf::sum(y.local), 1.0 / place.size()).backward();  // a B tensor's gradient is P over tp
  EXPECT_EQ(mesh.comm("tp").stats().count(OpKind::kAllReduce), 4u);
  uint64_t dp_calls = 0;
  for (uint64_t c : mesh.comm("dp").stats().calls) dp_calls += c;
  EXPECT_EQ(dp_calls, 0u);

  auto a = whole.named_parameters(), b = split.named_parameters();
  for (size_t i = 0; i < b.size(); ++i) {
    mf::NoGradGuard ng;
    Tensor g = mf::contiguous(b[i].second.grad());
    mesh.comm("dp").all_reduce(g)->wait();
    if (layouts[i].replicated()) mesh.comm("tp").all_reduce(g)->wait();
    std::vector<double> gg = mft::to_f64(g),
                        gw = mft::to_f64(mf::nn::slice_local(a[i].second.grad(), layouts[i], place.size(), place.rank()));
    ASSERT_EQ(gg.size(), gw.size()) << b[i].first;
    for (size_t k = 0; k < gg.size(); ++k) ASSERT_NEAR(gg[k], gw[k], 1e-10 + 1e-9 * std::abs(gw[k])) << b[i].first << k;
  }
}

}  // namespace
