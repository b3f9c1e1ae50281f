// Vocabulary-parallel embedding and cross-entropy on the world communicator (2, 3 and 4 ranks;
// vocabularies 11 and 13, so splits are uneven), f64, against the single-process ops on the
// full logical weight / logits. Every rank repeats the same loss divided by the world size, so
// the sum of the local losses is the single-process loss and each rank's gradient must equal its
// rows (columns) of the single-process gradient. Also: errors name op and rank, the per-rank
// peak memory is O(N x vocab / p), and the number of all_reduce calls is fixed.
#include <cmath>
#include <string>
#include <vector>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/global/sbp.h"
#include "meshflow/global/vocab_parallel.h"
#include "meshflow/tensor/allocator.h"
#include "mpi/dist_testing.h"

namespace {

using mf::DType;
using mf::Shape;
using mf::Tensor;
using mf::comm::OpKind;
using mf::global::split_size;
using mf::global::split_start;

Tensor leaf(const Tensor& t) { return mf::clone(t.detach()).set_requires_grad(true); }

// Targets (N): formula ids in [0, vocab), every `ignore_every`-th row ignore_index (-100).
Tensor targets(int64_t N, int64_t vocab, int64_t ignore_every) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < N; ++i) t.push_back(ignore_every > 0 && i % ignore_every == 2 % ignore_every ? -100 : (i * 5 + 3) % vocab);
  return mf::from_vector(t, {N});
}

TEST(VocabParallel, EmbeddingMatchesSingleProcessForwardAndBackward) {
  mf::comm::CommPtr world = mf::comm::mpi_world();
  const int p = world->size(), r = world->rank();
  for (int64_t vocab : {11, 13}) {
    const std::string what = "vocab " + std::to_string(vocab) + " on rank " + std::to_string(r);
    const int64_t dim = 5, start = split_start(vocab, p, r), rows = split_size(vocab, p, r);
    Tensor w = mft::formula({vocab, dim}, -0.4, 0.11, 13);
    std::vector<int64_t> id_values;
    for (int64_t i = 0; i < 12; ++i) id_values.push_back((i * 7 + 3) % vocab);
    Tensor ids = mf::from_vector(id_values, {3, 4});
    Tensor c = mft::formula({3, 4, dim}, 0.3, -0.07, 11);

    Tensor shard = leaf(mf::narrow(w, 0, start, rows));
    world->reset_stats();
    Tensor out = mf::global::vocab_parallel_embedding(ids, shard, vocab, *world);
    mf::scale(mf::sum(mf::mul(out, c)), 1.0 / p).backward();
    // Forward P -> B and backward B -> P: one all_reduce each, nothing else.
    EXPECT_EQ(world->stats().count(OpKind::kAllReduce), 2u) << what;
    EXPECT_EQ(world->stats().total_bytes(), world->stats().bytes(OpKind::kAllReduce)) << what;

    Tensor w_ref = leaf(w);
    Tensor out_ref = mf::embedding(w_ref, ids);
    mf::sum(mf::mul(out_ref, c)).backward();
    mft::expect_tensor_close(out, out_ref, "forward, " + what);
    ASSERT_TRUE(shard.grad().defined()) << what;
    mft::expect_tensor_close(shard.grad(), mf::narrow(w_ref.grad(), 0, start, rows), "weight grad, " + what);
  }
}

TEST(VocabParallel, CrossEntropyMatchesSingleProcessForwardAndBackward) {
  mf::comm::CommPtr world = mf::comm::mpi_world();
  const int p = world->size(), r = world->rank();
  for (int64_t vocab : {11, 13}) {
    for (int64_t ignore_every : {0, 3, 1}) {  // none, some, all rows ignored
      const std::string what = "vocab " + std::to_string(vocab) + ", ignore_every " + std::to_string(ignore_every) +
                               " on rank " + std::to_string(r);
      const int64_t N = 7, start = split_start(vocab, p, r), cols = split_size(vocab, p, r);
      Tensor logits = mft::formula({N, vocab}, -1.5, 0.37, 13);
      Tensor tgt = targets(N, vocab, ignore_every);

      Tensor shard = leaf(mf::narrow(logits, 1, start, cols));
      world->reset_stats();
      Tensor loss = mf::global::vocab_parallel_cross_entropy(shard, tgt, vocab, *world);
      mf::scale(loss, 1.0 / p).backward();
      // Forward: kMax of the row maxima, kSum of (sum-exp, target logit); backward: the scalar gradient.
      EXPECT_EQ(world->stats().count(OpKind::kAllReduce), 3u) << what;
      EXPECT_EQ(world->stats().total_bytes(), world->stats().bytes(OpKind::kAllReduce)) << what;

      Tensor logits_ref = leaf(logits);
      Tensor loss_ref = mf::cross_entropy(logits_ref, tgt);
      loss_ref.backward();
      ASSERT_EQ(loss.shape(), Shape{}) << what;
      mft::expect_tensor_close(loss, loss_ref, "loss, " + what);
      ASSERT_TRUE(shard.grad().defined()) << what;
      mft::expect_tensor_close(shard.grad(), mf::narrow(logits_ref.grad(), 1, start, cols), "logits grad, " + what);
    }
  }
}

