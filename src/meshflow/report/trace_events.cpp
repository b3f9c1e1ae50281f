#include "meshflow/report/trace_events.h"

#include <regex>

#include "meshflow/core/error.h"

namespace mf::report {

namespace {

int64_t int_arg(const nlohmann::json& args, const char* key) {
  if (!args.is_object()) return -1;
  const auto it = args.find(key);
  return it != args.end() && it->is_number() ? it->get<int64_t>() : -1;
}

double number(const nlohmann::json& e, const char* key, size_t index) {
  const auto it = e.find(key);
  MF_CHECK(it != e.end() && it->is_number(), "trace.json: traceEvents[", index, "] (\"ph\":\"X\") has no numeric \"",
           key, "\"");
  return it->get<double>();
}

std::string string_field(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

TraceEvents read_trace_events(const nlohmann::json& trace) {
  const nlohmann::json* events = &trace;
  TraceEvents out;
  if (trace.is_object()) {
    const auto it = trace.find("traceEvents");
    MF_CHECK(it != trace.end() && it->is_array(), "trace.json: no \"traceEvents\" array");
    events = &*it;
    const auto other = trace.find("otherData");
    if (other != trace.end() && other->is_object()) out.other = *other;
  }
  MF_CHECK(events->is_array(), "trace.json: neither an object with \"traceEvents\" nor an array of events");
  if (!out.other.is_object()) out.other = nlohmann::json::object();
  static const std::regex kStage(R"(\bstage (\d+))");
  for (size_t i = 0; i < events->size(); ++i) {
    const nlohmann::json& e = (*events)[i];
    if (!e.is_object()) continue;
    const std::string ph = string_field(e, "ph");
    const nlohmann::json args = e.contains("args") ? e["args"] : nlohmann::json::object();
    if (ph == "M" && string_field(e, "name") == "process_name" && args.is_object() && args.contains("name") &&
        args["name"].is_string() && e.contains("pid") && e["pid"].is_number()) {
      const int64_t pid = e["pid"].get<int64_t>();
      const std::string name = args["name"].get<std::string>();
      out.rank_name[pid] = name;
      std::smatch m;
      if (std::regex_search(name, m, kStage)) out.rank_stage[pid] = std::stoll(m[1].str());
      continue;
    }
    if (ph != "X") continue;
    Span s;
    s.pid = static_cast<int64_t>(number(e, "pid", i));
    s.tid = e.contains("tid") && e["tid"].is_number() ? e["tid"].get<int64_t>() : 0;
    s.ts = number(e, "ts", i);
    s.dur = number(e, "dur", i);
    s.cat = string_field(e, "cat");
    s.name = string_field(e, "name");
    s.step = int_arg(args, "step");
    s.micro_batch = int_arg(args, "micro_batch");
    s.chunk = int_arg(args, "chunk");
    if (args.is_object()) s.args = args;
    out.spans.push_back(std::move(s));
  }
  return out;
}

}  // namespace mf::report
