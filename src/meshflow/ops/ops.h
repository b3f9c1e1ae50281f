// The public op API. Every op checks its inputs (throwing mf::Error naming the op and the
// shapes), finds its kernel in the registry by (op, device, dtype), runs it, and — when grad
// mode is on and an input requires grad — records a backward node whose formula uses these
// same public ops. Float ops compute in f32 and f64. bf16/f16: where an op's half kernels are
// registered (CUDA) it runs on bf16/f16 tensors natively (f32 arithmetic inside the kernels,
// bf16/f16 outputs; statistics such as LayerNorm's mean/rstd, attention's and the
// cross-entropy's log-sum-exp and the cross-entropy loss in f32). On the CPU bf16/f16 are
// reached through cast(), except the few ops that gradients of half-precision parameters need
// (add/sub/mul/div, scale and the other unary ops, sum_squares, add_, scale_), which compute in
// f32 and round once to bf16/f16 — the same arithmetic. sum_squares always returns f32.
#pragma once
#include <cstdint>
#include <vector>

#include "meshflow/random/generator.h"
#include "meshflow/tensor/tensor.h"

namespace mf {

// ---- elementwise, with numpy broadcasting (ops/elementwise.cpp)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, double s);       // x * s
Tensor add_scalar(const Tensor& x, double s);  // x + s
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);

// ---- activations (ops/activation.cpp)
Tensor gelu(const Tensor& x, bool tanh_approx = true);
Tensor silu(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor tanh(const Tensor& x);
// Their gradients: dx = dy * f'(x).
Tensor gelu_backward(const Tensor& dy, const Tensor& x, bool tanh_approx);
Tensor silu_backward(const Tensor& dy, const Tensor& x);
Tensor relu_backward(const Tensor& dy, const Tensor& x);
Tensor tanh_backward(const Tensor& dy, const Tensor& x);

// ---- reductions (ops/reduce.cpp); empty `axes` means all axes
Tensor sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, int64_t axis, bool keepdim = false);
// Sum of squares of all elements (accumulated in f64), shape (); not differentiable.
Tensor sum_squares(const Tensor& x);
// Sums a broadcast result back to `shape` (the gradient of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- shape and views (ops/shape_ops.cpp); views share storage
Tensor reshape(const Tensor& x, const Shape& shape);  // view when possible, else copy; one -1 allowed
Tensor view(const Tensor& x, const Shape& shape);     // view only; throws if strides don't allow it
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t a, int64_t b);
Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t length);
Tensor expand(const Tensor& x, const Shape& shape);  // broadcast view (stride 0)
Tensor unsqueeze(const Tensor& x, int64_t axis);
Tensor squeeze(const Tensor& x, int64_t axis);
Tensor contiguous(const Tensor& x);  // x itself when already contiguous
Tensor clone(const Tensor& x);       // always a fresh contiguous copy
Tensor cat(const std::vector<Tensor>& xs, int64_t axis);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t axis);  // views; last may be shorter
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis);      // views
std::vector<Tensor> unbind(const Tensor& x, int64_t axis);  // views of each index of `axis`, the axis removed

// ---- indexing (ops/index.cpp); index tensors are i32 or i64, checked against bounds
Tensor embedding(const Tensor& weight, const Tensor& ids);  // weight (V, C), ids (...) -> (..., C)
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);  // index (m)
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);  // out[..i..] = x[..index[..i..]..]
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // cond bool, broadcast
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- normalisation and softmax over the last axis (ops/norm.cpp, ops/softmax.cpp)
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// ---- randomness (ops/random_ops.cpp): element values depend on (seed, stream, offset of the
// element in the logical tensor). `slice` says where a local piece sits in that logical tensor
// (pieces split across ranks draw what the whole tensor would); empty = the piece is the whole.
// Zeroes each element with probability p and scales the rest by 1/(1-p); identity when
// !training or p == 0. The mask is regenerated in backward, never stored.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr,
               const LogicalSlice& slice = {});
void normal_(Tensor& t, double mean, double stddev, Generator* gen = nullptr, const LogicalSlice& slice = {});
void uniform_(Tensor& t, double low, double high, Generator* gen = nullptr, const LogicalSlice& slice = {});

