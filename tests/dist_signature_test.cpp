// SBP signature inference, single process (placements are plain values; nothing communicates):
// the exact-match signature is free, a mismatched input takes the cheapest conversion by the
// cost table, ties keep the op's order, too-short axes are not split, nested-split boxing is
// filtered on a 2x2 mesh, the cache answers the second time, and an impossible case says why.
#include <gtest/gtest.h>

#include <vector>

#include "meshflow/core/error.h"
#include "meshflow/global/boxing.h"
#include "meshflow/global/global_ops.h"
#include "meshflow/global/signature.h"
#include "testing.h"

namespace {

using mf::Shape;
using namespace mf::global;  // NOLINT

const Sbp S0 = Sbp::split(0), S1 = Sbp::split(1), B = Sbp::broadcast(), P = Sbp::partial_sum();

const Placement* line(int n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return placement(mf::DeviceType::kCPU, r);
}

// f64 inputs of these shapes and 1-d SBPs on `pl`.
SignatureQuery query(const std::string& op, const std::vector<Shape>& shapes, const std::vector<const NdSbp*>& sbps,
                     const std::vector<Shape>& outs, const Placement* pl, int rank = 0) {
  SignatureQuery q;
  q.op = op;
  q.inputs = sbps;
  q.input_shapes = shapes;
  q.input_elem_nbytes.assign(shapes.size(), 8);
  q.output_shapes = outs;
  q.placement = pl;
  q.world_rank = rank;
  return q;
}

NdSignature infer_matmul(const Shape& a, const Shape& b, Sbp sa, Sbp sb, const Placement* pl) {
  const SignatureQuery q = query("matmul", {a, b}, {nd_sbp({sa}), nd_sbp({sb})}, {{a[0], b[1]}}, pl);
  return infer_signature(q, [&] { return matmul_signatures(a, b); });
}

TEST(DistSignature, DataParallelMatmulIsFree) {
  const NdSignature s = infer_matmul({8, 6}, {6, 4}, S0, B, line(2));
  EXPECT_EQ(s.inputs, (std::vector<const NdSbp*>{nd_sbp({S0}), nd_sbp({B})}));
  EXPECT_EQ(s.outputs, std::vector<const NdSbp*>{nd_sbp({S0})});
  EXPECT_EQ(s.cost_bytes, 0.0);
  EXPECT_EQ(s.local_conversions, 0);
}

TEST(DistSignature, ContractionSplitGivesPartialSum) {
  const NdSignature s = infer_matmul({8, 6}, {6, 4}, S1, S0, line(4));
  EXPECT_EQ(s.outputs, std::vector<const NdSbp*>{nd_sbp({P})});
  EXPECT_EQ(s.cost_bytes, 0.0);
  // (S(1), B): slicing b locally (no bytes) beats gathering a.
  const NdSignature t = infer_matmul({8, 6}, {6, 4}, S1, B, line(4));
  EXPECT_EQ(t.inputs, (std::vector<const NdSbp*>{nd_sbp({S1}), nd_sbp({S0})}));
  EXPECT_EQ(t.outputs, std::vector<const NdSbp*>{nd_sbp({P})});
  EXPECT_EQ(t.cost_bytes, 0.0);
  EXPECT_EQ(t.local_conversions, 1);
}

// (S(0), S(0)) on 2 ranks, a (8, 6) = 384 bytes, b (6, 10) = 480 bytes: all-to-all of a to S(1)
// (384 / 2 = 192) beats all-gathering b (480) and everything else.
TEST(DistSignature, MismatchedInputsTakeTheCheapestConversion) {
  const NdSignature s = infer_matmul({8, 6}, {6, 10}, S0, S0, line(2));
  EXPECT_EQ(s.inputs, (std::vector<const NdSbp*>{nd_sbp({S1}), nd_sbp({S0})})) << s.str();
  EXPECT_EQ(s.outputs, std::vector<const NdSbp*>{nd_sbp({P})});
  EXPECT_EQ(s.cost_bytes, 192.0);
  // A wide a (16, 60) = 7680 bytes and a small b (60, 4) = 1920: gathering b (1920) is cheaper
  // than moving a (3840).
  const NdSignature t = infer_matmul({16, 60}, {60, 4}, S0, S0, line(2));
  EXPECT_EQ(t.inputs, (std::vector<const NdSbp*>{nd_sbp({S0}), nd_sbp({B})})) << t.str();
  EXPECT_EQ(t.outputs, std::vector<const NdSbp*>{nd_sbp({S0})});
  EXPECT_EQ(t.cost_bytes, 1920.0);
}

TEST(DistSignature, CostTable) {
  const std::vector<int64_t> m4{4};
  const double T = 1000;
  auto c = [&](Sbp a, Sbp b) { return boxing_cost_bytes(*nd_sbp({a}), *nd_sbp({b}), m4, T); };
  EXPECT_EQ(c(S0, S0), 0.0);
  EXPECT_EQ(c(B, S1), 0.0);
  EXPECT_EQ(c(B, P), 0.0);
  EXPECT_EQ(c(S0, P), 0.0);
  EXPECT_EQ(c(S0, S1), 750.0);
  EXPECT_EQ(c(P, S0), 3000.0);
  EXPECT_EQ(c(S1, B), 3000.0);
  EXPECT_EQ(c(P, B), 6000.0);
  int local = -1;
  boxing_cost_bytes(*nd_sbp({B}), *nd_sbp({S0}), m4, T, &local);
  EXPECT_EQ(local, 1);
  // On a (2, 2) mesh a step's tensor is divided by the other axes that split it: gathering mesh
  // axis 0 while axis 1 splits tensor axis 1 moves T/2 (p - 1).
  const std::vector<int64_t> m22{2, 2};
  EXPECT_EQ(boxing_cost_bytes(*nd_sbp({S0, S1}), *nd_sbp({B, S1}), m22, T), 500.0);
  EXPECT_EQ(boxing_cost_bytes(*nd_sbp({P, P}), *nd_sbp({B, B}), m22, T), 4000.0);
}

// gelu of a P input: P -> S(0) and P -> S(1) cost the same; the op's order (S(0) first) decides.
// An axis shorter than the ranks is never split.
TEST(DistSignature, TiesKeepTheOpOrderAndShortAxesAreNotSplit) {
  auto gelu_of = [](const Shape& x, const Placement* pl) {
    return infer_signature(query("gelu", {x}, {nd_sbp({P})}, {x}, pl), [&] { return unary_signatures(x, false); });
  };
  const NdSignature s = gelu_of({8, 8}, line(4));
  EXPECT_EQ(s.outputs, std::vector<const NdSbp*>{nd_sbp({S0})});
  EXPECT_EQ(s.cost_bytes, 8 * 8 * 8 * 3.0);
  EXPECT_EQ(gelu_of({3, 8}, line(4)).outputs, std::vector<const NdSbp*>{nd_sbp({S1})});
  EXPECT_EQ(gelu_of({3, 3}, line(4)).outputs, std::vector<const NdSbp*>{nd_sbp({B})});
}

TEST(DistSignature, TwoByTwoMesh) {
  const Placement* pl = placement(mf::DeviceType::kCPU, {2, 2}, {0, 1, 2, 3});
  const Shape a{8, 6}, b{6, 4};
  auto infer = [&](const NdSbp* sa, const NdSbp* sb) {
    return infer_signature(query("matmul", {a, b}, {sa, sb}, {{8, 4}}, pl), [&] { return matmul_signatures(a, b); });
  };
  // Data parallel on both axes, and dp x tp (rows on dp, columns on tp): free.
  NdSignature s = infer(nd_sbp({S0, S0}), nd_sbp({B, B}));
  EXPECT_EQ(s.outputs, std::vector<const NdSbp*>{nd_sbp({S0, S0})});
  EXPECT_EQ(s.cost_bytes, 0.0);
  s = infer(nd_sbp({S0, B}), nd_sbp({B, S1}));
  EXPECT_EQ(s.outputs, std::vector<const NdSbp*>{nd_sbp({S0, S1})});
  EXPECT_EQ(s.cost_bytes, 0.0);
  // Megatron's row-parallel layer under data parallelism: (S(0), S(1)) x (B, S(0)) -> (S(0), P).
  s = infer(nd_sbp({S0, S1}), nd_sbp({B, S0}));
  EXPECT_EQ(s.outputs, std::vector<const NdSbp*>{nd_sbp({S0, P})});
  // a as (S(0), S(0)) can never be re-split on mesh axis 0 alone (nested splits): whatever is
  // chosen, boxing a to it is supported.
  s = infer(nd_sbp({S0, S0}), nd_sbp({S0, S0}));
  EXPECT_TRUE(box_supported(*nd_sbp({S0, S0}), *s.inputs[0])) << s.str();
  EXPECT_FALSE(box_supported(*nd_sbp({S0, S0}), *nd_sbp({S1, S0})));
}

TEST(DistSignature, SecondInferenceIsACacheHit) {
  clear_signature_cache();
  int calls = 0;
  const Shape a{8, 6}, b{6, 4};
  const SignatureQuery q = query("matmul", {a, b}, {nd_sbp({S0}), nd_sbp({S0})}, {{8, 4}}, line(2));
  auto cands = [&] {
    ++calls;
    return matmul_signatures(a, b);
  };
  const NdSignature first = infer_signature(q, cands);
  const NdSignature second = infer_signature(q, cands);
  EXPECT_EQ(first.inputs, second.inputs);
  EXPECT_EQ(first.outputs, second.outputs);
  EXPECT_EQ(first.cost_bytes, second.cost_bytes);
  EXPECT_EQ(calls, 1);
  SignatureCacheStats st = signature_cache_stats();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.entries, 1u);
  // Another placement, op key or shape is another entry.
  infer_signature(query("matmul", {a, b}, {nd_sbp({S0}), nd_sbp({S0})}, {{8, 4}}, line(4)), cands);
  EXPECT_EQ(signature_cache_stats().misses, 2u);
  EXPECT_EQ(calls, 2);
}

