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

// What is kept while recording: fixed-size records whose texts live in one buffer, both reserved
// at start() (large enough for a few steps of a big model; they grow if not).
struct Record {
  char ph;
  int tid;
  const char* cat;
  size_t text;  // name, then args, in Recorder::text
  uint32_t name_len, args_len;
  int64_t start_ns, end_ns;
  double value;
};

constexpr size_t kReservedRecords = size_t{1} << 17;
constexpr size_t kReservedText = size_t{16} << 20;

struct Recorder {
  std::mutex mu;
  std::vector<Record> records;
  std::string text;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::thread::id main_thread;
  int64_t (*probe)() = nullptr;
  uint64_t generation = 0;  // counts start() calls: a Scope open across stop() records nothing
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

int track_of_this_thread() { return std::this_thread::get_id() == recorder().main_thread ? 0 : 99; }

// Appends name and args to the buffer; where they start. Called with the lock held.
size_t put_text(Recorder& r, std::string_view name, std::string_view args) {
  const size_t at = r.text.size();
  r.text.append(name.data(), name.size());
  r.text.append(args.data(), args.size());
  return at;
}

void push(const Record& rec, int64_t sample_at_ns) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.records.push_back(rec);
  if (sample_at_ns >= 0 && r.probe != nullptr) {  // the memory counter, at a main-thread span's end
    static constexpr std::string_view kName = "memory";
    r.records.push_back({'C', 0, "allocated_MB", put_text(r, kName, {}), static_cast<uint32_t>(kName.size()), 0,
                         sample_at_ns, sample_at_ns, static_cast<double>(r.probe()) / 1e6});
  }
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
    r.records.clear();
    r.text.clear();
    r.records.reserve(kReservedRecords);
    r.text.reserve(kReservedText);
    r.t0 = std::chrono::steady_clock::now();
    r.main_thread = std::this_thread::get_id();
    ++r.generation;
  }
  detail::g_enabled.store(true);
}

std::vector<Event> stop() {
  detail::g_enabled.store(false);
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<Event> out;
  out.reserve(r.records.size());
  for (const Record& rec : r.records) {
    Event e;
    e.ph = rec.ph;
    e.cat = rec.cat;
    e.name = r.text.substr(rec.text, rec.name_len);
    e.args = r.text.substr(rec.text + rec.name_len, rec.args_len);
    e.start_ns = rec.start_ns;
    e.end_ns = rec.end_ns;
    e.tid = rec.tid;
    e.value = rec.value;
    out.push_back(std::move(e));
  }
  std::vector<Record>().swap(r.records);  // the reserved memory goes back
  std::string().swap(r.text);
  return out;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - recorder().t0).count();
}

void add_span(const char* cat, std::string_view name, int64_t start_ns, int64_t end_ns, std::string_view args, bool async) {
  if (!enabled()) return;
  Recorder& r = recorder();
  const int tid = async ? -1 : track_of_this_thread();
  size_t at;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    at = put_text(r, name, args);
  }
  push({'X', tid, cat, at, static_cast<uint32_t>(name.size()), static_cast<uint32_t>(args.size()), start_ns,
        std::max(start_ns, end_ns), 0.0},
       tid == 0 ? end_ns : -1);
}

void add_counter(const char* name, const char* key, double value) {
  if (!enabled()) return;
  Recorder& r = recorder();
  const int64_t t = now_ns();
  size_t at;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    at = put_text(r, name, {});
  }
  push({'C', 0, key, at, static_cast<uint32_t>(std::string_view(name).size()), 0, t, t, value}, -1);
}

void set_memory_probe(int64_t (*probe)()) { recorder().probe = probe; }

Scope::Scope(const char* cat, std::string_view name, std::string_view args) {
  if (!enabled()) return;
  Recorder& r = recorder();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    text_ = put_text(r, name, args);
    generation_ = r.generation;
  }
  active_ = true;
  cat_ = cat;
  name_len_ = static_cast<uint32_t>(name.size());
  args_len_ = static_cast<uint32_t>(args.size());
  start_ns_ = now_ns();
}

Scope::~Scope() {
  if (!active_ || !enabled() || generation_ != recorder().generation) return;
  const int64_t end = now_ns();
  const int tid = track_of_this_thread();
  push({'X', tid, cat_, text_, name_len_, args_len_, start_ns_, end, 0.0}, tid == 0 ? end : -1);
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
