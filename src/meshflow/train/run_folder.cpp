#include "meshflow/train/run_folder.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "meshflow/comm/watchdog.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"
#include "meshflow/core/file_lock.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

namespace fs = std::filesystem;

RunFolder::RunFolder() = default;
RunFolder::~RunFolder() = default;

void RunFolder::open(const TrainOptions& opts, const parallel::NamedGroups& groups) {
  // A resume names a run that is there: a misspelled folder is not a new run.
  MF_CHECK(!opts.resume || fs::is_directory(opts.output_dir), "train.resume: train.output_dir '", opts.output_dir,
           "' does not exist: there is no run to resume (check the path, or leave train.resume=false to start one)");
  make_folder(opts.output_dir, "train.output_dir");
  // One run per folder: the main rank holds <output_dir>/.lock until the trainer goes; a second
  // run (or a resume started while the first still runs) stops here on every rank.
  const fs::path lock_path = fs::path(opts.output_dir) / ".lock";
  std::string holder;
  if (groups.main_rank() && !lock_) {
    lock_ = std::make_unique<FileLock>(lock_path.string());
    if (!lock_->locked()) {
      holder = lock_->holder().empty() ? std::string("another process") : lock_->holder();
      lock_.reset();
    }
  }
  MF_CHECK(!parallel::any_over(groups.everyone(), !holder.empty()), "train.output_dir '", opts.output_dir,
           "' is in use by another run (", lock_path.string(), " is locked by ", holder.empty() ? "it" : holder,
           "); wait for that run to end or choose another train.output_dir");
  // A dead or stopped peer ends the run with a line naming it, whatever the launcher does.
  if (opts.heartbeat && groups.everyone() != nullptr && groups.everyone()->size() > 1 && !watchdog_)
    watchdog_ = std::make_unique<comm::Watchdog>(*groups.everyone(), (fs::path(opts.output_dir) / ".heartbeat").string(),
                                                 std::min(1.0, opts.dist_timeout_seconds / 10),
                                                 opts.dist_timeout_seconds / 2);
  const bool has_run =
      fs::exists(fs::path(opts.output_dir) / "config.yaml") || fs::exists(fs::path(opts.output_dir) / "checkpoints");
  parallel::barrier(groups.everyone());  // every rank has looked before the main rank writes
  MF_CHECK(opts.resume || !has_run, "train.output_dir '", opts.output_dir,
           "' already holds a run (config.yaml or checkpoints); pass train.resume=true to continue it or choose "
           "another train.output_dir");
}

void RunFolder::write_configs(const TrainOptions& opts, const parallel::NamedGroups& groups) const {
  if (!groups.main_rank()) return;
  if (!opts.config_yaml.empty()) write_file_atomic((fs::path(opts.output_dir) / "config.yaml").string(), opts.config_yaml);
  if (!opts.hf_config_json.empty())
    write_file_atomic((fs::path(opts.output_dir) / "hf_config.json").string(), opts.hf_config_json);
}

void RunFolder::stop_watchdog() { watchdog_.reset(); }

}  // namespace mf::train
