#include "meshflow/layers/kv_cache.h"

#include "meshflow/autograd/grad_mode.h"

namespace mf::layers {

namespace {

// Writes `src` (B, h, T, D) into positions [past, past + T) of the slot and returns positions
// [0, past + T) as a view.
Tensor write(Tensor& slot, const Tensor& src, int64_t past, int64_t capacity) {
  if (!slot.defined()) slot = zeros({src.shape(0), src.shape(1), capacity, src.shape(3)}, src.dtype(), src.device());
  MF_CHECK(slot.shape(0) == src.shape(0) && slot.shape(1) == src.shape(1) && slot.shape(3) == src.shape(3) &&
               slot.dtype() == src.dtype(),
           "kv cache: new keys/values ", src.str(), " do not match the cache ", slot.str());
  MF_CHECK(past >= 0 && past + src.shape(2) <= slot.shape(2), "kv cache: positions [", past, ", ", past + src.shape(2),
           ") do not fit in a cache of ", slot.shape(2), " positions");
  Tensor dst = narrow(slot, 2, past, src.shape(2));
  copy_(dst, src);
  return narrow(slot, 2, 0, past + src.shape(2));
}

}  // namespace

std::pair<GlobalTensor, GlobalTensor> append_kv(KvCache& cache, const GlobalTensor& k, const GlobalTensor& v,
                                                int64_t past, int64_t capacity) {
  MF_CHECK(k.logical_shape.size() == 4 && k.logical_shape == v.logical_shape && k.nd_sbp == v.nd_sbp,
           "kv cache: keys ", k.str(), " and values ", v.str(), " must be (B, H, T, D) with one SBP");
  NoGradGuard ng;
  Shape logical = k.logical_shape;
  logical[2] = past + logical[2];
  GlobalTensor keys{k.placement, k.nd_sbp, logical, write(cache.k, k.local.detach(), past, capacity)};
  GlobalTensor values{v.placement, v.nd_sbp, logical, write(cache.v, v.local.detach(), past, capacity)};
  return {keys, values};
}

}  // namespace mf::layers
