// The meshflow command line: `meshflow train|preprocess|eval ...`. Every failure prints one
// line "meshflow: error: ..." and exits non-zero.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "meshflow/config/config.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/train/run.h"

namespace {

struct PreprocessArgs {
  std::vector<std::string> inputs;
  std::string output_prefix, tokenizer = "gpt2_bpe", vocab_file, merges_file, format = "auto", json_key = "text",
                             split = "separator", separator = "%";
  bool no_eod = false;
  int64_t shuffle_seed = -1;
};

int run_preprocess(const PreprocessArgs& a) {
  mf::Config c;
  c.set("tokenization.tokenizer", a.tokenizer, "--tokenizer");
  c.set("tokenization.vocab_file", a.vocab_file, "--vocab-file");
  c.set("tokenization.merges_file", a.merges_file, "--merges-file");
  auto tok = mf::train::tokenizer_from_config(c);
  mf::PreprocessOptions o;
  o.format = a.format == "jsonl" ? mf::InputFormat::kJsonl : a.format == "text" ? mf::InputFormat::kText : mf::InputFormat::kAuto;
  o.json_key = a.json_key;
  o.text_split = a.split == "blank" ? mf::TextSplit::kBlankLine
                 : a.split == "file" ? mf::TextSplit::kWholeFile
                                     : mf::TextSplit::kSeparatorLine;
  o.separator = a.separator;
  o.append_eod = !a.no_eod;
  if (a.shuffle_seed >= 0) o.shuffle_seed = static_cast<uint64_t>(a.shuffle_seed);
  mf::PreprocessResult r = mf::preprocess(a.inputs, a.output_prefix, *tok, o);
  std::printf("wrote %s.bin/.idx: %lld documents, %lld tokens (%s tokenizer, %lld bytes of text)\n", r.prefix.c_str(),
              static_cast<long long>(r.documents), static_cast<long long>(r.tokens), tok->name().c_str(),
              static_cast<long long>(r.bytes_in));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"meshflow: train Transformer models on one device or many, from one model code"};
  app.require_subcommand(1);

  std::string config;
  std::vector<std::string> overrides;
  auto* train = app.add_subcommand("train", "Train a model from a YAML config (LiBai key names)");
  train->add_option("config", config, "YAML config file, e.g. configs/gpt2/tiny.yaml")->required();
  train->add_option("overrides", overrides, "key=value overrides, e.g. train.train_iter=100 optim.lr=3e-4");

  auto* eval = app.add_subcommand("eval", "Evaluate the latest checkpoint of a run on its validation split");
  eval->add_option("config", config, "the run's YAML config (or <output_dir>/config.yaml)")->required();
  eval->add_option("overrides", overrides, "key=value overrides");

  PreprocessArgs pa;
  auto* pre = app.add_subcommand("preprocess", "Tokenize jsonl or text into a Megatron indexed dataset (.bin/.idx)");
  pre->add_option("--input", pa.inputs, "input files (jsonl, or text)")->required();
  pre->add_option("--output-prefix", pa.output_prefix, "writes <prefix>_<json-key>_document.bin/.idx")->required();
  pre->add_option("--tokenizer", pa.tokenizer, "gpt2_bpe or byte")->capture_default_str();
  pre->add_option("--vocab-file", pa.vocab_file, "GPT-2 vocab.json or encoder.json");
  pre->add_option("--merges-file", pa.merges_file, "GPT-2 merges.txt or vocab.bpe");
  pre->add_option("--format", pa.format, "auto (by extension), jsonl or text")->capture_default_str();
  pre->add_option("--json-key", pa.json_key, "jsonl key holding the document text")->capture_default_str();
  pre->add_option("--split", pa.split, "text documents: separator (a line equal to --separator), blank, or file")
      ->capture_default_str();
  pre->add_option("--separator", pa.separator, "document separator line for --split separator")->capture_default_str();
  pre->add_flag("--no-eod", pa.no_eod, "do not append the end-of-document token");
  pre->add_option("--shuffle-seed", pa.shuffle_seed,
                  "write documents in a seeded random order, so that data.splits ranges mix all inputs");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*train) {
      mf::train::run_training(mf::Config::load(config, overrides));
    } else if (*eval) {
      mf::train::run_evaluation(mf::Config::load(config, overrides));
    } else if (*pre) {
      return run_preprocess(pa);
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "meshflow: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
