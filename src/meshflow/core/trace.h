// The timeline recorder behind train.profile: spans and counters of one process in Chrome's
// trace-event format (the JSON that chrome://tracing and ui.perfetto.dev open). Off by default;
// every instrumentation point first reads one atomic flag, so a run that does not profile pays a
// load and a branch per op.
//
//   trace::Scope s("op", "matmul", "(4,128,64) (64,64)");   // a span from here to the end of scope
//
// Times are nanoseconds since start() on a steady clock; a multi-rank run calls start() right
// after a barrier so that every rank's zero is the same instant to within the barrier's skew.
// Threads: the thread that called start() records on track 0; other threads on track 99.
// Asynchronous spans (collectives from issue to completion) are recorded with explicit times and
// laid out by to_json() on tracks 1, 2, ... so that none overlaps another on its track.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mf::trace {

namespace detail {
extern std::atomic<bool> g_enabled;
}

inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

struct Event {
  char ph = 'X';        // 'X' a span, 'C' a counter
  const char* cat = "";  // a span's category ("op", "comm", "forward", ...); a counter's series key
  std::string name;
  int64_t start_ns = 0, end_ns = 0;  // a counter's time is start_ns
  int tid = 0;          // 0 the main thread, 99 another thread, -1 asynchronous (placed by to_json)
  std::string args;     // a JSON object's members without braces, e.g. "\"micro_batch\":3"; may be empty
  double value = 0;     // a counter's value
};

// Clears what was recorded, sets time zero to now and starts recording on this (the main) thread.
void start();
// Stops recording and returns the events in the order they ended.
std::vector<Event> stop();
// Nanoseconds since start().
int64_t now_ns();

// Records a finished span (any thread; `async`: laid out on the communication tracks).
void add_span(const char* cat, std::string_view name, int64_t start_ns, int64_t end_ns, std::string_view args = {},
              bool async = false);
// Records a counter sample now: series `name`, value under `key` (e.g. "memory", "allocated_MB").
void add_counter(const char* name, const char* key, double value);

// A function the recorder calls at the end of every span on the main thread to sample memory
// (bytes; a "memory" counter in MB). Null: no samples. Set by whoever owns the allocator.
void set_memory_probe(int64_t (*probe)());

// A span from construction to destruction, on the calling thread's track. Inactive (records
// nothing) when default-constructed or when recording is off at construction. Its name and
// arguments are copied into the recorder's own buffer, reserved at start(): recording allocates
// nothing on the heap the tensors share, so the run's memory behaves as it does unrecorded.
class Scope {
 public:
  Scope() = default;
  Scope(const char* cat, std::string_view name, std::string_view args = {});
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_ = false;
  const char* cat_ = "";
  size_t text_ = 0;  // where the name and arguments are in the recorder's buffer
  uint32_t name_len_ = 0, args_len_ = 0;
  int64_t start_ns_ = 0;
  uint64_t generation_ = 0;
};

// JSON string literal of `s` (quotes included, control characters escaped).
std::string json_string(const std::string& s);

// The events of process `pid` as comma-separated trace-event objects (no brackets), with
// metadata naming the process `process_name` and its tracks; microsecond times.
std::string to_json(const std::vector<Event>& events, int pid, const std::string& process_name);

}  // namespace mf::trace
