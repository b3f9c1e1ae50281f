#include "meshflow/report/run_files.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"

namespace mf::report {

namespace fs = std::filesystem;

namespace {

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_message(const std::exception& e) {
  std::string s = e.what();
  if (s.rfind("[json.exception.", 0) == 0) {
    const size_t end = s.find("] ");
    if (end != std::string::npos) s.erase(0, end + 2);
  }
  return s;
}

// Reads numbers of one metrics line, naming the file, line and key when one is not a number.
struct LineReader {
  const nlohmann::json& j;
  const std::string& where;  // "path:line"

  double number(const char* key) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return kMissing;  // JSON has no NaN: writers emit null
    MF_CHECK(it->is_number(), where, ": \"", key, "\" is ", it->type_name(), ", not a number");
    return it->get<double>();
  }
  int64_t integer(const char* key, int64_t missing) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return missing;
    MF_CHECK(it->is_number_integer(), where, ": \"", key, "\" is ", it->type_name(), ", not an integer");
    return it->get<int64_t>();
  }
};

// The per-rank keys, shared by a line's top level (rank 0's figures) and its "ranks" entries.
RankMetrics rank_metrics(const LineReader& r) {
  RankMetrics m;
  m.rank = r.integer("rank", 0);
  m.stage = r.integer("stage", -1);
  for (const global::DimSpec& d : global::dim_specs())
    m.coordinate.push_back(std::string_view(d.name) == "pp" ? m.stage : r.integer(d.name, -1));
  m.step_time = r.number("step_time");
  m.exposed_comm_time = r.number("exposed_comm_time");
  m.pipeline_wait_time = r.number("pipeline_wait_time");
  m.peak_bytes = r.number("peak_bytes");
  m.mem_parameters = r.number("mem_parameters");
  m.mem_gradients = r.number("mem_gradients");
  m.mem_optimizer_state = r.number("mem_optimizer_state");
  m.mem_activations = r.number("mem_activations");
  m.mem_comm_buffers = r.number("mem_comm_buffers");
  return m;
}

TrainPoint train_point(const LineReader& r) {
  TrainPoint p;
  p.step = r.integer("step", 0);
  p.loss = r.number("loss");
  p.lr = r.number("lr");
  p.grad_norm = r.number("grad_norm");
  p.tokens_per_sec = r.number("tokens_per_sec");
  p.mfu = r.number("mfu");
  p.step_time = r.number("step_time");
  p.exposed_comm_time = r.number("exposed_comm_time");
  p.loss_scale = r.number("loss_scale");
  p.rank0 = rank_metrics(r);
  p.rank0.rank = 0;
  const auto ranks = r.j.find("ranks");
  if (ranks == r.j.end() || ranks->is_null()) return p;
  MF_CHECK(ranks->is_array(), r.where, ": \"ranks\" is ", ranks->type_name(), ", not an array");
  for (size_t i = 0; i < ranks->size(); ++i) {
    const std::string where = detail::cat(r.where, ": ranks[", i, "]");
    MF_CHECK((*ranks)[i].is_object(), where, " is ", (*ranks)[i].type_name(), ", not an object");
    RankMetrics m = rank_metrics(LineReader{(*ranks)[i], where});
    if ((*ranks)[i].find("rank") == (*ranks)[i].end()) m.rank = static_cast<int64_t>(i);
    p.ranks.push_back(m);
  }
  return p;
}

bool is_eval_line(const nlohmann::json& j) {
  for (const auto& [key, value] : j.items())
    if (key.rfind("val_", 0) == 0) return true;
  return false;
}

// A scalar of the YAML config at a dotted path, or `fallback`.
template <class T>
T yaml_get(const YAML::Node& root, std::initializer_list<const char*> keys, T fallback) {
  YAML::Node n = root;
  for (const char* k : keys) {
    if (!n.IsMap()) return fallback;
    const YAML::Node child = n[k];
    if (!child) return fallback;
    n.reset(child);  // not `n = child`: assignment would write into the tree
  }
  try {
    return n.IsScalar() ? n.as<T>() : fallback;
  } catch (const YAML::Exception&) {
    return fallback;
  }
}

