// CPU kernels: fused cross-entropy over rows of logits. Forward: one row per task, its max, then
// the exp-sum (f32 exps vectorised, summed in f64 per chunk) giving lse, and the loss with label
// smoothing (the logits' sum only when smoothing). Backward writes softmax - target directly.
// The probabilities are never stored.
#include <limits>
#include <vector>

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/cpu/vec_math.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

constexpr int64_t kChunk = 1024;  // f32 partial sums are folded into f64 every kChunk logits

// logits (N, V) contiguous, targets (N) i64 -> loss (N), lse (N)
template <class T>
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double smoothing,
                           const Tensor& loss, const Tensor& lse) {
  const int64_t N = logits.shape(0), V = logits.shape(1);
  const T* x = logits.data<T>();
  const int64_t* t = targets.data<int64_t>();
  T* lo = loss.data<T>();
  T* ls = lse.data<T>();
  parallel_for(N, std::max<int64_t>(1, 32768 / std::max<int64_t>(V, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * V;
      const T mx = max_array(row, V);
      double sum_x = 0.0, sum_e = 0.0;
      for (int64_t c0 = 0; c0 < V; c0 += kChunk) {
        const int64_t n = std::min(V - c0, kChunk);
        sum_e += exp_shift_sum(row + c0, mx, static_cast<T*>(nullptr), n);
        if (smoothing == 0.0) continue;
        T part = 0;
#pragma omp simd reduction(+ : part)
        for (int64_t j = c0; j < c0 + n; ++j) part += row[j];
        sum_x += part;
      }
      const double l = static_cast<double>(mx) + std::log(sum_e);
      ls[r] = static_cast<T>(l);
      if (t[r] == ignore_index) {
        lo[r] = T(0);
        continue;
      }
      // -sum_j target_j log softmax_j with target = (1-eps) onehot + eps/V
      const double nll = l - static_cast<double>(row[t[r]]);
      const double smooth = l - sum_x / static_cast<double>(V);
      lo[r] = static_cast<T>((1.0 - smoothing) * nll + smoothing * smooth);
    }
  });
}

// dlogits (N, V) = grad_scale * (softmax - target) for rows not ignored, else 0.
template <class T>
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, int64_t ignore_index,
                            double smoothing, double grad_scale, const Tensor& dlogits) {
  const int64_t N = logits.shape(0), V = logits.shape(1);
  const T* x = logits.data<T>();
  const int64_t* t = targets.data<int64_t>();
  const T* ls = lse.data<T>();
  T* dx = dlogits.data<T>();
  const T gs = static_cast<T>(grad_scale);
  const T uni = static_cast<T>(grad_scale * smoothing / static_cast<double>(V));
  parallel_for(N, std::max<int64_t>(1, 32768 / std::max<int64_t>(V, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* d = dx + r * V;
      if (t[r] == ignore_index || grad_scale == 0.0) {
        std::fill(d, d + V, T(0));
        continue;
      }
      const T* row = x + r * V;
      const T l = ls[r];
#pragma omp simd
      for (int64_t j = 0; j < V; ++j) d[j] = gs * fast_exp(row[j] - l) - uni;
      if (t[r] < V) d[t[r]] -= static_cast<T>(grad_scale * (1.0 - smoothing));  // >= V: in another shard
    }
  });
}

}  // namespace

void register_cross_entropy(KernelRegistry& r) {
  r.add<kernels::CrossEntropyForward>("cross_entropy_forward", DeviceType::kCPU, DType::kF32,
                                      cross_entropy_forward<float>);
  r.add<kernels::CrossEntropyForward>("cross_entropy_forward", DeviceType::kCPU, DType::kF64,
                                      cross_entropy_forward<double>);
  r.add<kernels::CrossEntropyBackward>("cross_entropy_backward", DeviceType::kCPU, DType::kF32,
                                       cross_entropy_backward<float>);
  r.add<kernels::CrossEntropyBackward>("cross_entropy_backward", DeviceType::kCPU, DType::kF64,
                                       cross_entropy_backward<double>);
}

}  // namespace mf::cpu
