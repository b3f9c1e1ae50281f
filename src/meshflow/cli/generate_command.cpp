// `meshflow generate`: text from a trained or pretrained causal language model.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/cli/process.h"
#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/infer/run.h"

namespace mf::cli {
namespace {

class GenerateCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* gen = app.add_subcommand("generate", "Generate text from a trained or pretrained causal language model");
    gen->add_option("config", config_, "the run's YAML config (its latest checkpoint) or one with model.pretrained=...")->required();
    gen->add_option("overrides", overrides_, "key=value overrides, e.g. model.pretrained=hf/gpt2 train.dist.tensor_parallel_size=2");
    // One text per --prompt: a key=value after it is a setting (it once became a second prompt).
    gen->add_option("--prompt", ga_.prompts, "prompt text (repeat the flag for a batch)")->allow_extra_args(false);
    gen->add_option("--prompt-file", ga_.prompt_file, "a file of prompts, one per line, generated as one batch");
    gen->add_option("--max-new-tokens", ga_.max_new_tokens, "tokens to generate per prompt")->check(CLI::Range(1, 1 << 30));
    gen->add_flag("--do-sample", ga_.sampling.do_sample, "sample (default: greedy)");
    gen->add_option("--temperature", ga_.sampling.temperature, "sampling temperature (> 0)");
    gen->add_option("--top-k", ga_.sampling.top_k, "keep the k most likely tokens (0: all)");
    gen->add_option("--top-p", ga_.sampling.top_p, "keep the most likely tokens up to this probability mass (1: all)");
    gen->add_option("--repetition-penalty", ga_.sampling.repetition_penalty, "divide the logits of tokens already seen (1: off)");
    gen->add_option("--seed", ga_.sampling.seed, "sampling seed: the same seed draws the same tokens in any layout");
    gen->add_option("--num-beams", ga_.num_beams, "beam search with this many beams (1: greedy or sampling)")->check(CLI::Range(1, 1024));
    gen->add_option("--length-penalty", ga_.length_penalty, "beam search: hypotheses score log-probability / length^this");
    gen->add_flag("--ignore-eos", ga_.ignore_eos, "do not stop at the end-of-text token");
    gen->add_flag("--print-ids", ga_.print_ids, "print the new token ids of each prompt");
    return gen;
  }

  int run(const comm::CommPtr& world) override {
    const mf::Config c = mf::Config::load(config_, overrides_);
    mf::infer::run_generation(c, ga_, stdout, device_world(c, world));
    return 0;
  }

 private:
  std::string config_;
  std::vector<std::string> overrides_;
  mf::infer::GenerateArgs ga_;
};

}  // namespace

std::unique_ptr<Command> generate_command() { return std::make_unique<GenerateCommand>(); }

}  // namespace mf::cli