RunLayout parse_layout(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    MF_THROW(path, ":", e.mark.line + 1, ": ", e.msg);
  }
  RunLayout l;
  for (const global::DimSpec& d : global::dim_specs()) {
    const std::string key(d.key_name());
    l.dims.set(d.name, yaml_get<int64_t>(root, {"train", "dist", key.c_str()}, 1));
  }
  l.schedule = yaml_get<std::string>(root, {"train", "dist", "pipeline_schedule"}, "");
  l.virtual_stages = yaml_get<int64_t>(root, {"train", "dist", "virtual_pipeline_size"}, 1);
  l.model_name = yaml_get<std::string>(root, {"model", "name"}, "");
  return l;
}

}  // namespace

Metrics load_metrics(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MF_CHECK(in.good(), path, ": cannot open for reading");
  Metrics m;
  std::string text;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = detail::cat(path, ":", line);
    const bool unterminated = in.eof();  // the file's last line, without its newline
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (a number like 1e400)
      // What a run stopped in the middle of a write leaves (a full disk, a killed process): the
      // lines before it stand. A damaged line with its newline is an error wherever it is.
      if (unterminated) {
        m.warnings.push_back(detail::cat(where, ": the last line is cut (", json_message(e), ", no newline at its end); ",
                                         "left out: the run stopped while writing it"));
        break;
      }
      MF_THROW(where, ": not JSON: ", json_message(e));
    }
    MF_CHECK(j.is_object(), where, ": a ", j.type_name(), ", not a JSON object");
    MF_CHECK(j.contains("step"), where, ": no \"step\"");
    const LineReader r{j, where};
    if (j.contains("loss")) {
      m.train.push_back(train_point(r));
    } else if (is_eval_line(j)) {
      EvalPoint e;
      e.step = r.integer("step", 0);
      for (const auto& [key, value] : j.items())
        if (key.rfind("val_", 0) == 0) e.values[key] = r.number(key.c_str());
      m.eval.push_back(std::move(e));
    }
  }
  return m;
}

RunFiles load_run(const std::string& dir) {
  const fs::path d(dir);
  MF_CHECK(fs::is_directory(d), dir, ": no such run folder");
  const fs::path metrics = d / "metrics.jsonl";
  MF_CHECK(fs::is_regular_file(metrics), metrics.string(),
           ": not found (a run folder holds the metrics.jsonl that meshflow train writes)");
  RunFiles r;
  r.dir = dir;
  r.name = fs::weakly_canonical(d).filename().string();
  if (r.name.empty()) r.name = dir;
  const fs::path config = d / "config.yaml";
  if (fs::is_regular_file(config)) {
    r.config_text = read_file(config.string());
    r.layout = parse_layout(r.config_text, config.string());
  }
  r.metrics = load_metrics(metrics.string());
  // A size 0 (data_parallel_size) is derived by the run from the world size, the world being the
  // ranks of a training line.
  if (r.layout.dims.product() == 0 && !r.metrics.train.empty() && !r.metrics.train.back().ranks.empty()) {
    try {
      r.layout.dims = r.layout.dims.resolved(static_cast<int64_t>(r.metrics.train.back().ranks.size()));
    } catch (const Error&) {  // sizes the ranks logged cannot give: shown as derived
    }
  }
  const fs::path trace = d / "trace.json";
  if (fs::is_regular_file(trace)) {
    try {
      r.trace = nlohmann::json::parse(read_file(trace.string()));
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (a number like 1e400)
      MF_THROW(trace.string(), ": not JSON: ", json_message(e));
    }
  }
  return r;
}

}  // namespace mf::report
