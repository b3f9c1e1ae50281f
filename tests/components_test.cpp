// The component registries behind model.name, optim.name, train.scheduler.name and
// tokenization.tokenizer.
#include "meshflow/models/registry.h"
#include "meshflow/runtime/components.h"
#include "testing.h"

namespace {
using namespace mft;

TEST(Components, BuiltinsAreRegisteredAndUnknownNamesListThem) {
  using namespace mf::runtime;
  EXPECT_EQ(mf::models::model_names(),
            (std::vector<std::string>{"bert", "gpt2", "gpt_neox", "llama", "mistral", "mlp_lm", "mt5", "qwen2", "roberta", "t5", "vit"}));
  MFT_EXPECT_ERROR(mf::models::model_spec("gpt3"), "unknown model.name `gpt3`",
                   "registered: bert, gpt2, gpt_neox, llama, mistral, mlp_lm, mt5, qwen2, roberta, t5, vit");
  EXPECT_EQ(optimizer_registry().names(), (std::vector<std::string>{"adamw", "sgd"}));
  EXPECT_EQ(scheduler_registry().names(), (std::vector<std::string>{"constant", "cosine", "linear", "multistep"}));
  EXPECT_EQ(tokenizer_registry().names(), (std::vector<std::string>{"byte", "gpt2_bpe", "hf_bpe", "sentencepiece", "wordpiece"}));
  mf::Config c;
  EXPECT_EQ(tokenizer_registry().create("byte", c)->vocab_size(), 257);
  MFT_EXPECT_ERROR(optimizer_registry().get("lamb"), "unknown optim.name `lamb`", "registered: adamw, sgd");
  MFT_EXPECT_ERROR(tokenizer_registry().create("gpt2_bpe", c), "needs tokenization.vocab_file");
  mf::optim::SchedulerConfig s;
  s.base_lr = 2.0;
  EXPECT_EQ(scheduler_registry().create("constant", s).lr_at(5), 2.0);
}

}  // namespace
