// The supervision loop of `meshflow launch`: attempts, restart sizes, the run folder's log.
#include "meshflow/launch/supervisor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "meshflow/config/config.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"
#include "meshflow/core/file_lock.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/launch/child.h"
#include "meshflow/launch/failure.h"
#include "meshflow/launch/layout.h"

namespace mf::launch {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The iteration of the checkpoint a resume would load; nullopt when there is none (or it cannot
// be read: the trainer then says why).
std::optional<int64_t> resume_iteration(const std::string& output_dir) {
  try {
    if (auto r = io::CheckpointReader::open_latest(output_dir)) return r->state().iter;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// After a failed attempt: when a rank's error says the checkpoint `latest` names is damaged and
// names the previous complete one ("... the previous complete checkpoint is iter_N: ..."), points
// `latest` at that one (the damaged folder is left as it is) and returns its name; "" otherwise.
std::string fall_back_from_damaged_checkpoint(const std::string& output_dir, const std::vector<std::string>& errors) {
  static const std::string kMark = "the previous complete checkpoint is ";
  const fs::path root = fs::path(output_dir) / "checkpoints";
  for (const std::string& line : errors) {
    const size_t at = line.find(kMark);
    if (at == std::string::npos) continue;
    std::string name = line.substr(at + kMark.size());
    name = name.substr(0, name.find_first_not_of("iter_0123456789"));
    const std::vector<std::string> complete = io::complete_checkpoints(output_dir);
    if (!io::is_checkpoint_name(name) || std::find(complete.begin(), complete.end(), name) == complete.end()) continue;
    write_file_atomic((root / "latest").string(), name + "\n");
    return name;
  }
  return "";
}

// The lock at `path`, or an error naming its holder: one launch per run folder, none beside a run.
std::unique_ptr<FileLock> take_run_folder_lock(const std::string& output_dir, const std::string& file) {
  const fs::path path = fs::path(output_dir) / file;
  auto lock = std::make_unique<FileLock>(path.string());
  MF_CHECK(lock->locked(), "train.output_dir '", output_dir, "' is in use by another run (", path.string(),
           " is locked by ", lock->holder().empty() ? std::string("another process") : lock->holder(),
           "); wait for that run to end or choose another train.output_dir");
  return lock;
}

nlohmann::ordered_json optional_json(const std::optional<int64_t>& v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(); }

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

bool is_open_mpi(const std::string& launcher_path) {
  std::error_code ec;
  const std::string real = fs::canonical(launcher_path, ec).filename().string();
  return !ec && (real == "orterun" || real == "prterun" || real == "mpirun.openmpi" || real == "mpiexec.openmpi");
}

}  // namespace

std::vector<std::string> attempt_argv(const LaunchOptions& o, const std::string& launcher_path, int nproc,
                                      const std::vector<std::string>& extra) {
  std::vector<std::string> words = split_words(o.launcher.empty() ? std::string("mpirun") : o.launcher);
  std::vector<std::string> argv = {launcher_path};
  argv.insert(argv.end(), words.begin() + 1, words.end());
  const char* allow = std::getenv("OMPI_ALLOW_RUN_AS_ROOT");
  bool has_allow = false;
  for (const std::string& w : words) has_allow = has_allow || w == "--allow-run-as-root";
  if (::geteuid() == 0 && !has_allow && !(allow && std::string(allow) == "1") && is_open_mpi(launcher_path))
    argv.push_back("--allow-run-as-root");
  const std::string program = o.program.empty() ? fs::read_symlink("/proc/self/exe").string() : o.program;
  argv.insert(argv.end(), {"-np", std::to_string(nproc), program, "train", o.config});
  argv.insert(argv.end(), o.overrides.begin(), o.overrides.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

int run_launch(const LaunchOptions& o) {
  // Everything that can be checked before a first attempt is: a config the trainer refuses, sizes
  // the job cannot take, a folder holding another run.
  const Config c = Config::load(o.config, o.overrides);
  const int min_nproc = o.min_nproc > 0 ? o.min_nproc : o.nproc;
  MF_CHECK(o.nproc >= 1, "launch: --nproc must be at least 1, got ", o.nproc);
  MF_CHECK(min_nproc <= o.nproc, "launch: --min-nproc ", min_nproc, " is more than --nproc ", o.nproc);
  MF_CHECK(o.max_restarts >= 0, "launch: --max-restarts must be at least 0, got ", o.max_restarts);
  const Layout base = run_layout(c, o.nproc);
  if (min_nproc < o.nproc) (void)moved_layout(c, base, min_nproc);
  const std::string out = c.get_string("train.output_dir");
  const bool user_resume = c.get_bool("train.resume");
  MF_CHECK(user_resume || !(fs::exists(fs::path(out) / "config.yaml") || fs::exists(fs::path(out) / "checkpoints")),
           "train.output_dir '", out, "' already holds a run (config.yaml or checkpoints); pass train.resume=true to "
           "continue it or choose another train.output_dir");
  const std::vector<std::string> words = split_words(o.launcher.empty() ? std::string("mpirun") : o.launcher);
  MF_CHECK(!words.empty(), "launch: --launcher is empty");
  const std::string launcher_path = find_executable(words[0]);
  MF_CHECK(!launcher_path.empty(), "launch: no launcher '", words[0], "' ",
           words[0].find('/') == std::string::npos ? "on PATH" : "there",
           o.launcher.empty() ? " (install Open MPI: apt-get install openmpi-bin; or give --launcher)" : "");
  MF_CHECK(!user_resume || fs::is_directory(out), "train.resume: train.output_dir '", out,
           "' does not exist: there is no run to resume (check the path, or leave train.resume=false to start one)");
  make_folder(out, "train.output_dir");
  const std::string log_path = (fs::path(out) / "launch.jsonl").string();
  // Held while this launch supervises the run: a second launch on it, or one beside a `meshflow
  // train` running there, stops here (before writing to its launch.jsonl).
  const std::unique_ptr<FileLock> launch_lock = take_run_folder_lock(out, ".launch.lock");
  take_run_folder_lock(out, ".lock").reset();  // the trainer's own: free now, each attempt takes it

  StopSignals stop;
  int nproc = o.nproc, failures_here = 0;
  for (int attempt = 1;; ++attempt) {
    const Layout layout = nproc == o.nproc ? base : moved_layout(c, base, nproc);
    const bool resume = attempt > 1 || user_resume;
    std::vector<std::string> extra;
    if (resume && !user_resume) extra.push_back("train.resume=true");
    if (nproc != o.nproc)
      for (const std::string& kv : layout_overrides(layout)) extra.push_back(kv);
    const std::vector<std::string> argv = attempt_argv(o, launcher_path, nproc, extra);
    const std::optional<int64_t> resumed_from = resume ? resume_iteration(out) : std::nullopt;
    const std::string start = utc_now();
    const auto t0 = std::chrono::steady_clock::now();
    const ChildResult r = run_child(argv);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    nlohmann::ordered_json rec;
    rec["attempt"] = attempt;
    rec["nproc"] = nproc;
    for (size_t i = 0; i < layout.dims.count(); ++i) rec[std::string(global::dim_specs()[i].key_name())] = layout.dims.size(i);
    rec["num_accumulation_steps"] = layout.accumulation;
    rec["global_batch_size"] = layout.global_batch();
    rec["start"] = start;
    rec["end"] = utc_now();
    rec["seconds"] = std::round(seconds * 1000) / 1000;
    rec["resumed_from_iteration"] = optional_json(resumed_from);
    rec["checkpoint_iteration_at_end"] = optional_json(resume_iteration(out));
    rec["exit_status"] = describe(r.status);
    int code = 0;
    bool again = false;
    std::string action, message;
    if (r.status.ok() && r.forwarded_signal != 0) {
      // The ranks stopped after a step and saved it (train/stop_signal.h): not a failure.
      action = "stopped";
      rec["cause"] = "stopped: " + describe({0, r.forwarded_signal}) + " received";
      message = "meshflow launch: stopped by " + describe({0, r.forwarded_signal}) +
                " (passed on to the job as SIGUSR1): it saved a checkpoint and exited; train.resume=true continues it";
    } else if (r.status.ok()) {
      action = "finished";
      rec["cause"] = nullptr;
      if (attempt > 1)
        message = "meshflow launch: the job finished on " + std::to_string(nproc) + " processes after " +
                  std::to_string(attempt - 1) + " restart" + (attempt > 2 ? "s" : "");
    } else {
      const Failure f = classify_failure(r.status, r.stderr_lines);
      rec["cause"] = r.forwarded_signal ? "stopped: " + describe({0, r.forwarded_signal}) + " received" : f.cause;
      rec["failed_rank"] = f.rank >= 0 ? nlohmann::ordered_json(f.rank) : nlohmann::ordered_json();
      rec["rank_lost"] = f.rank_lost;
      rec["errors"] = f.errors;
      if (r.forwarded_signal) {
        action = "stopped";
        code = 128 + r.forwarded_signal;
        message = "meshflow launch: stopped by " + describe({0, r.forwarded_signal}) + " (forwarded to the job)";
      } else if (attempt - 1 >= o.max_restarts) {
        action = "gave up";
        code = 1;
        message = "meshflow: error: launch: the job failed " + std::to_string(attempt) + " time" +
                  (attempt > 1 ? "s" : "") + " (--max-restarts " + std::to_string(o.max_restarts) +
                  "); last cause: " + f.cause + " (attempts in " + log_path + ")";
      } else {
        ++failures_here;
        const std::string fallback = fall_back_from_damaged_checkpoint(out, f.errors);
        if (!fallback.empty()) {
          rec["fell_back_to"] = fallback;
          std::fprintf(stderr, "meshflow launch: the newest checkpoint is damaged (%s); falling back to the previous "
                       "complete checkpoint %s (the damaged one is left in place)\n", f.cause.c_str(), fallback.c_str());
        }
        int next = nproc;
        if (min_nproc < nproc && (f.rank_lost || failures_here >= 2))
          if (auto smaller = next_smaller_nproc(c, base, nproc, min_nproc)) next = *smaller;
        const std::optional<int64_t> from = resume_iteration(out);
        action = "restart on " + std::to_string(next) + " process" + (next > 1 ? "es" : "");
        message = "meshflow launch: attempt " + std::to_string(attempt) + " on " + std::to_string(nproc) +
                  " processes failed (" + f.cause + "); restarting on " + std::to_string(next) +
                  (next > 1 ? " processes" : " process") + " from " +
                  (from ? "the checkpoint of iteration " + std::to_string(*from) : std::string("the start")) +
                  " (restart " + std::to_string(attempt) + " of " + std::to_string(o.max_restarts) + ")";
        if (next != nproc) failures_here = 0;
        nproc = next;
        again = true;
      }
    }
    rec["action"] = action;
    rec["command"] = joined(argv);
    if (std::FILE* f = std::fopen(log_path.c_str(), "a")) {
      const std::string line = rec.dump() + "\n";
      std::fwrite(line.data(), 1, line.size(), f);
      std::fclose(f);
    } else {
      std::fprintf(stderr, "meshflow: warning: launch: cannot append to %s\n", log_path.c_str());
    }
    if (!message.empty()) {
      std::fprintf(stderr, "%s\n", message.c_str());
      std::fflush(stderr);
    }
    if (!again) return code;
  }
}

}  // namespace mf::launch
