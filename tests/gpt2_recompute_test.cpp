// Activation checkpointing of GPT-2 (full blocks, the selective attention core, a layer range):
// losses and every gradient are bit-identical to the run without it, dropout on, with the loss
// head cut into chunks and a batch slice live only during forward; bad settings fail naming the
// config key.
#include <optional>

#include "meshflow/config/config.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/random/batch_slice.h"
#include "meshflow/runtime/build.h"
#include "testing.h"

namespace {
using namespace mft;
using mf::models::CheckpointGranularity;

struct Recompute {
  bool enabled = false;
  CheckpointGranularity granularity = CheckpointGranularity::kFull;
  int64_t start = 0, end = -1;
};

struct Result {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;
};

// Four forward + backward passes of a 4-layer GPT (dropout 0.1 everywhere), gradients
// accumulated over them. The second half runs its forward inside a batch slice (rows 2..3 of 8)
// and its backward outside it, as a recomputation must not depend on what is live in backward.
mf::models::Gpt2Config tiny_config(const Recompute& r) {
  mf::models::Gpt2Config c;
  c.vocab_size = 61;
  c.max_seq_length = 12;
  c.hidden_size = 16;
  c.num_layers = 4;
  c.num_attention_heads = 2;
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob = 0.1;
  c.activation_checkpointing = r.enabled;
  c.checkpoint_granularity = r.granularity;
  c.checkpoint_start_layer = r.start;
  c.checkpoint_end_layer = r.end;
  c.head_chunk_elements = 5 * c.vocab_size;  // 5 rows a chunk: 24 rows make 5 chunks
  c.dtype = DType::kF32;
  return c;
}

Tensor tiny_ids(int step, bool labels) {
  std::vector<int64_t> v(24);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = !labels ? static_cast<int64_t>((i * 7 + static_cast<size_t>(step) * 13) % 61)
                   : i % 9 == 4 ? -100 : static_cast<int64_t>((i * 5 + 3) % 61);  // some ignored
  return mf::from_vector(v, {2, 12});
}

Result run(const Recompute& r) {
  mf::models::Gpt2Model model(tiny_config(r));
  model.init_weights(3);
  model.train();
  mf::manual_seed(11);
  Result out;
  for (int step = 0; step < 4; ++step) {
    Tensor loss;
    {
      std::optional<mf::BatchSliceGuard> slice;
      if (step >= 2) slice.emplace(2, 8);
      loss = model.loss(tiny_ids(step, false), tiny_ids(step, true));
    }
    out.losses.push_back(loss.item());
    loss.backward();
  }
  for (auto& [name, p] : model.named_parameters()) out.grads.push_back(p.grad().to_vector<float>());
  return out;
}

void expect_identical(const Result& want, const Result& got, const char* what) {
  EXPECT_EQ(want.losses, got.losses) << what;
  ASSERT_EQ(want.grads.size(), got.grads.size()) << what;
  for (size_t i = 0; i < want.grads.size(); ++i) EXPECT_EQ(want.grads[i], got.grads[i]) << what << ": gradient " << i;
}

TEST(Gpt2Recompute, BitIdenticalLossesAndGradients) {
  const Result plain = run({});
  const auto kFull = CheckpointGranularity::kFull, kSelective = CheckpointGranularity::kSelective;
  expect_identical(plain, run({true, kFull}), "full");
  expect_identical(plain, run({true, kSelective}), "selective");
  expect_identical(plain, run({true, kFull, 1, 3}), "full, layers [1, 3)");
  expect_identical(plain, run({true, kSelective, 2, -1}), "selective, layers [2, 4)");
  expect_identical(plain, run({true, kFull, 0, 1}), "full, the first layer");
}

// Two pipeline stages (layers [0, 2) and [2, 4)) checkpointing whole-model layers [1, 3): one
// layer on each stage; the losses and the blocks' gradients are those of the whole model without
// recomputation.
TEST(Gpt2Recompute, PipelineStagesCheckpointTheirShareOfTheRange) {
  const Result plain = run({});
  const Recompute r{true, CheckpointGranularity::kFull, 1, 3};
  mf::models::Gpt2Model s0(tiny_config(r), {{}, {0, 2, true, false, {}}}), s1(tiny_config(r), {{}, {2, 4, false, true, {}}});
  for (auto* m : {&s0, &s1}) {
    m->init_weights(3);
    m->train();
  }
  mf::manual_seed(11);
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    const uint64_t stream0 = mf::default_generator().state().next_stream;
    std::optional<mf::BatchSliceGuard> slice;
    if (step >= 2) slice.emplace(2, 8);
    Tensor out = s0.stage_forward(tiny_ids(step, false), stream0, 12);
    Tensor in = out.detach();
    in.set_requires_grad(true);
    Tensor loss = s1.head_loss(s1.stage_forward(in, stream0, 12), tiny_ids(step, true));
    losses.push_back(loss.item());
    slice.reset();
    loss.backward();
    out.backward(in.grad());
  }
  EXPECT_EQ(plain.losses, losses);
  // Whole-model parameter order: wte, wpe, h.0 .. h.3, ln_f. Blocks 0, 1 are on s0, 2, 3 on s1
  // (wte's two copies are summed by the trainer, not compared here).
  size_t i = 2;
  for (auto* m : {&s0, &s1})
    for (auto& [name, p] : m->named_parameters())
      if (name.find(".h.") != std::string::npos) {
        EXPECT_EQ(plain.grads[i++], p.grad().to_vector<float>()) << name;
      }
  EXPECT_EQ(i, plain.grads.size() - 2);  // ln_f's weight and bias follow
}

TEST(Gpt2Recompute, OnlyTheLayersInTheRange) {
  mf::models::Gpt2Config c;
  c.num_layers = 6;
  c.activation_checkpointing = true;
  c.checkpoint_start_layer = 2;
  c.checkpoint_end_layer = 4;
  for (int64_t l = 0; l < 6; ++l) EXPECT_EQ(c.checkpointed(l), l == 2 || l == 3) << l;
  c.checkpoint_end_layer = -1;
  EXPECT_TRUE(c.checkpointed(5));
  c.activation_checkpointing = false;
  EXPECT_FALSE(c.checkpointed(3));
}

TEST(Gpt2Recompute, ConfigErrorsNameTheKey) {
  auto build = [](const std::vector<std::string>& overrides) {
    mf::Config c = mf::Config::defaults();
    c.apply_override("model.num_layers=4");
    for (const auto& o : overrides) c.apply_override(o);
    return mf::models::gpt2_config(c, 0);
  };
  EXPECT_EQ(build({"train.activation_checkpoint.granularity=selective"}).checkpoint_granularity,
            CheckpointGranularity::kSelective);
  EXPECT_EQ(build({"train.activation_checkpoint.end_layer=2"}).checkpoint_end_layer, 2);
  MFT_EXPECT_ERROR(build({"train.activation_checkpoint.granularity=attention"}),
                   "train.activation_checkpoint.granularity 'attention' is not one of full, selective");
  MFT_EXPECT_ERROR(build({"train.activation_checkpoint.start_layer=4"}),
                   "train.activation_checkpoint.start_layer 4 must be in [0, model.num_layers = 4)");
  MFT_EXPECT_ERROR(build({"train.activation_checkpoint.end_layer=5"}), "train.activation_checkpoint.end_layer 5",
                   "model.num_layers = 4");
  MFT_EXPECT_ERROR(build({"train.activation_checkpoint.start_layer=2", "train.activation_checkpoint.end_layer=2"}),
                   "train.activation_checkpoint.end_layer 2", "start_layer = 2");
}

}  // namespace
