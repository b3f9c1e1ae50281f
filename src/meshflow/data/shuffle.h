// Seeded permutations from Philox (random/philox.h): the same (n, seed, stream) gives the same
// permutation on every machine and run.
#pragma once
#include <cstdint>
#include <vector>

namespace mf {

// Uniform integer in [0, bound) for draw `index` of (seed, stream); bound > 0. 64 random bits
// reduced modulo bound: bias below bound / 2^64.
uint64_t philox_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound);

// Fisher-Yates shuffle of 0..n-1.
std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace mf
