#include "meshflow/runtime/components.h"

#include <filesystem>
#include <mutex>

#include "meshflow/core/regular_file.h"
#include "meshflow/data/gpt2_bpe.h"

namespace mf::runtime {

namespace {

struct Registries {
  OptimizerRegistry optimizers{"optim.name"};
  SchedulerRegistry schedulers{"train.scheduler.name"};
  TokenizerRegistry tokenizers{"tokenization.tokenizer"};
};

// tokenization.extra_ids adds T5's sentinels to a SentencePiece vocabulary; other kinds refuse it.
void check_no_extra_ids(const Config& c, const std::string& kind) {
  const int64_t n = c.get_int("tokenization.extra_ids");
  MF_CHECK(n == 0, "tokenization.extra_ids (", n,
           ": T5's sentinel tokens) is for tokenization.tokenizer sentencepiece, not ", kind);
}

// The tokenizer file a config key names: a regular file of sane size (a folder too where
// `folder_ok`: the tokenizer then checks the file it picks there). Refuses /dev/zero, FIFOs and
// the like in one line naming the key and the path, before anything reads them.
void check_tokenizer_path(const Config& c, const std::string& key, bool folder_ok) {
  const std::string path = c.get_string(key);
  if (folder_ok && std::filesystem::is_directory(path)) return;
  check_regular_file(path, key, kMaxTokenizerFileBytes);
}

void register_builtins(Registries& r) {
  r.optimizers.add("adamw", [](std::vector<optim::ParamGroup> g, const TrainOptions& o) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::AdamW>(std::move(g), o.lr, o.beta1, o.beta2, o.eps);
  });
  r.optimizers.add("sgd", [](std::vector<optim::ParamGroup> g, const TrainOptions& o) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::Sgd>(std::move(g), o.lr, o.momentum);
  });
  for (const char* name : {"cosine", "linear", "constant", "multistep"})
    r.schedulers.add(name, [name](optim::SchedulerConfig c) {
      c.name = name;
      return optim::LrScheduler(c);
    });
  r.tokenizers.add("byte", [](const Config& c) -> std::unique_ptr<Tokenizer> {
    check_no_extra_ids(c, "byte");
    return std::make_unique<ByteTokenizer>();
  });
  r.tokenizers.add("gpt2_bpe", [](const Config& c) -> std::unique_ptr<Tokenizer> {
    check_no_extra_ids(c, "gpt2_bpe");
    std::string vocab = c.get_string("tokenization.vocab_file"), merges = c.get_string("tokenization.merges_file");
    MF_CHECK(!vocab.empty() && !merges.empty(),
             "tokenization.tokenizer gpt2_bpe needs tokenization.vocab_file and tokenization.merges_file");
    check_tokenizer_path(c, "tokenization.vocab_file", false);
    check_tokenizer_path(c, "tokenization.merges_file", false);
    return std::make_unique<Gpt2BpeTokenizer>(vocab, merges);
  });
  for (const char* kind : {"hf_bpe", "sentencepiece"})
    r.tokenizers.add(kind, [kind](const Config& c) -> std::unique_ptr<Tokenizer> {
      std::string file = c.get_string("tokenization.tokenizer_file");
      MF_CHECK(!file.empty(), "tokenization.tokenizer ", kind, " needs tokenization.tokenizer_file (",
               std::string(kind) == "hf_bpe" ? "a tokenizer.json" : "a tokenizer.model or spiece.model",
               " or a folder holding it)");
      if (std::string(kind) != "sentencepiece") check_no_extra_ids(c, kind);
      check_tokenizer_path(c, "tokenization.tokenizer_file", true);
      return make_tokenizer(kind, file, c.get_string("tokenization.eod_token"), true,
                            c.get_int("tokenization.extra_ids"));
    });
  r.tokenizers.add("wordpiece", [](const Config& c) -> std::unique_ptr<Tokenizer> {
    std::string file = c.get_string("tokenization.tokenizer_file");
    MF_CHECK(!file.empty(), "tokenization.tokenizer wordpiece needs tokenization.tokenizer_file (a BERT vocab.txt or a "
                            "folder holding it)");
    check_no_extra_ids(c, "wordpiece");
    check_tokenizer_path(c, "tokenization.tokenizer_file", true);
    return make_tokenizer("wordpiece", file, c.get_string("tokenization.eod_token"),
                          c.get_bool("tokenization.do_lower_case"));
  });
}

Registries& registries() {
  static Registries r;
  static std::once_flag once;
  std::call_once(once, [] { register_builtins(r); });
  return r;
}

}  // namespace

OptimizerRegistry& optimizer_registry() { return registries().optimizers; }
SchedulerRegistry& scheduler_registry() { return registries().schedulers; }
TokenizerRegistry& tokenizer_registry() { return registries().tokenizers; }

std::unique_ptr<Tokenizer> tokenizer_from_config(const Config& c) {
  return tokenizer_registry().create(c.get_string("tokenization.tokenizer"), c);
}

}  // namespace mf::runtime
