// The run folder (train.output_dir) around a training run: the checks and the holds train() takes
// before its first step — a resume names a folder that is there, one run per folder (the main
// rank's <output_dir>/.lock), the heartbeat watchdog of multi-rank runs, a new run never over an
// old one — and the files it writes there (config.yaml, hf_config.json).
#pragma once
#include <memory>

#include "meshflow/parallel/groups.h"
#include "meshflow/runtime/options.h"

namespace mf {
class FileLock;
namespace comm {
class Watchdog;
}
}  // namespace mf

namespace mf::train {

class RunFolder {
 public:
  RunFolder();
  ~RunFolder();  // releases the lock (and a watchdog still running)
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  // Before training (collective over groups.everyone()): makes the folder, takes its lock (the
  // main rank, once: it is held until this object goes), starts the watchdog (with
  // train.dist.heartbeat on more than one rank), and refuses a run that is not train.resume in a
  // folder already holding one. Every rank has looked at the folder when it returns.
  void open(const runtime::TrainOptions& opts, const parallel::NamedGroups& groups);
  // The resolved config and the pretrained weights' Hugging Face config, by the main rank.
  void write_configs(const runtime::TrainOptions& opts, const parallel::NamedGroups& groups) const;
  // This rank finished training: peers stop watching it.
  void stop_watchdog();

 private:
  std::unique_ptr<FileLock> lock_;            // the main rank's hold on <output_dir>/.lock
  std::unique_ptr<comm::Watchdog> watchdog_;  // multi-rank runs with train.dist.heartbeat, while training
};

}  // namespace mf::train
