// Data-parallel gradient reduction (GradReducer) on the world: each rank runs a small GPT-2 (f64,
// dropout on) on its slice of a global batch under a BatchSliceGuard; after finish() every
// rank's gradients must equal those of the single-process run of the whole batch (computed on
// every rank as the reference), the bytes sent must be the ring all-reduce's 2(N-1)/N x gradient
// bytes, and the buckets must have been launched while backward still ran, the parameters' own
// gradients freed as they were copied in.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/parallel/grad_reducer.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/batch_slice.h"
#include "meshflow/random/generator.h"
#include "testing.h"

namespace {

using mf::DType;
using mf::Tensor;

mf::models::Gpt2Config small_config() {
  mf::models::Gpt2Config c;
  c.vocab_size = 61;
  c.max_seq_length = 12;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_attention_heads = 2;
  c.dtype = DType::kF64;
  return c;  // dropout 0.1 everywhere (the defaults)
}

// Rows [row0, row0 + rows) of the logical (global) batch: ids and labels from formulas.
std::pair<Tensor, Tensor> batch_rows(int64_t row0, int64_t rows, int64_t T, int64_t vocab) {
  std::vector<int64_t> ids, labels;
  for (int64_t b = row0; b < row0 + rows; ++b)
    for (int64_t t = 0; t < T; ++t) {
      ids.push_back((b * 31 + t * 7 + 3) % vocab);
      labels.push_back((b * 17 + t * 5 + 1) % vocab);
    }
  return {mf::from_vector(ids, {rows, T}), mf::from_vector(labels, {rows, T})};
}

TEST(GradReducer, AveragesGradientsOverlapsBackwardAndSendsRingBytes) {
  mf::comm::CommPtr world = mf::comm::mpi_world();
  const int n = world->size(), r = world->rank();
  const int64_t rows = 2, T = 12;
  const mf::models::Gpt2Config cfg = small_config();

  // Reference: the whole global batch on one process.
  mf::models::Gpt2Model ref(cfg);
  ref.init_weights(11);
  mf::manual_seed(5);
  auto [ids, labels] = batch_rows(0, rows * n, T, cfg.vocab_size);
  ref.loss(ids, labels).backward();

  // Data parallel: this rank's rows, gradients reduced in small buckets.
  mf::models::Gpt2Model dp(cfg);
  dp.init_weights(11);
  const int64_t bucket_bytes = 8 << 10;
  mf::parallel::GradReducer reducer(dp.parameters(), world, bucket_bytes);
  ASSERT_GT(reducer.num_buckets(), 3);
  // A hook after the reducer's: the gradient is in its bucket, the parameter's own .grad freed.
  int hooks_fired = 0, grads_left = 0;
  for (Tensor p : dp.parameters())
    p.register_grad_ready_hook([&](const Tensor& t) {
      ++hooks_fired;
      grads_left += t.grad().defined() ? 1 : 0;
    });
  world->reset_stats();
  mf::manual_seed(5);
  {
    mf::BatchSliceGuard slice(r * rows, rows * n);
    auto [lids, llabels] = batch_rows(r * rows, rows, T, cfg.vocab_size);
    Tensor loss = dp.loss(lids, llabels);
    reducer.prepare();
    loss.backward();
  }
  EXPECT_EQ(hooks_fired, static_cast<int>(dp.parameters().size()));
  EXPECT_EQ(grads_left, 0) << "parameters kept their .grad beside the buckets";
  reducer.finish();

  auto want = ref.named_parameters();
  auto got = dp.named_parameters();
  int64_t grad_bytes = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(got[i].second.grad().defined()) << got[i].first;
    std::vector<double> g = mft::to_f64(got[i].second.grad()), w = mft::to_f64(want[i].second.grad());
    grad_bytes += static_cast<int64_t>(got[i].second.nbytes());
    int bad = 0;
    for (size_t k = 0; k < g.size() && bad < 3; ++k)
      if (std::abs(g[k] - w[k]) > 1e-12 + 1e-10 * std::abs(w[k])) {
        ADD_FAILURE() << want[i].first << "[" << k << "]: data parallel " << g[k] << ", single process " << w[k];
        ++bad;
      }
  }

