#include "meshflow/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/io/safetensors.h"

namespace mf::train {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr int kFormatVersion = 1;

std::string iter_name(int64_t iter) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(iter));
  return buf;
}
}  // namespace

void write_checkpoint(const std::string& output_dir, const TrainingState& st, const nn::NamedTensors& model,
                      const nn::NamedTensors& optimizer, int64_t max_to_keep) {
  fs::path root = fs::path(output_dir) / "checkpoints";
  fs::create_directories(root);
  std::string name = iter_name(st.iter);
  fs::path tmp = root / (name + ".tmp." + std::to_string(::getpid()));
  fs::path final_dir = root / name;
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  io::save_safetensors((tmp / "model.safetensors").string(), model, {{"format", "meshflow"}});
  io::save_safetensors((tmp / "optimizer.safetensors").string(), optimizer, {{"format", "meshflow"}});
  json j = {{"format_version", kFormatVersion},
            {"iter", st.iter},
            {"optimizer_steps", st.optimizer_steps},
            {"data_position", st.data_position},
            {"rng", {{"seed", st.rng.seed}, {"next_stream", st.rng.next_stream}}}};
  write_file_atomic((tmp / "state.json").string(), j.dump(2) + "\n");
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);
  write_file_atomic((root / "latest").string(), name + "\n");
  // prune: keep the newest max_to_keep iter_* directories
  std::vector<std::string> dirs;
  for (auto& e : fs::directory_iterator(root)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("iter_", 0) == 0 && n.find(".tmp") == std::string::npos) dirs.push_back(n);
  }
  std::sort(dirs.begin(), dirs.end());
  if (max_to_keep > 0)
    for (size_t i = 0; i + static_cast<size_t>(max_to_keep) < dirs.size(); ++i) fs::remove_all(root / dirs[i]);
}

std::optional<std::string> latest_checkpoint_dir(const std::string& output_dir) {
  fs::path root = fs::path(output_dir) / "checkpoints";
  fs::path latest = root / "latest";
  if (!fs::exists(latest)) return std::nullopt;
  std::string name = read_file(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  fs::path dir = root / name;
  MF_CHECK(fs::is_directory(dir), latest.string(), " names '", name, "', which does not exist");
  return dir.string();
}

std::optional<LoadedCheckpoint> read_latest_checkpoint(const std::string& output_dir) {
  std::optional<std::string> latest_dir = latest_checkpoint_dir(output_dir);
  if (!latest_dir) return std::nullopt;
  fs::path dir(*latest_dir);
  LoadedCheckpoint out;
  out.dir = dir.string();
  fs::path state_path = dir / "state.json";
  json j;
  try {
    j = json::parse(read_file(state_path.string()));
    int version = j.at("format_version").get<int>();
    MF_CHECK(version <= kFormatVersion, state_path.string(), ": checkpoint format version ", version,
             " is newer than this meshflow supports (", kFormatVersion, ")");
    out.state.iter = j.at("iter").get<int64_t>();
    out.state.optimizer_steps = j.at("optimizer_steps").get<int64_t>();
    out.state.data_position = j.at("data_position").get<uint64_t>();
    out.state.rng.seed = j.at("rng").at("seed").get<uint64_t>();
    out.state.rng.next_stream = j.at("rng").at("next_stream").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    MF_THROW(state_path.string(), ": corrupt checkpoint state: ", e.what());
  }
  out.model = io::load_safetensors((dir / "model.safetensors").string()).tensors;
  out.optimizer = io::load_safetensors((dir / "optimizer.safetensors").string()).tensors;
  return out;
}

}  // namespace mf::train
