#include "meshflow/core/trace.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

namespace mf::trace {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

struct Recorder {
  std::mutex mu;
  std::vector<Event> events;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::thread::id main_thread;
  int64_t (*probe)() = nullptr;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

int track_of_this_thread() { return std::this_thread::get_id() == recorder().main_thread ? 0 : 99; }

void push(Event e) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.events.push_back(std::move(e));
}

void sample_memory(int64_t at_ns) {
  int64_t (*probe)() = recorder().probe;
  if (probe == nullptr) return;
  Event e;
  e.ph = 'C';
  e.cat = "allocated_MB";
  e.name = "memory";
  e.start_ns = e.end_ns = at_ns;
  e.value = static_cast<double>(probe()) / 1e6;
  push(std::move(e));
}

void append_us(std::string& out, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e3);
  out += buf;
}

}  // namespace

void start() {
  Recorder& r = recorder();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.events.clear();
    r.t0 = std::chrono::steady_clock::now();
    r.main_thread = std::this_thread::get_id();
  }
  detail::g_enabled.store(true);
}

std::vector<Event> stop() {
  detail::g_enabled.store(false);
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<Event> out;
  out.swap(r.events);
  return out;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - recorder().t0).count();
}

void add_span(const char* cat, std::string name, int64_t start_ns, int64_t end_ns, std::string args, bool async) {
  if (!enabled()) return;
  Event e;
  e.cat = cat;
  e.name = std::move(name);
  e.start_ns = start_ns;
  e.end_ns = std::max(start_ns, end_ns);
  e.tid = async ? -1 : track_of_this_thread();
  e.args = std::move(args);
  const bool main_thread = e.tid == 0;
  push(std::move(e));
  if (main_thread) sample_memory(end_ns);
}

void add_counter(const char* name, const char* key, double value) {
  if (!enabled()) return;
  Event e;
  e.ph = 'C';
  e.cat = key;
  e.name = name;
  e.start_ns = e.end_ns = now_ns();
  e.value = value;
  push(std::move(e));
}

void set_memory_probe(int64_t (*probe)()) { recorder().probe = probe; }

Scope::Scope(const char* cat, std::string name, std::string args) {
  if (!enabled()) return;
  active_ = true;
  cat_ = cat;
  name_ = std::move(name);
  args_ = std::move(args);
  start_ns_ = now_ns();
}

Scope::~Scope() {
  if (active_) add_span(cat_, std::move(name_), start_ns_, now_ns(), std::move(args_));
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string to_json(const std::vector<Event>& events, int pid, const std::string& process_name) {
  const std::string p = std::to_string(pid);
  std::string out;
  auto meta = [&](const char* what, int tid, const std::string& args) {
    if (!out.empty()) out += ",\n";
    out += "{\"ph\":\"M\",\"name\":\"";
    out += what;
    out += "\",\"pid\":" + p + ",\"tid\":" + std::to_string(tid) + ",\"args\":{" + args + "}}";
  };
  meta("process_name", 0, "\"name\":" + json_string(process_name));
  meta("process_sort_index", 0, "\"sort_index\":" + p);
  meta("thread_name", 0, "\"name\":\"compute\"");
  // Asynchronous spans: greedy lanes in start order, each on the first track free by then.
  std::vector<size_t> async;
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].tid < 0) async.push_back(i);
  std::stable_sort(async.begin(), async.end(), [&](size_t a, size_t b) { return events[a].start_ns < events[b].start_ns; });
  std::vector<int> lane(events.size(), 0);
  std::vector<int64_t> lane_end;
  for (size_t i : async) {
    size_t l = 0;
    while (l < lane_end.size() && lane_end[l] > events[i].start_ns) ++l;
    if (l == lane_end.size()) lane_end.push_back(0);
    lane_end[l] = events[i].end_ns;
    lane[i] = static_cast<int>(l) + 1;
  }
  for (size_t l = 0; l < lane_end.size(); ++l)
    meta("thread_name", static_cast<int>(l) + 1, "\"name\":\"communication " + std::to_string(l + 1) + "\"");
  bool other_thread = false;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const int tid = e.tid < 0 ? lane[i] : e.tid;
    other_thread = other_thread || tid == 99;
    out += ",\n{\"ph\":\"";
    out += e.ph;
    out += "\",\"name\":" + json_string(e.name) + ",\"pid\":" + p + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
    append_us(out, e.start_ns);
    if (e.ph == 'C') {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g", e.value);
      out += ",\"args\":{" + json_string(e.cat) + ":" + buf + "}}";
      continue;
    }
    out += ",\"dur\":";
    append_us(out, e.end_ns - e.start_ns);
    out += ",\"cat\":" + json_string(e.cat) + ",\"args\":{" + e.args + "}}";
  }
  if (other_thread) meta("thread_name", 99, "\"name\":\"other threads\"");
  return out;
}

}  // namespace mf::trace
