// Ops on global tensors. Each op: lists its 1-d SBP signatures for the input shapes (the
// *_signatures functions below, also used by tests), infers the cheapest N-d signature
// (signature.h), boxes every input to it (boxing.h), runs the local op from ops.h on the local
// pieces, and wraps the outputs with the signature's SBPs. Autograd flows through the local
// tensors and the boxing steps, so backward needs nothing special (see global_tensor.h for what
// the local gradients mean).
//
// Collective: every rank of the placement calls the same ops in the same order with the same
// global arguments (inference is identical on every rank, so they box the same way).
//
// Signatures (on one mesh axis; S(i) for every axis i listed where it applies):
//   matmul   a (..., m, k), b (..., k, n) or (k, n) -> (..., m, n)
//            batch (S(i), S(i) or B) -> S(i); (S(m), B) -> S(m); (B, S(n)) -> S(n);
//            (S(k), S(k)) -> P; (P, B) -> P; (B, P) -> P; (B, B) -> B
//   affine   x (..., in), w (in, out), bias (out) -> (..., out)   [linear: w (out, in)]
//            (S(i), B, B) -> S(i) for i < last; (B, S(out), S(0)) -> S(last) column parallel;
//            (S(last), S(in), P) -> P row parallel; (P, B, P) -> P; (B, P, P) -> P; (B, B, B) -> B
//   add, sub a, b with b's shape a suffix of a's (same shape, or a bias over leading axes)
//            (S(i), S(i - offset) or B) -> S(i); (P, P) -> P; (B, B) -> B
//   mul      as add but (P, B) -> P and (B, P) -> P instead of (P, P) -> P
//   scale    (S(i)) -> S(i); (P) -> P; (B) -> B
//   gelu, relu, silu, tanh, exp: (S(i)) -> S(i); (B) -> B            (not linear: no P)
//   softmax, layer_norm over the last axis: (S(i)[, B, B]) -> S(i) for i < last; (B[, B, B]) -> B
//   sum over axis k: (S(k)) -> P; (S(i)) -> S(i shifted past k); (P) -> P; (B) -> B
//   transpose(a, b): (S(i)) -> S(i with a and b swapped); (P) -> P; (B) -> B
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/global/global_tensor.h"
#include "meshflow/global/signature.h"
#include "meshflow/ops/ops.h"

namespace mf::global {

// What a global op needs besides its inputs: the communicator of each mesh axis of the inputs'
// placement (as box_to takes them) and this rank's world rank.
struct GlobalContext {
  std::vector<comm::Communicator*> axis_comms;
  int world_rank = 0;
};
// The context of a DeviceMesh's full placement (one axis per parallel dimension).
GlobalContext global_context(const DeviceMesh& mesh, int world_rank);

// The common path of every global op: all inputs on one placement, infer (cached), box, run
// `local` on the boxed pieces, wrap its outputs (logical shapes `output_shapes`).
using LocalFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<GlobalTensor> apply_global(const GlobalContext& ctx, const std::string& op,
                                       const std::vector<GlobalTensor>& inputs,
                                       const std::vector<Shape>& output_shapes, const SignatureFn& candidates,
                                       const LocalFn& local);

// The same, with a local kernel that is told the chosen signature and this rank's mesh
// coordinate (ops whose kernel depends on where its piece sits: dropout, attention, the
// vocabulary-split embedding and cross-entropy).
struct LocalCall {
  const NdSignature& signature;
  const std::vector<int64_t>& coord;  // this rank's mesh coordinate
  const GlobalContext& ctx;
};
using PlacedLocalFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&, const LocalCall&)>;
std::vector<GlobalTensor> apply_global(const GlobalContext& ctx, const std::string& op,
                                       const std::vector<GlobalTensor>& inputs,
                                       const std::vector<Shape>& output_shapes, const SignatureFn& candidates,
                                       const PlacedLocalFn& local);

// ---- placements bound to communicators (placement_binding.cpp)
// Model code calls global ops without a context: the communicators of a placement's mesh axes
// are bound once by whoever builds the placement (the parallel runtime), and the ops find them
// from their inputs' placement. A binding lives while its PlacementBinding does; binding a
// placement again replaces the binding until the newer one is released. A placement of one rank
// needs no binding (every op on it is its local op, every SBP the same tensor).
class PlacementBinding {
 public:
  // `axis_comms` (one per mesh axis, as box_to takes them) must outlive the binding.
  PlacementBinding(const Placement* placement, std::vector<comm::Communicator*> axis_comms, int world_rank);
  ~PlacementBinding();
  PlacementBinding(const PlacementBinding&) = delete;
  PlacementBinding& operator=(const PlacementBinding&) = delete;
  const Placement* placement() const { return placement_; }

