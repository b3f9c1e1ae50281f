// `meshflow preprocess`: text (jsonl or plain) tokenized into a Megatron indexed dataset, or an
// image folder packed (--images).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/config/config.h"
#include "meshflow/data/image_folder.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/runtime/components.h"

namespace mf::cli {
namespace {

struct PreprocessArgs {
  std::vector<std::string> inputs;
  std::string config;  // its tokenization.* keys are the defaults of the flags below
  std::string output_prefix, tokenizer, vocab_file, merges_file, tokenizer_file, eod_token, extra_ids;
  std::string format = "auto", json_key = "text", split = "separator", separator = "%";
  bool append_eod = false, no_eod = false, split_sentences = false;
  int64_t shuffle_seed = -1;
  std::string images;        // an image folder to pack (instead of --input)
  int64_t image_size = 224;  // --images: the packed squares' side
  int threads = 2;           // --images: decoding threads
};

// `preprocess --images ROOT`: the packed image dataset (data/image_folder.h).
int run_preprocess_images(const PreprocessArgs& a) {
  const mf::PackImagesResult r = mf::pack_image_folder(a.images, a.output_prefix, a.image_size, a.threads);
  std::printf("wrote %s and %s: %lld images of %lldx%lld RGB in %lld classes (%lld bytes)\n", r.bin.c_str(),
              r.json.c_str(), static_cast<long long>(r.images), static_cast<long long>(a.image_size),
              static_cast<long long>(a.image_size), static_cast<long long>(r.classes), static_cast<long long>(r.bytes));
  return 0;
}

int run_preprocess(const PreprocessArgs& a) {
  MF_CHECK(!a.images.empty() || !a.inputs.empty(), "preprocess: give --input (text to tokenize) or --images (an image "
           "folder to pack)");
  MF_CHECK(a.images.empty() || a.inputs.empty(), "preprocess: give --input or --images, not both");
  const std::string prefix_name = std::filesystem::path(a.output_prefix).filename().string();
  MF_CHECK(!prefix_name.empty() && prefix_name != "." && prefix_name != "..", "preprocess: --output-prefix '",
           a.output_prefix, "' names no file prefix (e.g. data/my: data/my_text_document.bin)");
  for (const std::string& in : a.inputs)
    MF_CHECK(!std::filesystem::is_directory(in), "preprocess: --input ", in, " is a folder; give its files");
  if (!a.images.empty()) return run_preprocess_images(a);
  // The tokenization section (of --config, else the defaults document), then the flags given.
  mf::Config c = a.config.empty() ? mf::Config::defaults() : mf::Config::load(a.config);
  if (!a.tokenizer.empty()) c.set("tokenization.tokenizer", a.tokenizer, "--tokenizer");
  if (!a.vocab_file.empty()) c.set("tokenization.vocab_file", a.vocab_file, "--vocab-file");
  if (!a.merges_file.empty()) c.set("tokenization.merges_file", a.merges_file, "--merges-file");
  if (!a.tokenizer_file.empty()) c.set("tokenization.tokenizer_file", a.tokenizer_file, "--tokenizer-file");
  if (!a.eod_token.empty()) c.set("tokenization.eod_token", a.eod_token, "--eod-token");
  if (!a.extra_ids.empty()) c.set("tokenization.extra_ids", a.extra_ids, "--extra-ids");
  if (a.append_eod) c.set("tokenization.append_eod", "true", "--append-eod");
  if (a.no_eod) c.set("tokenization.append_eod", "false", "--no-eod");
  auto tok = mf::runtime::tokenizer_from_config(c);
  mf::PreprocessOptions o;
  o.format = a.format == "jsonl" ? mf::InputFormat::kJsonl : a.format == "text" ? mf::InputFormat::kText : mf::InputFormat::kAuto;
  o.json_key = a.json_key;
  o.text_split = a.split == "blank" ? mf::TextSplit::kBlankLine
                 : a.split == "file" ? mf::TextSplit::kWholeFile
                                     : mf::TextSplit::kSeparatorLine;
  o.separator = a.separator;
  o.append_eod = c.get_bool("tokenization.append_eod");
  if (a.shuffle_seed >= 0) o.shuffle_seed = static_cast<uint64_t>(a.shuffle_seed);
  o.split_sentences = a.split_sentences;
  mf::PreprocessResult r = mf::preprocess(a.inputs, a.output_prefix, *tok, o);
  const std::string dropped =
      r.dropped_empty == 0 ? std::string()
                           : mf::detail::cat("; ", r.dropped_empty, " document", r.dropped_empty == 1 ? "" : "s",
                                             " left out: they tokenize to no ids");
  std::printf("wrote %s.bin/.idx: %lld documents, %lld tokens (%s tokenizer, %lld bytes of text)%s\n", r.prefix.c_str(),
              static_cast<long long>(r.documents), static_cast<long long>(r.tokens), tok->name().c_str(),
              static_cast<long long>(r.bytes_in), dropped.c_str());
  return 0;
}

class PreprocessCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* pre = app.add_subcommand("preprocess", "Tokenize jsonl or text into a Megatron indexed dataset (.bin/.idx), "
                                    "or pack an image folder (--images)");
    pre->add_option("--input", a_.inputs, "input files (jsonl, or text)");
    pre->add_option("--output-prefix", a_.output_prefix,
                    "writes <prefix>_<json-key>_document.bin/.idx (--images: <prefix>.bin and <prefix>.json)")
        ->required();
    pre->add_option("--images", a_.images,
                    "an image folder ROOT/<class>/<image>.png|jpg|jpeg to pack instead: each image decoded, its shorter "
                    "side resized to --image-size and the centre square cropped, RGB bytes in <prefix>.bin, labels and "
                    "class names in <prefix>.json (data.train_folder / data.validation_folder read either)");
    pre->add_option("--image-size", a_.image_size, "--images: the side of the packed squares (model.image_size)")
        ->capture_default_str()
        ->check(CLI::Range(1, 16384));
    pre->add_option("--threads", a_.threads, "--images: decoding threads")->capture_default_str()->check(CLI::Range(1, 1024));
    pre->add_option("--config", a_.config,
                    "a run's YAML config: its tokenization.* keys (tokenizer, vocab_file, merges_file, tokenizer_file, "
                    "eod_token, extra_ids, do_lower_case, append_eod) are the defaults of the flags below");
    pre->add_option("--tokenizer", a_.tokenizer,
                    "gpt2_bpe, hf_bpe, sentencepiece, wordpiece or byte (default: tokenization.tokenizer, gpt2_bpe)");
    pre->add_option("--vocab-file", a_.vocab_file, "GPT-2 vocab.json or encoder.json (default: tokenization.vocab_file)");
    pre->add_option("--merges-file", a_.merges_file, "GPT-2 merges.txt or vocab.bpe (default: tokenization.merges_file)");
    pre->add_option("--tokenizer-file,--tokenizer-model", a_.tokenizer_file,
                    "hf_bpe: tokenizer.json; sentencepiece: tokenizer.model or spiece.model (T5); wordpiece: vocab.txt; or "
                    "the folder holding it (default: tokenization.tokenizer_file)");
    pre->add_option("--eod-token", a_.eod_token,
                    "hf_bpe / sentencepiece: the end-of-document token's text (default: tokenization.eod_token)");
    pre->add_option("--extra-ids", a_.extra_ids,
                    "sentencepiece: T5's sentinel tokens <extra_id_0>.. after the model's pieces, written in the text "
                    "as single tokens (T5: 100; default: tokenization.extra_ids, 0)")
        ->type_name("INT");
    pre->add_option("--format", a_.format, "auto (by extension), jsonl or text")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "jsonl", "text"}));
    pre->add_option("--json-key", a_.json_key, "jsonl key holding the document text")->capture_default_str();
    pre->add_option("--split", a_.split, "text documents: separator (a line equal to --separator), blank, or file")
        ->capture_default_str()
        ->check(CLI::IsMember({"separator", "blank", "file"}));
    pre->add_option("--separator", a_.separator, "document separator line for --split separator")->capture_default_str();
    auto* eod = pre->add_flag("--append-eod", a_.append_eod,
                              "append the end-of-document token to every document (default: tokenization.append_eod, true)");
    pre->add_flag("--no-eod", a_.no_eod, "do not append the end-of-document token")->excludes(eod);
    pre->add_flag("--split-sentences", a_.split_sentences,
                  "one sequence per sentence (BERT's sentence pairs); writes <prefix>_<json-key>_sentence.bin/.idx");
    pre->add_option("--shuffle-seed", a_.shuffle_seed,
                    "write documents in a seeded random order, so that data.splits ranges mix all inputs");
    return pre;
  }

  int run(const comm::CommPtr&) override { return run_preprocess(a_); }

 private:
  PreprocessArgs a_;
};

}  // namespace

std::unique_ptr<Command> preprocess_command() { return std::make_unique<PreprocessCommand>(); }

}  // namespace mf::cli
