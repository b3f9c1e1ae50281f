// Vocabulary-parallel embedding and cross-entropy (see vocab_parallel.h). The embedding is a
// masked local lookup plus global::box_axis(P -> B), so its backward is boxing's. The cross-entropy runs
// the fused cross-entropy kernels on this rank's columns: forward gives each row's local
// log-sum-exp, combined across `tp` (max, then the sum of exp(lse_r - max) with the target
// logits); backward writes softmax - onehot with the whole row's lse, the onehot only where this
// rank owns the target.
#include "meshflow/global/vocab_parallel.h"

#include <cmath>
#include <vector>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/autograd/node.h"
#include "meshflow/core/error.h"
#include "meshflow/global/boxing.h"
#include "meshflow/global/sbp.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/ops.h"
#include "meshflow/ops/registry.h"

namespace mf::global {

namespace {

using comm::Communicator;
using comm::ReduceOp;

// This rank's part of the vocabulary: ids [start, start + rows).
struct VocabRange {
  int64_t start = 0;
  int64_t rows = 0;
  bool owns(int64_t id) const { return id >= start && id < start + rows; }
};

std::string where(const Communicator& tp) { return "rank " + std::to_string(tp.rank()) + " of " + tp.group_str(); }

VocabRange vocab_range(const char* op, int64_t vocab_size, const Communicator& tp) {
  MF_CHECK(vocab_size >= tp.size(), op, ": vocab_size ", vocab_size, " is smaller than the ", tp.size(),
           " ranks it is split over (", where(tp), ")");
  return {split_start(vocab_size, tp.size(), tp.rank()), split_size(vocab_size, tp.size(), tp.rank())};
}

void check_float(const char* op, const char* what, const Tensor& t, const Communicator& tp) {
  MF_CHECK(t.defined(), op, ": ", what, " is undefined (", where(tp), ")");
  MF_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kF64, op, ": ", what, " ", t.str(),
           " must be f32 or f64 (", where(tp), ")");
}

// Contiguous i64 copy of `ids`, every value in [0, vocab_size) (or == ignore when allow_ignore).
Tensor checked_ids(const char* op, const char* what, const Tensor& ids, int64_t vocab_size, bool allow_ignore,
                   int64_t ignore, const Communicator& tp) {
  MF_CHECK(ids.defined(), op, ": ", what, " is undefined (", where(tp), ")");
  MF_CHECK(ids.dtype() == DType::kI64 || ids.dtype() == DType::kI32, op, ": ", what, " ", ids.str(),
           " must be i32 or i64 (", where(tp), ")");
  Tensor idx = contiguous(cast(ids.detach(), DType::kI64));
  const int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    if (allow_ignore && p[i] == ignore) continue;
    MF_CHECK(p[i] >= 0 && p[i] < vocab_size, op, ": ", what, " value ", p[i], " at flat position ", i,
             " is out of range [0, ", vocab_size, ")", allow_ignore ? " (ignore_index " + std::to_string(ignore) + ")" : "",
             " for ", what, " ", ids.str(), " on ", where(tp));
  }
  return idx;
}

}  // namespace