 private:
  const Placement* placement_;
  uint64_t id_;
};
// The context bound to `placement`; throws naming it when none is.
GlobalContext context_of(const Placement* placement);
// box_to on the bound communicators (a one-rank placement only relabels).
GlobalTensor box(const GlobalTensor& x, const NdSbp* target);
// The NdSbp of every mesh axis of `placement` set to `sbp`.
const NdSbp* uniform_sbp(const Placement* placement, const Sbp& sbp);
// `t`, the same on every rank (ids, positions, masks made on the host), as a B tensor on
// `like`'s placement and device.
GlobalTensor broadcast_beside(const GlobalTensor& like, const Tensor& t);

// ---- matrix products (global_matmul.cpp)
SignatureList matmul_signatures(const Shape& a, const Shape& b);
SignatureList affine_signatures(const Shape& x, bool has_bias);  // w (in, out)
SignatureList linear_signatures(const Shape& x, bool has_bias);  // w (out, in)
GlobalTensor matmul(const GlobalContext& ctx, const GlobalTensor& a, const GlobalTensor& b);
// A bias with no placement means none.
GlobalTensor affine(const GlobalContext& ctx, const GlobalTensor& x, const GlobalTensor& weight,
                    const GlobalTensor& bias = {});
GlobalTensor linear(const GlobalContext& ctx, const GlobalTensor& x, const GlobalTensor& weight,
                    const GlobalTensor& bias = {});

// ---- elementwise (global_elementwise.cpp)
enum class Linearity : uint8_t { kAdditive, kMultiplicative, kNonLinear };
SignatureList binary_signatures(const Shape& a, const Shape& b, Linearity linearity);
SignatureList unary_signatures(const Shape& x, bool linear);
GlobalTensor add(const GlobalContext& ctx, const GlobalTensor& a, const GlobalTensor& b);
GlobalTensor sub(const GlobalContext& ctx, const GlobalTensor& a, const GlobalTensor& b);
GlobalTensor mul(const GlobalContext& ctx, const GlobalTensor& a, const GlobalTensor& b);
GlobalTensor scale(const GlobalContext& ctx, const GlobalTensor& x, double s);
GlobalTensor gelu(const GlobalContext& ctx, const GlobalTensor& x, bool tanh_approx = true);
GlobalTensor relu(const GlobalContext& ctx, const GlobalTensor& x);
GlobalTensor tanh(const GlobalContext& ctx, const GlobalTensor& x);
GlobalTensor silu(const GlobalContext& ctx, const GlobalTensor& x);
GlobalTensor exp(const GlobalContext& ctx, const GlobalTensor& x);

// ---- over one axis: normalisation, reduction, layout (global_axis_ops.cpp)
SignatureList last_axis_signatures(const Shape& x, int n_params);  // softmax: 0, layer_norm: 2
SignatureList sum_signatures(const Shape& x, int64_t axis);
SignatureList transpose_signatures(const Shape& x, int64_t a, int64_t b);
GlobalTensor softmax(const GlobalContext& ctx, const GlobalTensor& x);  // over the last axis
GlobalTensor layer_norm(const GlobalContext& ctx, const GlobalTensor& x, const GlobalTensor& weight,
                        const GlobalTensor& bias, double eps = 1e-5);
GlobalTensor sum(const GlobalContext& ctx, const GlobalTensor& x, int64_t axis);  // axis removed
GlobalTensor transpose(const GlobalContext& ctx, const GlobalTensor& x, int64_t a, int64_t b);

// ---- layout (global_layout_ops.cpp): views of the local pieces where the split allows. An input
// split on the axis an op works along is boxed first (e.g. narrow of S(a) gathers to B).
//   reshape  S(k) -> S(j) where output axis j starts where input axis k does and is as long, or
//            one holds the other whole and the placement's ranks divide both; (P) -> P; (B) -> B
//   select   index `i` of axis a, the axis removed: S(k != a) -> S(k shifted); (P) -> P; (B) -> B
//   permute  S(k) -> S(position of k in dims); (P) -> P; (B) -> B (a view, no copy)
GlobalTensor reshape(const GlobalTensor& x, const Shape& shape);
//   expand   size-1 axes broadcast to `shape` (a view): S(k) of an axis kept -> S(k); (P) -> P; (B) -> B
GlobalTensor expand(const GlobalTensor& x, const Shape& shape);
GlobalTensor select(const GlobalTensor& x, int64_t axis, int64_t index);
//   unbind   every index of axis a, the axis removed (views; one backward writing the input's
//            gradient once): S(k != a) -> S(k shifted) each; (P) -> P; (B) -> B
std::vector<GlobalTensor> unbind(const GlobalTensor& x, int64_t axis);
//   index_select  the positions `index` (a local i64 (m), the same on every rank) of axis a:
//            S(k != a) -> S(k); (P) -> P; (B) -> B (a copy; its gradient adds back into place)
GlobalTensor index_select(const GlobalTensor& x, int64_t axis, const Tensor& index);
//   narrow   positions [start, start + length) of axis a (a view): S(k != a) -> S(k); (P) -> P; (B) -> B
GlobalTensor narrow(const GlobalTensor& x, int64_t axis, int64_t start, int64_t length);
//   cat      the inputs joined along axis a (a copy): (S(k != a), ...) -> S(k); (P, ...) -> P; (B, ...) -> B
GlobalTensor cat(const std::vector<GlobalTensor>& xs, int64_t axis);
GlobalTensor permute(const GlobalTensor& x, const std::vector<int64_t>& dims);