TEST(VocabParallel, UpstreamGradientsOfAllRanksAreSummed) {
  // Only rank 0 back-propagates a non-zero gradient (2x): every rank's gradient is 2x its slice.
  mf::comm::CommPtr world = mf::comm::mpi_world();
  const int p = world->size(), r = world->rank();
  const int64_t vocab = 13, N = 5, start = split_start(vocab, p, r), cols = split_size(vocab, p, r);
  Tensor logits = mft::formula({N, vocab}, 0.2, -0.21, 11);
  Tensor tgt = targets(N, vocab, 4);
  Tensor shard = leaf(mf::narrow(logits, 1, start, cols));
  Tensor loss = mf::global::vocab_parallel_cross_entropy(shard, tgt, vocab, *world);
  mf::scale(loss, r == 0 ? 2.0 : 0.0).backward();
  Tensor logits_ref = leaf(logits);
  mf::scale(mf::cross_entropy(logits_ref, tgt), 2.0).backward();
  mft::expect_tensor_close(shard.grad(), mf::narrow(logits_ref.grad(), 1, start, cols), "logits grad on rank " + std::to_string(r));
}

TEST(VocabParallel, BadIdsAndShapesThrowNamingOpAndRank) {
  // Every rank gets the same bad input, so all throw before any communication.
  mf::comm::CommPtr world = mf::comm::mpi_world();
  const int p = world->size(), r = world->rank();
  const std::string rank = "rank " + std::to_string(r);
  const int64_t vocab = 11, rows = split_size(vocab, p, r);
  Tensor w = mft::formula({rows, 3}, 0.1, 0.2, 7);
  Tensor logits = mft::formula({4, rows}, 0.1, 0.2, 7);
  Tensor good_tgt = mf::from_vector(std::vector<int64_t>{0, 10, -100, 5}, {4});
  auto& tp = *world;

  MFT_EXPECT_ERROR(mf::global::vocab_parallel_embedding(mf::from_vector(std::vector<int64_t>{1, 11}, {2}), w, vocab, tp),
                   "vocab_parallel_embedding", "value 11", "[0, 11)", rank.c_str());
  MFT_EXPECT_ERROR(mf::global::vocab_parallel_embedding(mf::from_vector(std::vector<int64_t>{-1}, {1}), w, vocab, tp),
                   "vocab_parallel_embedding", "value -1", rank.c_str());
  MFT_EXPECT_ERROR(mf::global::vocab_parallel_embedding(good_tgt, mft::formula({rows + 1, 3}, 0, 1, 3), vocab, tp),
                   "vocab_parallel_embedding", "weight_shard", rank.c_str());
  MFT_EXPECT_ERROR(mf::global::vocab_parallel_embedding(good_tgt, w, 1, tp), "vocab_parallel_embedding", "vocab_size",
                   rank.c_str());

  MFT_EXPECT_ERROR(
      mf::global::vocab_parallel_cross_entropy(logits, mf::from_vector(std::vector<int64_t>{0, 11, 1, 2}, {4}), vocab, tp),
      "vocab_parallel_cross_entropy", "value 11", "position 1", rank.c_str());
  MFT_EXPECT_ERROR(mf::global::vocab_parallel_cross_entropy(mft::formula({4, rows + 1}, 0, 1, 3), good_tgt, vocab, tp),
                   "vocab_parallel_cross_entropy", "logits_shard", rank.c_str());
  MFT_EXPECT_ERROR(mf::global::vocab_parallel_cross_entropy(logits, mf::from_vector(std::vector<int64_t>{0, 1}, {2}), vocab, tp),
                   "vocab_parallel_cross_entropy", "targets", rank.c_str());
  MFT_EXPECT_ERROR(mf::global::vocab_parallel_cross_entropy(mf::zeros({4, rows}, DType::kI64), good_tgt, vocab, tp),
                   "vocab_parallel_cross_entropy", "f32 or f64", rank.c_str());
  // Still in step: a good call afterwards works on every rank.
  EXPECT_TRUE(std::isfinite(mf::global::vocab_parallel_cross_entropy(logits, good_tgt, vocab, tp).item()));
}

TEST(VocabParallel, CrossEntropyPeakMemoryIsPerShard) {
  mf::comm::CommPtr world = mf::comm::mpi_world();
  const int p = world->size(), r = world->rank();
  const int64_t N = 64, vocab = 4096, start = split_start(vocab, p, r), cols = split_size(vocab, p, r);
  Tensor logits = mft::formula({N, vocab}, -2.0, 0.31, 29, DType::kF32);
  Tensor tgt = targets(N, vocab, 5);
  Tensor shard = leaf(mf::narrow(logits, 1, start, cols));
  Tensor loss_ref = mf::cross_entropy(logits, tgt);  // f32 reference value, before measuring

  mf::Allocator& alloc = mf::allocator_for(mf::cpu_device());
  alloc.reset_peak();
  const int64_t base_bytes = alloc.stats().current_bytes;
  Tensor loss = mf::global::vocab_parallel_cross_entropy(shard, tgt, vocab, *world);
  mf::scale(loss, 1.0 / p).backward();
  const int64_t peak_extra_bytes = alloc.stats().peak_bytes - base_bytes;

  const int64_t shard_bytes = N * cols * 4, full_bytes = N * vocab * 4;
  EXPECT_LT(peak_extra_bytes, 4 * shard_bytes) << "rank " << r;
  if (p >= 2) {
    EXPECT_LT(peak_extra_bytes, full_bytes) << "rank " << r;
  }
  EXPECT_NEAR(loss.item(), loss_ref.item(), 1e-4 * (1 + std::abs(loss_ref.item())));
  ASSERT_TRUE(shard.grad().defined());
  EXPECT_EQ(shard.grad().shape(), (Shape{N, cols}));
}

}  // namespace
