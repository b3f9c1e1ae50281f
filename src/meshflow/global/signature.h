// SBP signatures and their inference (see GLOBAL_VIEW.md, "Op signatures" and "Inference").
//
// A Signature is one Sbp per input and per output of an op on ONE mesh axis, under which running
// the op's local kernel on the local pieces gives correct local pieces of the output. Each op
// lists its candidate 1-d signatures for given input logical shapes (global_ops.cpp keeps each
// list next to its op). On an N-d placement a candidate is one 1-d signature per mesh axis: the
// cartesian product, filtered.
//
// Inference, identical on every rank (it reads only its arguments: no rank, no communication):
//   1. N-d candidates in a fixed order (mesh axis 0 varies slowest, each axis in the op's order);
//   2. dropped unless every input and output NdSbp fits its logical shape (check_sbp: a split
//      axis at least as long as the ranks splitting it) and box_plan supports boxing each input
//      from its current NdSbp (no nested splits);
//   3. the cheapest kept: bytes moved to box the inputs (the cost table below), then the number of
//      local conversions (B -> S, B -> P, S -> P: no bytes, but they cost a copy, and S -> P
//      multiplies memory), then the candidate order.
// Per mesh axis of p ranks, T the bytes of the tensor as that axis sees it (the logical bytes
// divided by the ranks of the other mesh axes that split it at that step of box_plan):
//   same 0 | B->S, B->P, S->P 0 (local) | S(i)->S(j) T(p-1)/p | P->S T(p-1) | S->B T(p-1) | P->B 2T(p-1).
// Only the inputs' boxing is priced: a P output's later reduction is the next op's input cost.
//
// Results are cached in a mutex-guarded table keyed by (op key, input NdSbp pointers, input shapes
// and element sizes, placement pointer); NdSbps and placements are interned, so the key is cheap.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "meshflow/core/shape.h"
#include "meshflow/global/placement.h"
#include "meshflow/global/sbp.h"

namespace mf::global {

// One op's signature on one mesh axis.
struct Signature {
  std::vector<Sbp> inputs;
  std::vector<Sbp> outputs;
  std::string str() const;  // "(S(1), S(0)) -> (P)"
};

// An op's candidate 1-d signatures, in the op's preferred order (the last tie-break).
using SignatureList = std::vector<Signature>;
using SignatureFn = std::function<SignatureList()>;

// The chosen N-d signature: one NdSbp per input (what to box each input to) and per output.
struct NdSignature {
  std::vector<const NdSbp*> inputs;
  std::vector<const NdSbp*> outputs;
  double cost_bytes = 0;        // bytes moved boxing the inputs, per the cost table
  int local_conversions = 0;    // mesh-axis steps that move no bytes
  std::string str() const;      // "((S(1)), (S(0))) -> ((P)) moving 192 bytes"
};

// What inference needs to know about one call.
struct SignatureQuery {
  // The op name plus every parameter its candidates depend on, e.g. "sum(axis=1)": the cache key.
  std::string op;
  std::vector<const NdSbp*> inputs;    // the inputs' current NdSbps
  std::vector<Shape> input_shapes;     // their logical shapes
  std::vector<int64_t> input_elem_nbytes;  // their element sizes in bytes
  std::vector<Shape> output_shapes;    // the outputs' logical shapes
  const Placement* placement = nullptr;
  int world_rank = 0;                  // only for error messages; not part of the cache key
};

// The cheapest signature (see above), cached. `candidates` is called only on a cache miss.
// Returned by value, so clear_signature_cache() never leaves a caller dangling.
// Throws mf::Error "no SBP signature for <op>: inputs (...) with shapes ... on placement ...,
// rank r" when no candidate survives the filter; errors are not cached.
NdSignature infer_signature(const SignatureQuery& query, const SignatureFn& candidates);

// Bytes moved converting a tensor of `logical_bytes` from `from` to `to` on a mesh of
// `mesh_shape` along box_plan's steps (the cost table above); `local_steps` counts the steps that
// move nothing. Throws like box_plan for unsupported (nested) conversions.
double boxing_cost_bytes(const NdSbp& from, const NdSbp& to, const std::vector<int64_t>& mesh_shape,
                         double logical_bytes, int* local_steps = nullptr);

// Cache counters since the process started (or the last clear): for tests and profiling.
struct SignatureCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t entries = 0;
};
SignatureCacheStats signature_cache_stats();
void clear_signature_cache();

}  // namespace mf::global