Tensor vocab_parallel_embedding(const Tensor& ids, const Tensor& weight_shard, int64_t vocab_size,
                                comm::Communicator& tp) {
  constexpr const char* kOp = "vocab_parallel_embedding";
  if (weight_shard.defined() && weight_shard.device().type != DeviceType::kCPU) {
    // GPU tensors: computed on the host (the index bookkeeping reads the ids), moved back; `to` is
    // differentiable, so the gradient returns to the GPU weight.
    // A bf16/f16 weight (native half on the GPU) is widened on the host, which computes in f32;
    // the output is rounded back and the gradient returns through the casts.
    const Device dev = weight_shard.device();
    const DType dt = weight_shard.dtype();
    Tensor w = to(weight_shard, cpu_device());
    if (is_half(dt)) w = cast(w, compute_dtype(dt));
    Tensor out = vocab_parallel_embedding(to(ids, cpu_device()), w, vocab_size, tp);
    return to(is_half(dt) ? cast(out, dt) : out, dev);
  }
  const VocabRange range = vocab_range(kOp, vocab_size, tp);
  check_float(kOp, "weight_shard", weight_shard, tp);
  MF_CHECK(weight_shard.ndim() == 2 && weight_shard.shape(0) == range.rows, kOp, ": weight_shard ", weight_shard.str(),
           " on ", where(tp), " must be (", range.rows, ", dim): rows [", range.start, ", ", range.start + range.rows,
           ") of the (", vocab_size, ", dim) embedding split over ", tp.size(), " ranks");
  Tensor idx = checked_ids(kOp, "ids", ids, vocab_size, false, 0, tp);
  // Ids owned here become local rows; the others read row 0 and are zeroed by `keep`.
  const int64_t n = idx.numel();
  const int64_t* ip = idx.data<int64_t>();
  std::vector<int64_t> local(static_cast<size_t>(n));
  std::vector<double> keep(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const bool own = range.owns(ip[i]);
    local[static_cast<size_t>(i)] = own ? ip[i] - range.start : 0;
    keep[static_cast<size_t>(i)] = own ? 1.0 : 0.0;
  }
  Shape keep_shape = ids.shape();
  keep_shape.push_back(1);
  Tensor keep_t = cast(from_vector(keep, keep_shape), weight_shard.dtype());
  Tensor partial = mul(embedding(weight_shard, from_vector(local, ids.shape())), keep_t);  // (..., dim), P
  return global::box_axis(partial, global::Sbp::partial_sum(), global::Sbp::broadcast(), partial.shape(), tp);
}

