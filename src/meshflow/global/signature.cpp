// Signature inference: N-d candidates from an op's 1-d list, the filter, the byte cost of boxing,
// the deterministic choice, and the cache (see signature.h).
#include "meshflow/global/signature.h"

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "meshflow/core/error.h"
#include "meshflow/global/boxing.h"

namespace mf::global {

namespace {

std::string join_sbps(const std::vector<Sbp>& v) {
  std::string r = "(";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + v[i].str();
  return r + ")";
}

std::string join_nd(const std::vector<const NdSbp*>& v) {
  std::string r = "(";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + (v[i] ? v[i]->str() : std::string("null"));
  return r + ")";
}

// Bytes moved by one mesh-axis step on p ranks for a tensor of `t` bytes as that axis sees it;
// `local` is set when the step moves nothing but is still a conversion.
double step_cost_bytes(const Sbp& from, const Sbp& to, double t, double p, bool* local) {
  *local = false;
  if (from == to) return 0;
  if (from.is_broadcast() || to.is_partial_sum()) {  // B -> S, B -> P, S -> P: local slice or pad
    *local = true;
    return 0;
  }
  if (from.is_split() && to.is_split()) return t * (p - 1) / p;  // all-to-all
  if (from.is_partial_sum() && to.is_broadcast()) return 2 * t * (p - 1);  // all-reduce
  return t * (p - 1);  // P -> S reduce-scatter, S -> B all-gather
}

bool fits(const Shape& shape, const NdSbp& sbp, const std::vector<int64_t>& mesh) {
  try {
    check_sbp(shape, sbp, mesh);
    return true;
  } catch (const Error&) {
    return false;
  }
}

struct Key {
  std::string op;
  std::vector<const NdSbp*> inputs;
  std::vector<Shape> shapes;
  std::vector<int64_t> elem_nbytes;
  const Placement* placement;
  bool operator<(const Key& o) const {
    return std::tie(op, inputs, shapes, elem_nbytes, placement) <
           std::tie(o.op, o.inputs, o.shapes, o.elem_nbytes, o.placement);
  }
};

struct Cache {
  std::mutex mutex;
  std::map<Key, NdSignature> table;
  SignatureCacheStats stats;
};

Cache& cache() {
  static auto* c = new Cache;  // never destroyed: usable during static destruction
  return *c;
}

[[noreturn]] void throw_none(const SignatureQuery& q, size_t tried) {
  std::string ins;
  if (q.placement->ndim() == 1) {
    std::vector<Sbp> v;
    for (const NdSbp* s : q.inputs) v.push_back((*s)[0]);
    ins = join_sbps(v);
  } else {
    ins = join_nd(q.inputs);
  }
  std::string shapes;
  for (size_t i = 0; i < q.input_shapes.size(); ++i) shapes += (i ? ", " : "") + shape_str(q.input_shapes[i]);
  MF_THROW("no SBP signature for ", q.op, ": inputs ", ins, " with shapes ", shapes, " on placement ",
           q.placement->str(), ", rank ", q.world_rank, " (none of ", tried, " candidates fits the shapes and boxing)");
}

NdSignature choose(const SignatureQuery& q, const SignatureList& cands) {
  const std::vector<int64_t>& mesh = q.placement->mesh_shape();
  const int nd = q.placement->ndim();
  const size_t n_in = q.inputs.size(), n_out = q.output_shapes.size();
  for (const Signature& c : cands)
    MF_CHECK(c.inputs.size() == n_in && c.outputs.size() == n_out, "signature ", c.str(), " of ", q.op, " has ",
             c.inputs.size(), " inputs and ", c.outputs.size(), " outputs; the call has ", n_in, " and ", n_out);
  size_t total = cands.empty() ? 0 : 1;
  for (int m = 0; m < nd; ++m) total *= cands.size();

  bool found = false;
  NdSignature best;
  std::vector<size_t> idx(static_cast<size_t>(nd), 0);  // mixed radix, mesh axis 0 slowest
  for (size_t t = 0; t < total; ++t) {
    size_t rest = t;
    for (int m = nd - 1; m >= 0; --m) {
      idx[static_cast<size_t>(m)] = rest % cands.size();
      rest /= cands.size();
    }
    auto nd_of = [&](bool input, size_t i) {
      std::vector<Sbp> v(static_cast<size_t>(nd));
      for (size_t m = 0; m < v.size(); ++m) {
        const Signature& c = cands[idx[m]];
        v[m] = input ? c.inputs[i] : c.outputs[i];
      }
      return nd_sbp(v);
    };
    NdSignature cand;
    bool ok = true;
    for (size_t i = 0; ok && i < n_in; ++i) {
      const NdSbp* want = nd_of(true, i);
      ok = fits(q.input_shapes[i], *want, mesh) && box_supported(*q.inputs[i], *want);
      if (!ok) break;
      int local = 0;
      const double bytes = static_cast<double>(shape_numel(q.input_shapes[i]) * q.input_elem_nbytes[i]);
      cand.cost_bytes += boxing_cost_bytes(*q.inputs[i], *want, mesh, bytes, &local);
      cand.local_conversions += local;
      cand.inputs.push_back(want);
    }
    for (size_t o = 0; ok && o < n_out; ++o) {
      const NdSbp* out = nd_of(false, o);
      ok = fits(q.output_shapes[o], *out, mesh);
      cand.outputs.push_back(out);
    }
    if (!ok) continue;
    // Strictly cheaper wins, so among equals the first in candidate order stays.
    if (!found || std::make_pair(cand.cost_bytes, cand.local_conversions) <
                      std::make_pair(best.cost_bytes, best.local_conversions)) {
      best = std::move(cand);
      found = true;
    }
  }
  if (!found) throw_none(q, total);
  return best;
}

}  // namespace

std::string Signature::str() const { return join_sbps(inputs) + " -> " + join_sbps(outputs); }

std::string NdSignature::str() const {
  return join_nd(inputs) + " -> " + join_nd(outputs) + " moving " + std::to_string(static_cast<int64_t>(cost_bytes)) +
         " bytes";
}

double boxing_cost_bytes(const NdSbp& from, const NdSbp& to, const std::vector<int64_t>& mesh_shape,
                         double logical_bytes, int* local_steps) {
  MF_CHECK(static_cast<size_t>(from.ndim()) == mesh_shape.size(), "boxing cost of ", from.str(), " -> ", to.str(),
           " on a mesh ", shape_str(mesh_shape));
  std::vector<Sbp> state = from.sbps();
  double total = 0;
  int local = 0;
  for (const BoxStep& s : box_plan(from, to)) {
    double t = logical_bytes;  // the bytes the step's group holds: other axes' splits divide it
    for (size_t m2 = 0; m2 < state.size(); ++m2)
      if (static_cast<int>(m2) != s.mesh_axis && state[m2].is_split()) t /= static_cast<double>(mesh_shape[m2]);
    bool is_local = false;
    total += step_cost_bytes(s.from, s.to, t, static_cast<double>(mesh_shape[static_cast<size_t>(s.mesh_axis)]),
                             &is_local);
    local += is_local ? 1 : 0;
    state[static_cast<size_t>(s.mesh_axis)] = s.to;
  }
  if (local_steps) *local_steps = local;
  return total;
}

NdSignature infer_signature(const SignatureQuery& q, const SignatureFn& candidates) {
  MF_CHECK(q.placement != nullptr, "infer_signature for ", q.op, ": no placement");
  MF_CHECK(q.inputs.size() == q.input_shapes.size() && q.inputs.size() == q.input_elem_nbytes.size(),
           "infer_signature for ", q.op, ": ", q.inputs.size(), " input SBPs, ", q.input_shapes.size(), " shapes, ",
           q.input_elem_nbytes.size(), " element sizes");
  for (const NdSbp* s : q.inputs)
    MF_CHECK(s != nullptr && s->ndim() == q.placement->ndim(), "infer_signature for ", q.op, ": input SBP ",
             s ? s->str() : std::string("null"), " on placement ", q.placement->str());
  Cache& c = cache();
  Key key{q.op, q.inputs, q.input_shapes, q.input_elem_nbytes, q.placement};
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.table.find(key);
    if (it != c.table.end()) {
      ++c.stats.hits;
      return it->second;
    }
    ++c.stats.misses;
  }
  NdSignature chosen = choose(q, candidates());  // outside the lock: it may take a while
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.table.try_emplace(std::move(key), std::move(chosen)).first->second;
}

SignatureCacheStats signature_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  SignatureCacheStats s = c.stats;
  s.entries = c.table.size();
  return s;
}

void clear_signature_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.table.clear();
  c.stats = SignatureCacheStats{};
}

}  // namespace mf::global
