// `meshflow train` and `meshflow eval`.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/cli/process.h"
#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/plan/fit.h"
#include "meshflow/plan/run.h"
#include "meshflow/runtime/build.h"
#include "meshflow/train/run.h"

namespace mf::cli {
namespace {

class TrainCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* train = app.add_subcommand("train", "Train a model from a YAML config (LiBai key names)");
    train->add_option("config", config_, "YAML config file, e.g. configs/gpt2/tiny.yaml")->required();
    train->add_option("overrides", overrides_, "key=value overrides, e.g. train.train_iter=100 optim.lr=3e-4");
    return train;
  }

  int run(const comm::CommPtr& world) override {
    const mf::Config c = mf::plan::auto_parallel(mf::Config::load(config_, overrides_), world, stdout);
    mf::plan::check_model_state_fits(c, world);
    const mf::comm::CommPtr run_world = device_world(c, world);
    mf::train::run_training(c, stdout, run_world);
    return 0;
  }

 private:
  std::string config_;
  std::vector<std::string> overrides_;
};

class EvalCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* eval = app.add_subcommand("eval", "Evaluate the latest checkpoint of a run on its validation split");
    eval->add_option("config", config_, "the run's YAML config (or <output_dir>/config.yaml)")->required();
    eval->add_option("overrides", overrides_, "key=value overrides");
    eval->add_option("--output", output_, "the JSON file of the result in full precision (val_loss, val_ppl, step, "
                     "tokens; default: <train.output_dir>/eval_results.json)");
    return eval;
  }

  int run(const comm::CommPtr& world) override {
    MF_CHECK(!world || world->size() == 1, "eval runs in one process (it reads the checkpoint of any layout): run "
             "it without mpirun, not on ", world ? world->size() : 1, " ranks");
    const mf::Config c = mf::Config::load(config_, overrides_);
    // The check on the layout eval runs with (one process), not the one that trained the run.
    mf::plan::check_model_state_fits(mf::runtime::one_process_config(c), nullptr, mf::plan::ModelUse::kInference);
    mf::train::run_evaluation(c, stdout, output_);
    return 0;
  }

 private:
  std::string config_, output_;
  std::vector<std::string> overrides_;
};

}  // namespace

std::unique_ptr<Command> train_command() { return std::make_unique<TrainCommand>(); }
std::unique_ptr<Command> eval_command() { return std::make_unique<EvalCommand>(); }

}  // namespace mf::cli
