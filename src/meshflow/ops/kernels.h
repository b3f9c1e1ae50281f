// Kernel signatures: what a backend must provide per (op, dtype). Tensors reach a kernel with
// inputs checked and outputs allocated; shapes are in the comments. Kernels never record
// autograd history and never allocate outputs.
#pragma once
#include <cstdint>

#include "meshflow/tensor/tensor.h"

namespace mf::kernels {

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };
enum class UnaryOp : uint8_t { kNeg, kScale, kAddScalar, kExp, kLog, kSqrt, kGeluTanh, kGeluErf, kSilu, kRelu, kTanh };

// a, b, out: same shape; a/b any strides (0 on broadcast axes), out contiguous.
using Binary = void(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// x, out: contiguous, same numel. alpha: the scalar of kScale / kAddScalar.
using Unary = void(UnaryOp op, double alpha, const Tensor& x, const Tensor& out);
// dy, x, dx: contiguous, same numel. op is one of the activations.
using ActivationBackward = void(UnaryOp op, const Tensor& dy, const Tensor& x, const Tensor& dx);

// src, dst: same shape and dtype, any strides.
using Copy = void(const Tensor& src, const Tensor& dst);
// src, dst: contiguous, same numel; registered under src's dtype, converts to dst's dtype.
using Cast = void(const Tensor& src, const Tensor& dst);
// dst: any strides.
using Fill = void(const Tensor& dst, double value);
// dst += alpha * src; dst contiguous, src same shape, any strides.
using AddInplace = void(const Tensor& dst, const Tensor& src, double alpha);

enum class ReduceOp : uint8_t { kSum, kMax, kSumSquares };
// x contiguous viewed as (outer, r, inner) -> out (outer, inner); argmax (outer, inner) i64
// filled for kMax.
using Reduce = void(ReduceOp op, const Tensor& x, int64_t outer, int64_t r, int64_t inner, const Tensor& out,
                    const Tensor& argmax);

// Row-major C(M,N) = alpha * op(A) op(B) + beta * C; op(A) (M,K), op(B) (K,N); leading
// dimensions in elements.
using Gemm = void(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
                  int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc);

// x (outer, n, inner) contiguous, index (m) i64 in [0, n) -> out (outer, m, inner)
using IndexSelect = void(const Tensor& x, const Tensor& index, const Tensor& out);
// dx (outer, n, inner) += dy (outer, m, inner) scattered by index (m); deterministic order.
using IndexAdd = void(const Tensor& dy, const Tensor& index, const Tensor& dx);
// x (outer, n, inner), index (outer, m, inner) i64 -> out (outer, m, inner): out = x[o, index, i]
using Gather = void(const Tensor& x, const Tensor& index, const Tensor& out);
// dx (outer, n, inner) += dy (outer, m, inner) scattered by index (outer, m, inner).
using ScatterAdd = void(const Tensor& dy, const Tensor& index, const Tensor& dx);
// cond (bool), a, b: same shape, any strides; out contiguous.
using Where = void(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

// x (N, C), weight (C), bias (C) or undefined -> y (N, C), mean (N), rstd (N); all contiguous.
using LayerNormForward = void(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                              const Tensor& mean, const Tensor& rstd);
// -> dx (N, C); dweight, dbias (C) written (not accumulated), either may be undefined.
using LayerNormBackward = void(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                               const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
// x (N, C), weight (C) -> y (N, C), rstd (N)
using RmsNormForward = void(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd);
using RmsNormBackward = void(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                             const Tensor& dx, const Tensor& dweight);
// x (N, C) -> y (N, C): softmax or log_softmax over C.
using SoftmaxForward = void(const Tensor& x, const Tensor& y, bool log);
// dy, y (N, C) -> dx (N, C)
using SoftmaxBackward = void(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log);

// out = x * keep / (1 - p), keep drawn from Philox(seed, stream, logical element offset). x,
// out contiguous. Also the backward (same stream gives the same mask).
using Dropout = void(const Tensor& x, const Tensor& out, double p, uint64_t seed, uint64_t stream,
                     const LogicalSlice& slice);
// dst contiguous: normal(mean, std) or uniform(low, high) from Philox(seed, stream, logical offset).
using RandomFill = void(const Tensor& dst, bool normal, double a, double b, uint64_t seed, uint64_t stream,
                        const LogicalSlice& slice);

struct AttentionParams {
  bool causal = false;
  double scale = 1.0;
  double dropout_p = 0.0;
  uint64_t seed = 0, stream = 0;
  // Dropout draws by position in the logical scores (B', H', Tq, Tk): local (b, h) is logical
  // (b0 + b, h0 + h), where dropout_offset = b0 * H' * Tq * Tk (this batch is rows b0.. of a
  // data-parallel batch), logical_heads = H' and head_offset = h0 (heads split over tensor-
  // parallel ranks). Defaults: the local tensor is the whole.
  uint64_t dropout_offset = 0;
  int64_t logical_heads = 0;  // 0: H
  int64_t head_offset = 0;
  int64_t window = 0;  // > 0 (causal): query i sees keys (i - window, i]
  // Blocks of a longer sequence (context parallelism: global/ring_attention.h). Causal: query row
  // i sits at key position i + diagonal (kAligned: Tk - Tq, the queries are the last Tq
  // positions). Dropout: the block's queries and keys start at q_start and k_start of a logical
  // sequence of logical_q queries and logical_k keys (0: Tq and Tk). CPU kernels only.
  static constexpr int64_t kAligned = INT64_MIN;
  int64_t diagonal = kAligned;
  int64_t q_start = 0, k_start = 0, logical_q = 0, logical_k = 0;
};
// q (B,H,Tq,D), k/v (B,H,Tk,D), out (B,H,Tq,D): last axis contiguous, other strides free.
// mask (B,Tk) bool or undefined; lse (B,H,Tq) f32/f64 contiguous: row log-sum-exp.
using AttentionForward = void(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                              const AttentionParams& p, const Tensor& out, const Tensor& lse);
// dout like out; dq/dk/dv like q/k/v (written, not accumulated).
using AttentionBackward = void(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& out, const Tensor& lse, const Tensor& mask, const AttentionParams& p,
                               const Tensor& dq, const Tensor& dk, const Tensor& dv);

// logits (N, V), targets (N) i64 (already range-checked) -> loss (N) per row (0 where
// ignored), lse (N).
using CrossEntropyForward = void(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double smoothing,
                                 const Tensor& loss, const Tensor& lse);
// dlogits (N, V) = grad_scale * (softmax - target distribution) for rows not ignored, else 0.
// A target >= V is a row whose target column lives in another rank's shard of a vocabulary-split
// row (vocab_parallel_cross_entropy; lse is then the whole row's): softmax only, no onehot term.
using CrossEntropyBackward = void(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                                  int64_t ignore_index, double smoothing, double grad_scale, const Tensor& dlogits);

// Optimizer updates, in place on contiguous tensors of one shape (param, grad, state).
struct AdamWParams {
  double lr, beta1, beta2, eps, weight_decay;
  double bias_correction1, bias_correction2;  // 1 - beta^step
  double grad_scale = 1.0;                    // g is read as grad_scale * grad (clipping, loss scale)
};
// p -= lr * (wd * p + m_hat / (sqrt(v_hat) + eps)) with m, v updated from g (decoupled decay).
using AdamWUpdate = void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                         const AdamWParams& p);
// buf = momentum * buf + (g + wd * p); p -= lr * buf   (buf undefined when momentum == 0)
using SgdUpdate = void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, double lr,
                       double momentum, double weight_decay);

// x (B, H, T, D) contiguous -> out: rotation by +angle (sign = 1) or its inverse (sign = -1);
// pair i of position t turns by (t + position_offset) * inv_freq[i] (D / 2 host values).
using Rope = void(const Tensor& x, const double* inv_freq, int64_t position_offset, int sign, const Tensor& out);

// Row-major C(M,N) = act(op(A) op(B) + bias), one GEMM with a fused epilogue (no beta: C is
// only written). bias (N) contiguous or null; act 0: none, 1: GELU (tanh approximation);
// pre_act (M,N) contiguous or null: C before the activation (only with act 1). Registered by
// backends that fuse it ("gemm_bias_act"); ops use it only where kernel_registry().has() says so.
using GemmBiasAct = void(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                         const void* b, int64_t ldb, const void* bias, int act, void* c, int64_t ldc, void* pre_act);

// Multi-tensor AdamW ("adamw_multi"): tensor i is params[i] with grads[i], exp_avgs[i] and
// exp_avg_sqs[i] (contiguous, its shape, one dtype for all i), decayed with weight_decays[i]
// (p.weight_decay is not used). Per element the same arithmetic as AdamWUpdate.
using AdamWMulti = void(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                        const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                        const std::vector<double>& weight_decays, const AdamWParams& p);

}  // namespace mf::kernels