// ---- the model ops (global_model_ops.cpp)
//   embedding(table (V, C), ids (...)) -> (..., C)
//            (S(0) table, B ids) -> B  the vocabulary-split lookup (global/vocab_parallel.h: a
//            masked lookup and one all-reduce); (B, S(k)) -> S(k); (B, B) -> B
//   dropout  (S(k)) -> S(k); (B) -> B — every piece draws the numbers of its logical positions
//   attention q, k, v (B, H, T, D): (S(0) x3) -> S(0); (S(1) x3) -> S(1) heads; (B x3) -> B;
//            (S(2) x3) -> S(2) the sequence split: ring attention (global/ring_attention.h);
//            opts.key_padding_mask: a local bool (B, Tk) of the logical batch rows (on any
//            device), sliced with the batch axis when that is split
//   cross_entropy logits (N, V), labels (N) -> the mean loss ()
//            (S(1), B) -> B  the vocabulary-split cross-entropy (global/vocab_parallel.h);
//            (B, B) -> B
//   rope     x (B, H, T, D) rotated by position along T: (S(0)) -> S(0); (S(1)) -> S(1); (B) -> B;
//            (S(2)) -> S(2), each piece by its logical positions
//   rms_norm over the last axis, weight B: (S(i), B) -> S(i) for i < last; (B, B) -> B
//   map      an elementwise unary function (casts, rounding): (S(k)) -> S(k); (B) -> B
GlobalTensor embedding(const GlobalTensor& table, const GlobalTensor& ids);
GlobalTensor dropout(const GlobalTensor& x, double p);
GlobalTensor attention(const GlobalTensor& q, const GlobalTensor& k, const GlobalTensor& v,
                       const AttentionOptions& opts);
GlobalTensor cross_entropy(const GlobalTensor& logits, const GlobalTensor& labels);
GlobalTensor rope(const GlobalTensor& x, const std::vector<double>& inv_freq);
// The same with row b's positions starting at row_offsets[b] (decoding; no gradient): (S(1)) -> S(1); (B) -> B
GlobalTensor rope(const GlobalTensor& x, const std::vector<double>& inv_freq, const std::vector<int64_t>& row_offsets);
GlobalTensor rms_norm(const GlobalTensor& x, const GlobalTensor& weight, double eps);
// `name` names fn in errors and the signature cache.
GlobalTensor map(const GlobalTensor& x, const char* name, const std::function<Tensor(const Tensor&)>& fn);
// Recomputation (autograd/checkpoint.h) of a function of global tensors: its outputs keep the
// placement and SBPs of the first run.
using GlobalFn = std::function<std::vector<GlobalTensor>(const std::vector<GlobalTensor>&)>;
std::vector<GlobalTensor> checkpoint(const GlobalFn& fn, const std::vector<GlobalTensor>& inputs);

// ---- the ops above on their inputs' bound context
inline GlobalTensor add(const GlobalTensor& a, const GlobalTensor& b) { return add(context_of(a.placement), a, b); }
inline GlobalTensor mul(const GlobalTensor& a, const GlobalTensor& b) { return mul(context_of(a.placement), a, b); }
inline GlobalTensor silu(const GlobalTensor& x) { return silu(context_of(x.placement), x); }
inline GlobalTensor tanh(const GlobalTensor& x) { return tanh(context_of(x.placement), x); }
inline GlobalTensor gelu(const GlobalTensor& x, bool tanh_approx = true) {
  return gelu(context_of(x.placement), x, tanh_approx);
}
inline GlobalTensor layer_norm(const GlobalTensor& x, const GlobalTensor& weight, const GlobalTensor& bias,
                               double eps) {
  return layer_norm(context_of(x.placement), x, weight, bias, eps);
}
inline GlobalTensor affine(const GlobalTensor& x, const GlobalTensor& weight, const GlobalTensor& bias = {}) {
  return affine(context_of(x.placement), x, weight, bias);
}
inline GlobalTensor linear(const GlobalTensor& x, const GlobalTensor& weight, const GlobalTensor& bias = {}) {
  return linear(context_of(x.placement), x, weight, bias);
}

}  // namespace mf::global
