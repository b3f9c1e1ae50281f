// The timeline recorder (core/trace.h): nothing is recorded while off, spans nest as their scopes
// do, asynchronous spans are laid out on tracks where none overlaps another, memory is sampled at
// the end of each main-thread span, and to_json() is valid trace-event JSON.
#include <nlohmann/json.hpp>
#include <thread>

#include "meshflow/core/trace.h"
#include "testing.h"

namespace {
namespace trace = mf::trace;

nlohmann::json parse(const std::vector<trace::Event>& events) {
  return nlohmann::json::parse("[" + trace::to_json(events, 3, "rank 3 \"x\"") + "]");
}

int64_t g_bytes = 0;
int64_t probe() { return g_bytes; }

TEST(Trace, RecordsNothingWhileOff) {
  trace::stop();
  { trace::Scope s("op", "matmul"); }
  trace::add_span("comm", "all_reduce", 0, 10, {}, true);
  trace::add_counter("memory", "allocated_MB", 1);
  trace::start();
  EXPECT_TRUE(trace::stop().empty());
  { trace::Scope s("op", "after stop"); }
  trace::start();
  EXPECT_TRUE(trace::stop().empty());
}

TEST(Trace, NestedScopesAndMemoryCounters) {
  g_bytes = 2'000'000;
  trace::set_memory_probe(&probe);
  trace::start();
  {
    trace::Scope outer("step", "step 1", "\"step\":1");
    { trace::Scope inner("op", "matmul", "\"shapes\":\"(2,3) (3,4)\""); }
    g_bytes = 5'000'000;
  }
  std::thread([] { trace::Scope s("op", "on a worker"); }).join();
  const auto events = trace::stop();
  trace::set_memory_probe(nullptr);
  const nlohmann::json j = parse(events);
  std::vector<nlohmann::json> spans, counters;
  for (const auto& e : j) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid"));
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "X") spans.push_back(e);
    if (e["ph"] == "C") counters.push_back(e);
  }
  EXPECT_EQ(j[0]["args"]["name"], "rank 3 \"x\"");  // escaped and read back
  ASSERT_EQ(spans.size(), 3u);
  const auto& inner = spans[0];  // spans are listed in the order they ended
  const auto& outer = spans[1];
  EXPECT_EQ(inner["name"], "matmul");
  EXPECT_EQ(inner["args"]["shapes"], "(2,3) (3,4)");
  EXPECT_EQ(outer["cat"], "step");
  EXPECT_EQ(outer["args"]["step"], 1);
  EXPECT_GE(inner["ts"].get<double>(), outer["ts"].get<double>());
  EXPECT_LE(inner["ts"].get<double>() + inner["dur"].get<double>(), outer["ts"].get<double>() + outer["dur"].get<double>());
  EXPECT_EQ(inner["tid"], 0);
  EXPECT_EQ(spans[2]["tid"], 99);  // another thread's track
  ASSERT_EQ(counters.size(), 2u);  // one per main-thread span, none for the worker's
  EXPECT_DOUBLE_EQ(counters[0]["args"]["allocated_MB"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(counters[1]["args"]["allocated_MB"].get<double>(), 5.0);
}

TEST(Trace, AsynchronousSpansNeverOverlapOnATrack) {
  trace::start();
  // [0,100) [50,150) [120,200) [160,170): two tracks suffice, the third span reuses the first.
  trace::add_span("comm", "a", 0, 100'000, "\"bytes\":8", true);
  trace::add_span("comm", "b", 50'000, 150'000, {}, true);
  trace::add_span("comm", "c", 120'000, 200'000, {}, true);
  trace::add_span("comm", "d", 160'000, 170'000, {}, true);
  const nlohmann::json j = parse(trace::stop());
  std::map<std::string, int> tid;
  std::map<int, std::vector<std::pair<double, double>>> by_track;
  for (const auto& e : j)
    if (e["ph"] == "X") {
      tid[e["name"]] = e["tid"];
      by_track[e["tid"]].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    }
  EXPECT_EQ(tid["a"], 1);
  EXPECT_EQ(tid["b"], 2);
  EXPECT_EQ(tid["c"], 1);
  EXPECT_EQ(tid["d"], 2);
  for (auto& [t, spans] : by_track) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first) << "track " << t;
  }
  EXPECT_DOUBLE_EQ(j.back()["ts"].get<double>(), 160.0);  // microseconds
  EXPECT_DOUBLE_EQ(j.back()["dur"].get<double>(), 10.0);
}

}  // namespace
