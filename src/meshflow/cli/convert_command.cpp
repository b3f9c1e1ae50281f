// `meshflow convert`: model weights between Hugging Face and meshflow checkpoints.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "meshflow/cli/commands.h"
#include "meshflow/core/error.h"
#include "meshflow/runtime/pretrained.h"

namespace mf::cli {
namespace {

class ConvertCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* conv = app.add_subcommand("convert", "Convert model weights between Hugging Face and meshflow checkpoints");
    conv->add_option("--from-hf", from_hf_,
                     "Hugging Face model to import (a registered model_type, e.g. gpt2): a folder with config.json and "
                     "model.safetensors, or the .safetensors file");
    conv->add_option("--to-hf", to_hf_,
                     "meshflow checkpoint to export: a run's output_dir, a converted checkpoint, or a checkpoints/iter_N folder");
    conv->add_option("--output", output_,
                     "folder to write: a meshflow checkpoint (--from-hf), or config.json + model.safetensors (--to-hf)")
        ->required();
    conv->footer("Examples:\n  meshflow convert --from-hf gpt2/ --output ckpt/gpt2   # then: meshflow train CONFIG model.pretrained=ckpt/gpt2\n"
                 "  meshflow convert --to-hf output/gpt2_tiny --output hf/gpt2_tiny");
    return conv;
  }

  int run(const comm::CommPtr&) override {
    MF_CHECK(from_hf_.empty() != to_hf_.empty(), "convert: give one of --from-hf and --to-hf");
    const std::string done = from_hf_.empty() ? mf::runtime::convert_to_hf(to_hf_, output_)
                                              : mf::runtime::convert_from_hf(from_hf_, output_);
    std::printf("%s\n", done.c_str());
    return 0;
  }

 private:
  std::string from_hf_, to_hf_, output_;
};

}  // namespace

std::unique_ptr<Command> convert_command() { return std::make_unique<ConvertCommand>(); }

}  // namespace mf::cli
