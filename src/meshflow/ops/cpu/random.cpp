// CPU kernels drawing from Philox: dropout (forward and backward) and random fills.
// Element values are keyed by their offset in the logical tensor (LogicalSlice), so a piece
// of a tensor draws exactly what the whole tensor draws at the same positions.
#include <vector>

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"
#include "meshflow/random/philox.h"

namespace mf::cpu {
namespace {

struct Range {
  int64_t local;     // first element, local flat offset
  uint64_t logical;  // its logical flat offset
  int64_t n;         // run length (consecutive in both)
};

// Splits a contiguous local tensor into runs that are consecutive in the logical tensor too.
std::vector<Range> logical_ranges(const Shape& local, const LogicalSlice& slice) {
  int64_t numel = shape_numel(local);
  if (slice.whole()) return {{0, 0, numel}};
  MF_CHECK(slice.logical_shape.size() == local.size() && slice.start.size() == local.size(),
           "random: logical slice of rank ", slice.logical_shape.size(), " for a local tensor ", shape_str(local));
  for (size_t d = 0; d < local.size(); ++d)
    MF_CHECK(slice.start[d] >= 0 && slice.start[d] + local[d] <= slice.logical_shape[d], "random: local piece ",
             shape_str(local), " at ", shape_str(slice.start), " exceeds logical shape ",
             shape_str(slice.logical_shape));
  Strides ls = contiguous_strides(slice.logical_shape);
  // Trailing axes where local == logical merge into one run.
  int64_t nd = static_cast<int64_t>(local.size()), k = nd;
  int64_t run = 1;
  while (k > 0 && local[k - 1] == slice.logical_shape[k - 1]) run *= local[--k];
  if (k > 0) run *= local[--k];  // first partial axis: its local extent is contiguous in both
  std::vector<Range> r;
  int64_t nruns = run == 0 ? 0 : numel / run;
  r.reserve(static_cast<size_t>(nruns));
  for (int64_t i = 0; i < nruns; ++i) {
    int64_t rem = i;
    uint64_t logical = 0;
    for (int64_t d = k - 1; d >= 0; --d) {
      int64_t idx = rem % local[d];
      rem /= local[d];
      logical += static_cast<uint64_t>((slice.start[d] + idx) * ls[d]);
    }
    if (k < nd) logical += static_cast<uint64_t>(slice.start[k] * ls[k]);
    r.push_back({i * run, logical, run});
  }
  return r;
}

// Calls run(range, begin, end) over all ranges: threads split the list of ranges when it is
// long, else each range.
template <class F>
void for_ranges(const std::vector<Range>& ranges, int64_t grain, F&& run) {
  if (static_cast<int64_t>(ranges.size()) >= 2 * omp_get_max_threads()) {
    parallel_for(static_cast<int64_t>(ranges.size()), 0, [&](int64_t lo, int64_t hi) {
      for (int64_t ri = lo; ri < hi; ++ri) run(ranges[ri], int64_t{0}, ranges[ri].n);
    });
  } else {
    for (const Range& rg : ranges) parallel_for(rg.n, grain, [&](int64_t a, int64_t b) { run(rg, a, b); });
  }
}

// Calls f(local offset, 32-bit word) for every element (philox_for_each_word over each run).
template <class F>
void for_each_word(const std::vector<Range>& ranges, uint64_t seed, uint64_t stream, F&& f) {
  for_ranges(ranges, 1 << 14, [&](const Range& rg, int64_t a, int64_t b) {
    const int64_t at = rg.local + a;
    philox_for_each_word(seed, stream, rg.logical + static_cast<uint64_t>(a), b - a,
                         [&](int64_t e, uint32_t word) { f(at + e, word); });
  });
}

template <class T>
void dropout_kernel(const Tensor& xt, const Tensor& outt, double p, uint64_t seed, uint64_t stream,
                    const LogicalSlice& slice) {
  const T* x = xt.data<T>();
  T* out = outt.data<T>();
  T keep_scale = static_cast<T>(1.0 / (1.0 - p));
  uint32_t threshold = static_cast<uint32_t>(p * 16777216.0);  // keep iff 24-bit uniform >= p
  // Captures by value: through references the compiler keeps the loop scalar (about 3x slower).
  for_ranges(logical_ranges(xt.shape(), slice), 1 << 14, [&](const Range& rg, int64_t a, int64_t b) {
    const T* xs = x + rg.local + a;
    T* os = out + rg.local + a;
    philox_for_each_word(seed, stream, rg.logical + static_cast<uint64_t>(a), b - a,
                         [xs, os, threshold, keep_scale](int64_t e, uint32_t word) {
                           os[e] = (word >> 8) >= threshold ? xs[e] * keep_scale : T(0);
                         });
  });
}

template <class T>
void random_fill_kernel(const Tensor& dst, bool normal, double a, double b, uint64_t seed, uint64_t stream,
                        const LogicalSlice& slice) {
  T* d = dst.data<T>();
  std::vector<Range> ranges = logical_ranges(dst.shape(), slice);
  if (normal) {
    for_ranges(ranges, 1 << 12, [&](const Range& rg, int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i)
        d[rg.local + i] = static_cast<T>(a + b * philox_normal(seed, stream, rg.logical + static_cast<uint64_t>(i)));
    });
    return;
  }
  for_each_word(ranges, seed, stream, [&](int64_t i, uint32_t word) {
    d[i] = static_cast<T>(a + (b - a) * static_cast<double>(static_cast<float>(word >> 8) * (1.0f / 16777216.0f)));
  });
}

}  // namespace

void register_random(KernelRegistry& r) {
  r.add<kernels::Dropout>("dropout", DeviceType::kCPU, DType::kF32, dropout_kernel<float>);
  r.add<kernels::Dropout>("dropout", DeviceType::kCPU, DType::kF64, dropout_kernel<double>);
  r.add<kernels::RandomFill>("random_fill", DeviceType::kCPU, DType::kF32, random_fill_kernel<float>);
  r.add<kernels::RandomFill>("random_fill", DeviceType::kCPU, DType::kF64, random_fill_kernel<double>);
}

}  // namespace mf::cpu