Tensor vocab_parallel_cross_entropy(const Tensor& logits_shard, const Tensor& targets, int64_t vocab_size,
                                    comm::Communicator& tp, int64_t ignore_index) {
  constexpr const char* kOp = "vocab_parallel_cross_entropy";
  if (logits_shard.defined() && logits_shard.device().type != DeviceType::kCPU) {
    // GPU logits: the loss is computed on the host (its row bookkeeping reads the targets) and
    // moved back; the gradient returns through `to`.
    const Device dev = logits_shard.device();
    Tensor x = to(logits_shard, cpu_device());
    if (is_half(x.dtype())) x = cast(x, compute_dtype(x.dtype()));  // the loss is f32 for half logits
    return to(vocab_parallel_cross_entropy(x, targets.defined() ? to(targets, cpu_device()) : targets, vocab_size, tp,
                                           ignore_index),
              dev);
  }
  const VocabRange range = vocab_range(kOp, vocab_size, tp);
  check_float(kOp, "logits_shard", logits_shard, tp);
  MF_CHECK(logits_shard.device().type == DeviceType::kCPU, kOp, ": logits_shard ", logits_shard.str(),
           " must be on the CPU (", where(tp), ")");
  MF_CHECK(logits_shard.ndim() == 2 && logits_shard.shape(1) == range.rows, kOp, ": logits_shard ",
           logits_shard.str(), " on ", where(tp), " must be (N, ", range.rows, "): columns [", range.start, ", ",
           range.start + range.rows, ") of the (N, ", vocab_size, ") logits split over ", tp.size(), " ranks");
  const int64_t N = logits_shard.shape(0);
  MF_CHECK(targets.defined() && targets.ndim() == 1 && targets.shape(0) == N, kOp, ": targets ",
           targets.defined() ? targets.str() : "undefined", " must be (", N, ") for logits_shard ", logits_shard.str(),
           " on ", where(tp));
  Tensor tgt = checked_ids(kOp, "targets", targets, vocab_size, true, ignore_index, tp);
  const int64_t* tp_ids = tgt.data<int64_t>();
  int64_t n_valid = 0;
  for (int64_t i = 0; i < N; ++i) n_valid += tp_ids[i] != ignore_index ? 1 : 0;

  Tensor x = contiguous(logits_shard.detach());
  const int64_t V = x.shape(1);
  const bool f32 = x.dtype() == DType::kF32;
  auto logit = [&](int64_t i, int64_t j) {
    return f32 ? static_cast<double>(x.data<float>()[i * V + j]) : x.data<double>()[i * V + j];
  };
  // Local targets for the kernels: this rank's column, V where another rank owns it (softmax
  // only), ignore_index kept.
  Tensor local_tgt = empty({N}, DType::kI64);
  int64_t* lt = local_tgt.data<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    lt[i] = tp_ids[i] == ignore_index ? ignore_index : range.owns(tp_ids[i]) ? tp_ids[i] - range.start : V;

  // Each row's log-sum-exp over this rank's columns (every target ignored: only lse is wanted).
  Tensor all_ignored = full({N}, static_cast<double>(ignore_index), DType::kI64);
  Tensor unused = empty({N}, x.dtype(), x.device()), local_lse = empty({N}, x.dtype(), x.device());
  kernel<kernels::CrossEntropyForward>("cross_entropy_forward", x.device(), x.dtype())(x, all_ignored, ignore_index, 0.0,
                                                                                      unused, local_lse);
  // The whole row's lse = M + log sum_r exp(lse_r - M), M the max over ranks; the target logit
  // comes from the rank that owns it. Two reductions: kMax of M, then kSum of both sums.
  const Tensor local_lse64 = cast(local_lse, DType::kF64);
  Tensor row_max = clone(local_lse64);  // reduced in place; cast returns f64 input itself
  tp.all_reduce(row_max, ReduceOp::kMax)->wait();
  Tensor stats = empty({2, N}, DType::kF64);
  {
    const double* m = row_max.data<double>();
    double* sum_exp = stats.data<double>();
    double* target_logit = sum_exp + N;
    const double* l = local_lse64.data<double>();
    for (int64_t i = 0; i < N; ++i) {
      sum_exp[i] = std::exp(l[i] - m[i]);
      target_logit[i] = lt[i] >= 0 && lt[i] < V ? logit(i, lt[i]) : 0.0;
    }
  }
  tp.all_reduce(stats, ReduceOp::kSum)->wait();

  Tensor lse64 = empty({N}, DType::kF64);  // over the whole vocabulary
  const double* m = row_max.data<double>();
  const double* sum_exp = stats.data<double>();
  const double* target_logit = sum_exp + N;
  double* l = lse64.data<double>();
  double loss_sum = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    l[i] = m[i] + std::log(sum_exp[i]);
    if (tp_ids[i] != ignore_index) loss_sum += l[i] - target_logit[i];
  }
  Tensor lse = cast(lse64, x.dtype());  // for the backward kernel
  const double loss = n_valid == 0 ? 0.0 : loss_sum / static_cast<double>(n_valid);
  Tensor out = full({}, loss, x.dtype(), x.device());
  if (!any_requires_grad({logits_shard})) return out;
  Communicator* c = &tp;
  record(kOp, {logits_shard}, {out},
         [x, local_tgt, lse, ignore_index, n_valid, c](const std::vector<Tensor>& g) -> std::vector<Tensor> {
           // The loss is B over tp: its gradient is the sum of the upstream gradients of all ranks.
           Tensor g_sum = full({1}, g[0].item(), DType::kF64);
           c->all_reduce(g_sum, ReduceOp::kSum)->wait();
           const double gs = n_valid == 0 ? 0.0 : g_sum.item() / static_cast<double>(n_valid);
           Tensor dx = empty(x.shape(), x.dtype(), x.device());
           kernel<kernels::CrossEntropyBackward>("cross_entropy_backward", x.device(), x.dtype())(
               x, local_tgt, lse, ignore_index, 0.0, gs, dx);
           return {dx};
         });
  return out;
}

}  // namespace mf::global