// ---- fused attention (ops/attention.cpp)
struct AttentionOptions {
  // Query i sees keys j <= i + (Tk - Tq): aligned at the end, so Tq < Tk are the last Tq positions
  // of a sequence whose earlier keys are cached (decoding). CUDA: Tq == Tk only.
  bool causal = false;
  Tensor key_padding_mask;  // optional bool (B, Tk): true = key is padding (masked out)
  double scale = 0.0;       // 0: 1/sqrt(D)
  double dropout_p = 0.0;   // on the attention probabilities
  Generator* gen = nullptr;
  // Heads split over tensor-parallel ranks: these are heads [head_offset, head_offset + H) of
  // logical_heads (0: H); dropout then draws what the whole would at those heads.
  int64_t logical_heads = 0;
  int64_t head_offset = 0;
  // Sliding window (causal only; 0: none): query i sees keys (i - window, i], itself included.
  int64_t window = 0;
};
// q (B, H, Tq, D), k and v (B, H, Tk, D), any strides with the last axis contiguous
// (so q/k/v sliced from a fused (B, T, 3, H, D) projection need no copy) -> out (B, H, Tq, D).
// Works on query blocks; memory is O(block x Tk) per thread, never (Tq x Tk) per head.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opts = {});

// ---- losses (ops/cross_entropy.cpp)
// logits (N, V), targets (N) integer -> mean loss over targets != ignore_index, shape ().
// Fused: never materialises the probabilities; with label smoothing eps the target is
// (1-eps) one-hot + eps/V uniform.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

// ---- rotary position embedding (ops/rope.cpp)
// x (B, H, T, D) with D even: rotates pairs (i, i + D/2) of each head vector by angle
// (t + position_offset) * base^(-2i/D) (the GPT-NeoX / Llama "rotate half" layout).
Tensor rope(const Tensor& x, double base = 10000.0, int64_t position_offset = 0);
// The same with the pair frequencies given: pair i rotates by (t + position_offset) *
// inv_freq[i] (D / 2 of them; rope_inv_freq(D, base) for the plain base^(-2i/D)).
Tensor rope(const Tensor& x, const std::vector<double>& inv_freq, int64_t position_offset = 0);
// Row b of x rotated by positions row_offsets[b] + t (decoding a left-padded batch: each row's
// positions start where its real tokens do; negative offsets rotate padding, which is masked).
// Inference: no gradient.
Tensor rope(const Tensor& x, const std::vector<double>& inv_freq, const std::vector<int64_t>& row_offsets);
std::vector<double> rope_inv_freq(int64_t head_dim, double base);

// ---- matrix products (ops/matmul.cpp), through the BLAS with no copies for transposed views
// a (..., M, K) @ b (..., K, N) -> (..., M, N), batch axes broadcast; 1-D operands as in numpy.
Tensor matmul(const Tensor& a, const Tensor& b);
// x (..., K), weight (N, K), bias (N) or undefined -> (..., N) = x weight^T + bias.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// x (..., K), weight (K, N), bias (N) or undefined -> (..., N) = x weight + bias (the layout of
// Hugging Face GPT-2's Conv1D weights).
Tensor affine(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- dtype (ops/cast.cpp)
Tensor cast(const Tensor& x, DType dtype);  // round-to-nearest-even into bf16/f16

// Whether ops compute natively on bf16/f16 tensors of `device` (every half kernel the ops and
// their backwards call is registered for it; CUDA) rather than in f32 with rounding (the CPU),
// and so whether a model stored in bf16/f16 keeps its activations in it (nn/mixed_precision.h).
// False for other dtypes. (ops/native_half.cpp)
bool native_half(Device device, DType dtype);

// ---- device (ops/transfer.cpp)
// x copied to `device` (x itself when already there), contiguous; differentiable (the gradient
// goes back to x's device). Host-to-GPU copies are asynchronous, GPU-to-host ones complete.
Tensor to(const Tensor& x, Device device);

// ---- in place, never recorded by autograd (ops/inplace.cpp). They throw when grad mode is
// on and `dst` requires grad: wrap optimizer updates in NoGradGuard.
void fill_(Tensor& dst, double value);
void copy_(Tensor& dst, const Tensor& src);  // same shape and dtype, any strides
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);  // dst += alpha * src
void scale_(Tensor& dst, double s);

// ---- optimizer updates (ops/optim_updates.cpp), in place, never recorded
// AdamW (decoupled weight decay) at 1-based step `step`: updates param, exp_avg, exp_avg_sq from
// grad_scale * grad (on the CPU in the same pass).
void adamw_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                   double beta2, double eps, double weight_decay, int64_t step, double grad_scale = 1.0);
// Multi-tensor AdamW: adamw_update_ of every i with weight_decays[i], in one kernel call, where
// a backend registers "adamw_multi" (CUDA; has_adamw_multi). All tensors on one device, one dtype.
bool has_adamw_multi(Device device, DType dtype);
void adamw_multi_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs, double lr,
                         double beta1, double beta2, double eps, const std::vector<double>& weight_decays,
                         int64_t step);
// SGD with momentum (momentum_buf undefined when momentum == 0) and L2 weight decay.
void sgd_update_(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum,
                 double weight_decay);

}  // namespace mf
