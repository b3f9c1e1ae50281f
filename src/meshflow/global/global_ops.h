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
//   gelu, relu, silu, exp: (S(i)) -> S(i); (B) -> B            (not linear: no P)
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

namespace mf::global {

// What a global op needs besides its inputs: the communicator of each mesh axis of the inputs'
// placement (as box_to takes them) and this rank's world rank.
struct GlobalContext {
  std::vector<comm::Communicator*> axis_comms;
  int world_rank = 0;
};
// The context of a DeviceMesh's full (pp, dp, tp) placement.
GlobalContext global_context(const DeviceMesh& mesh, int world_rank);

// The common path of every global op: all inputs on one placement, infer (cached), box, run
// `local` on the boxed pieces, wrap its outputs (logical shapes `output_shapes`).
using LocalFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<GlobalTensor> apply_global(const GlobalContext& ctx, const std::string& op,
                                       const std::vector<GlobalTensor>& inputs,
                                       const std::vector<Shape>& output_shapes, const SignatureFn& candidates,
                                       const LocalFn& local);

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

}  // namespace mf::global
