// Seeded Fisher-Yates permutations.
#include "meshflow/data/shuffle.h"

#include <numeric>
#include <utility>

#include "meshflow/random/philox.h"

namespace mf {

uint64_t philox_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound) {
  Philox4x32 r = philox_block(seed, stream, index);
  uint64_t x = (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
  return x % bound;
}

std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> p(static_cast<size_t>(n > 0 ? n : 0));
  std::iota(p.begin(), p.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(philox_below(seed, stream, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

}  // namespace mf