  // Bytes: one ring all-reduce per bucket, 2(N-1)/N of the gradient bytes in all.
  const auto& st = world->stats();
  EXPECT_EQ(reducer.total_grad_bytes(), grad_bytes);
  EXPECT_EQ(st.count(mf::comm::OpKind::kAllReduce), static_cast<uint64_t>(reducer.num_buckets()));
  const double ring = 2.0 * (n - 1) / n * static_cast<double>(grad_bytes);
  EXPECT_NEAR(static_cast<double>(st.bytes(mf::comm::OpKind::kAllReduce)), ring, 0.01 * ring);
  EXPECT_EQ(st.total_bytes(), st.bytes(mf::comm::OpKind::kAllReduce));

  // Buckets: reverse parameter order, closed once they reach bucket_bytes.
  const auto params = dp.parameters();
  size_t expect_next = params.size();
  for (int b = 0; b < reducer.num_buckets(); ++b) {
    int64_t bytes = 0;
    for (size_t p : reducer.bucket_params(b)) {
      EXPECT_EQ(p + 1, expect_next) << "bucket " << b;
      expect_next = p;
      bytes += static_cast<int64_t>(params[p].nbytes());
    }
    if (b + 1 < reducer.num_buckets()) {
      EXPECT_GE(bytes, bucket_bytes) << "bucket " << b;
    }
  }
  EXPECT_EQ(expect_next, 0u);

  // Overlap: the first bucket was launched (from a grad-ready hook) before backward returned, and
  // buckets launch in bucket order. (Whether it also finished in time depends on timing: that
  // is the benchmark's business.)
  const mf::parallel::ReduceTimeline& tl = reducer.last_timeline();
  EXPECT_LT(tl.buckets.front().launch_s, tl.backward_s);
  for (size_t b = 1; b < tl.buckets.size(); ++b) EXPECT_LE(tl.buckets[b - 1].launch_s, tl.buckets[b].launch_s);
  for (const auto& b : tl.buckets) EXPECT_LE(b.launch_s, b.done_s);
  EXPECT_GE(tl.finish_s, tl.backward_s);
}

// With gradient accumulation the reducer is armed only for the last micro-batch: the reduced
// gradient is the mean over ranks of each rank's accumulated gradient.
TEST(GradReducer, ReducesOnlyTheLastMicroBatch) {
  mf::comm::CommPtr world = mf::comm::mpi_world();
  const int n = world->size(), r = world->rank();
  mf::models::Gpt2Config cfg = small_config();
  cfg.embedding_dropout_prob = cfg.attention_dropout_prob = cfg.output_dropout_prob = 0.0;
  mf::models::Gpt2Model ref(cfg), dp(cfg);
  ref.init_weights(3);
  dp.init_weights(3);
  // Reference: micro-batch m of the global step is rows [m * n, (m + 1) * n), one row per rank.
  for (int m = 0; m < 2; ++m) {
    auto [ids, labels] = batch_rows(m * n, n, 12, cfg.vocab_size);
    mf::scale(ref.loss(ids, labels), 0.5).backward();
  }
  mf::parallel::GradReducer reducer(dp.parameters(), world, 1 << 20);
  for (int m = 0; m < 2; ++m) {
    auto [ids, labels] = batch_rows(m * n + r, 1, 12, cfg.vocab_size);
    Tensor loss = mf::scale(dp.loss(ids, labels), 0.5);
    if (m == 1) reducer.prepare();
    loss.backward();
  }
  reducer.finish();
  auto want = ref.parameters(), got = dp.parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<double> g = mft::to_f64(got[i].grad()), w = mft::to_f64(want[i].grad());
    for (size_t k = 0; k < g.size(); ++k) ASSERT_NEAR(g[k], w[k], 1e-12 + 1e-10 * std::abs(w[k])) << "param " << i;
  }
}

}  // namespace
