// `meshflow launch`: `meshflow train` under mpirun, restarted from the latest complete checkpoint
// when it fails (launch/supervisor.h).
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/core/error.h"
#include "meshflow/launch/supervisor.h"

namespace mf::cli {
namespace {

class LaunchCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* l = app.add_subcommand("launch", "Run `meshflow train` under mpirun and restart it from the latest complete "
                                 "checkpoint when it fails (optionally on fewer processes)");
    l->add_option("config", config_, "the run's YAML config")->required();
    l->add_option("overrides", overrides_, "key=value overrides, passed to every attempt");
    l->add_option("--nproc", lo_.nproc, "processes of the job (mpirun -np)")->required()->check(CLI::Range(1, 1 << 20));
    l->add_option("--min-nproc", lo_.min_nproc, "the fewest processes a restart may use after a failure that lost a rank "
                  "(or a second failure at one size): tensor and pipeline sizes kept, data parallelism shrunk, "
                  "accumulation raised to keep the global batch (default: --nproc)")->check(CLI::Range(1, 1 << 20));
    l->add_option("--max-restarts", lo_.max_restarts, "restarts before giving up")->capture_default_str()
        ->check(CLI::Range(0, 1000000));
    l->add_option("--launcher", lo_.launcher, "the launcher and its flags, split on spaces; -np N follows "
                  "(default: mpirun on PATH)");
    l->footer("Example:\n  meshflow launch --nproc 4 --min-nproc 2 --launcher \"mpirun --oversubscribe\" "
              "configs/gpt2/tiny.yaml\nEach attempt is a line of <train.output_dir>/launch.jsonl.");
    return l;
  }

  int run(const comm::CommPtr& world) override {
    MF_CHECK(!world, "launch starts the job's processes itself: run it directly, not under mpirun");
    lo_.config = config_;
    lo_.overrides = overrides_;
    return mf::launch::run_launch(lo_);
  }

 private:
  std::string config_;
  std::vector<std::string> overrides_;
  mf::launch::LaunchOptions lo_;
};

}  // namespace

std::unique_ptr<Command> launch_command() { return std::make_unique<LaunchCommand>(); }

}  // namespace mf::cli