// A caller that allows matmul only its data-parallel signature, on a 1-row a: nothing fits.
TEST(DistSignature, ImpossibleCaseSaysWhy) {
  const Shape a{1, 6}, b{6, 5};
  const SignatureQuery q = query("matmul", {a, b}, {nd_sbp({S1}), nd_sbp({B})}, {{1, 5}}, line(2), 1);
  MFT_EXPECT_ERROR(infer_signature(q, [] { return SignatureList{{{S0, B}, {S0}}}; }),
                   "no SBP signature for matmul: inputs (S(1), B) with shapes (1, 6), (6, 5) on placement cpu:[0,1]",
                   ", rank 1");
  const uint64_t entries = signature_cache_stats().entries;
  MFT_EXPECT_ERROR(infer_signature(q, [] { return SignatureList{{{S0, B}, {S0}}}; }), "no SBP signature");
  EXPECT_EQ(signature_cache_stats().entries, entries);  // errors are not cached
  // Mismatched candidate arity is a programming error, named.
  MFT_EXPECT_ERROR(infer_signature(query("bad", {a}, {nd_sbp({B})}, {a}, line(3)),
                                   [] { return SignatureList{{{B, B}, {B}}}; }),
                   "signature (B, B) -> (B) of bad");
}

}  // namespace
