// `meshflow plan` (the auto-parallel planner's ranking of layouts) and `meshflow profile` (this
// machine measured for it).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/plan/profile.h"
#include "meshflow/plan/run.h"
#include "meshflow/train/run.h"

namespace mf::cli {
namespace {

class PlanCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* plan = app.add_subcommand("plan", "Rank every parallel layout of a config's model on N ranks by predicted step time, "
                                    "with memory per rank and why the others are out (graph.auto_parallel.enabled=true "
                                    "trains with the first)");
    plan->add_option("config", config_, "YAML config file, e.g. configs/gpt2/tiny.yaml")->required();
    plan->add_option("overrides", overrides_, "key=value overrides; a layout key set to other than its default is kept");
    plan->add_option("--nproc", pla_.nproc, "processes (ranks) to plan for")->check(CLI::Range(1, 1 << 20));
    plan->add_option("--memory-per-rank", pla_.memory_per_rank_gb, "GB a rank may use (default: the hardware profile's)")
        ->check(CLI::Range(0.0, 1e9));
    plan->add_option("--hardware", pla_.hardware, "host (this machine), a100-80gb, h100-80gb, or a file written by meshflow profile");
    plan->add_option("--top", pla_.top, "plans to print (0: all)")->check(CLI::Range(0, 1 << 30));
    plan->add_flag("--rejected", pla_.rejected, "also print every rejected layout with its reason");
    plan->add_flag("--json", pla_.json, "print every feasible plan as a JSON line (layout keys, predicted time and memory)");
    plan->add_option("--measure", pla_.measure, "train N plans (0: all), spread over the ranking with the first included, "
                     "each for --steps steps in this job, and print their measured step time and peak memory beside the "
                     "predicted (under mpirun -np --nproc)")->check(CLI::Range(0, 1 << 30));
    plan->add_option("--steps", pla_.steps, "--measure: steps per plan; the median of those after the first two is its time")->check(CLI::Range(1, 1000000));
    plan->add_option("--skip", pla_.skip, "--measure: leave out the plans of this file (lines --measure --json printed "
                     "before), to resume an interrupted sweep");
    plan->footer("Example: meshflow plan configs/gpt2/tiny.yaml --nproc 8; mpirun -np 8 meshflow plan configs/gpt2/tiny.yaml "
                 "--measure 20 (--nproc defaults to the job's size)");
    plan_ = plan;
    return plan;
  }

  int run(const comm::CommPtr& world) override {
    if (plan_->count("--nproc") == 0 && world) pla_.nproc = world->size();
    pla_.train = mf::train::run_training;  // --measure trains the plans
    return mf::plan::run_plan(mf::Config::load(config_, overrides_), pla_, stdout, world);
  }

 private:
  CLI::App* plan_ = nullptr;
  std::string config_;
  std::vector<std::string> overrides_;
  mf::plan::PlanArgs pla_;
};

class ProfileCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* profile = app.add_subcommand("profile", "Measure this machine for the planner (GEMM, attention, memory, each "
                                       "collective per group size; every rank at once): a file for meshflow plan --hardware");
    profile->add_option("--output", pro_.output, "the profile file to write (JSON)");
    profile->add_option("--repeats", pro_.repeats, "timed repeats per measurement (the median counts)")->check(CLI::Range(1, 10000));
    profile->add_option("--published", pro_.published, "write this published profile (a100-80gb, h100-80gb) instead of "
                        "measuring: a file to edit for another cluster or runtime");
    profile->footer("Example: mpirun -np 8 meshflow profile --output host8.json; meshflow plan CONFIG --nproc 8 --hardware host8.json");
    return profile;
  }

  int run(const comm::CommPtr& world) override {
    mf::plan::measure_profile(world, pro_, stdout);
    return 0;
  }

 private:
  mf::plan::ProfileOptions pro_;
};

}  // namespace

std::unique_ptr<Command> plan_command() { return std::make_unique<PlanCommand>(); }
std::unique_ptr<Command> profile_command() { return std::make_unique<ProfileCommand>(); }

}  // namespace mf::cli
