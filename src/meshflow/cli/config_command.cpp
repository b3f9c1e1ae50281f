// `meshflow config reference|show`: the configuration keys' reference (Markdown, made from the
// defaults document and the keys' ranges: config/reference.h), and a config as a run resolves it
// (defaults, its `_base_` chain, then the overrides).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/config/config.h"
#include "meshflow/config/reference.h"
#include "meshflow/core/atomic_file.h"

namespace mf::cli {
namespace {

class ConfigCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* config = app.add_subcommand("config",
                                      "Print the reference of every config key, or a config resolved "
                                      "with its bases and overrides");
    config->require_subcommand(1);
    reference_ = config->add_subcommand("reference",
                                        "Print the reference of every config key (Markdown: its type, "
                                        "default, valid range and meaning, by section)");
    reference_->add_option("--output", output_, "write it to this file (atomically) instead of standard output");
    reference_->footer(std::string("Example (in the source tree): ") + kConfigReferenceCommand);
    show_ = config->add_subcommand("show",
                                   "Print a config as a run resolves it: every key, after the defaults, the "
                                   "config's _base_ chain and the overrides (YAML)");
    show_->add_option("config", config_, "YAML config file, e.g. configs/gpt2/tiny.yaml")->required();
    show_->add_option("overrides", overrides_, "key=value overrides, e.g. train.train_iter=100 optim.lr=3e-4");
    show_->footer("Example: meshflow config show configs/gpt2/tiny.yaml train.dist.tensor_parallel_size=2 > run.yaml");
    config->footer(
        "Examples:\n  meshflow config reference --output docs/guides/config-reference.md\n"
        "  meshflow config show configs/gpt2/tiny.yaml optim.lr=3e-4");
    return config;
  }

  int run(const comm::CommPtr&) override {
    if (*show_) {
      const std::string yaml = Config::load(config_, overrides_).dump();
      std::fputs(yaml.c_str(), stdout);
      if (yaml.empty() || yaml.back() != '\n') std::fputc('\n', stdout);
      return 0;
    }
    const std::string markdown = config_reference_markdown();
    if (output_.empty()) {
      std::fputs(markdown.c_str(), stdout);
      return 0;
    }
    write_file_atomic(output_, markdown);
    std::printf("wrote %s (%zu keys)\n", output_.c_str(), Config::keys().size());
    return 0;
  }

 private:
  CLI::App* reference_ = nullptr;
  CLI::App* show_ = nullptr;
  std::string output_;
  std::string config_;
  std::vector<std::string> overrides_;
};

}  // namespace

std::unique_ptr<Command> config_command() { return std::make_unique<ConfigCommand>(); }

}  // namespace mf::cli
