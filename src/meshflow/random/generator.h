// A seeded source of random streams. Each random op takes the next stream number, so the
// numbers it draws are fixed by (seed, how many random ops ran before it, element offset).
// Saving/restoring the state (seed, next stream) replays a computation exactly (resume,
// recomputation).
#pragma once
#include <cstdint>

namespace mf {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t next_stream = 0;
  bool operator==(const GeneratorState&) const = default;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}
  uint64_t seed() const { return state_.seed; }
  uint64_t take_stream() { return state_.next_stream++; }
  GeneratorState state() const { return state_; }
  void set_state(const GeneratorState& s) { state_ = s; }
  void manual_seed(uint64_t seed) { state_ = {seed, 0}; }

 private:
  GeneratorState state_;
};

// The process-wide default generator (what ops use when none is passed).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace mf
