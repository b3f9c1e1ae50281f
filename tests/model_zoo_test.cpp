// The model zoo (models/registry.h) against the models it builds: for every registered model, the
// spec's parameter list for a config is the built model's (names, order, logical shapes), a
// pipeline stage holds its layers' parameters under the whole model's names, the ZeRO units cover
// every parameter once, tied parameters exist on the stages that hold them, the stages' forward
// units chain, and a stage's activation shape is what its forward returns.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "meshflow/models/decoder_lm.h"
#include "meshflow/models/gpt2/config.h"
#include "meshflow/models/gpt_neox/config.h"
#include "meshflow/models/t5/config.h"
#include "meshflow/models/vit/config.h"
#include "meshflow/models/registry.h"
#include "meshflow/ops/ops.h"
#include "testing.h"

namespace {
using namespace mft;

// Four layers (T5: two encoder and two decoder blocks, decoder rows of 2): the sizes below that
// the model reads (a model's keys are valid only when it is chosen).
mf::Config small_config(const std::string& name) {
  const bool t5 = name == "t5" || name == "mt5";
  const std::vector<std::pair<std::string, std::string>> sizes = {
      {"num_layers", t5 ? "2" : "4"}, {"num_decoder_layers", "2"}, {"hidden_size", "16"},
      {"num_attention_heads", "2"}, {"ffn_hidden_size", "32"}, {"max_seq_length", "8"},
      {"decoder_seq_length", "2"}, {"vocab_size", "50"}, {"image_size", "8"}, {"patch_size", "4"},
      {"num_labels", "3"}, {"embedding_dropout_prob", "0.0"}, {"attention_dropout_prob", "0.0"},
      {"output_dropout_prob", "0.0"}};
  const std::vector<std::string>& reads = mf::models::model_spec(name).config_keys;
  std::string yaml = "model: {name: " + name;
  for (const auto& [key, value] : sizes)
    if (std::find(reads.begin(), reads.end(), "model." + key) != reads.end()) yaml += ", " + key + ": " + value;
  return mf::Config::from_yaml(yaml + "}");
}

// The test model is the shared block without attention: its logits, composed here from the ops,
// are norm(x_L) wte^T with x_0 = wte[ids] and x_l+1 = x_l + fc2(gelu_tanh(fc1(norm_l(x_l)))).
TEST(ModelZoo, TheTestModelIsTheSharedBlockWithoutAttention) {
  auto model = std::dynamic_pointer_cast<mf::models::DecoderLm>(mf::models::build_model(small_config("mlp_lm"), 0));
  ASSERT_TRUE(model);
  model->init_weights(7);
  std::map<std::string, Tensor> p;
  for (const auto& [name, t] : model->named_parameters()) p[name] = t;
  ASSERT_EQ(p.size(), 1 + 4 * 6 + 2u);
  const Tensor ids = mf::from_vector<int64_t>({3, 49, 0, 7, 7, 12}, {2, 3});
  Tensor x = mf::embedding(p.at("wte.weight"), ids);  // (2, 3, 16)
  for (int l = 0; l < 4; ++l) {
    const std::string b = "layers." + std::to_string(l) + ".";
    const Tensor n = mf::layer_norm(x, p.at(b + "norm.weight"), p.at(b + "norm.bias"));
    const Tensor h = mf::gelu(mf::add(mf::matmul(n, p.at(b + "fc1.weight")), p.at(b + "fc1.bias")), true);
    x = mf::add(x, mf::add(mf::matmul(h, p.at(b + "fc2.weight")), p.at(b + "fc2.bias")));
  }
  const Tensor want = mf::matmul(mf::layer_norm(x, p.at("norm.weight"), p.at("norm.bias")),
                                 mf::transpose(p.at("wte.weight"), 0, 1));  // (2, 3, 50)
  expect_rel_close(model->logits(ids), to_f64(want), 1e-5, "mlp_lm logits");
}

TEST(ModelZoo, AModelsKeysAreValidOnlyWhenItIsChosen) {
  mf::Config c = small_config("gpt2");
  c.apply_override("model.rotary_pct=0.5");
  std::string what;
  try {
    mf::models::build_model(c, 0);
  } catch (const mf::Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("model.rotary_pct=0.5"), std::string::npos) << what;
  EXPECT_NE(what.find("model.name=gpt2"), std::string::npos) << what;
  EXPECT_NE(what.find("gpt_neox"), std::string::npos) << what;
  // Its default value (a run's whole config.yaml read back) is no error.
  c.apply_override("model.rotary_pct=0.25");
  EXPECT_NO_THROW(mf::models::check_model_keys(c));
  // Every shipped config sets only its model's keys.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(MESHFLOW_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    const mf::Config shipped = mf::Config::load(entry.path().string(), {});
    EXPECT_NO_THROW(mf::models::check_model_keys(shipped)) << entry.path();
  }
}

// A batch of 2 rows of 3 tokens with every field a model of the zoo reads (the last position of
// row 2 padding); an encoder-decoder's labels are its decoder's (2 positions).
mf::models::Batch small_batch(const mf::models::Model& m) {
  mf::models::Batch b(mf::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}),
                      mf::from_vector(std::vector<int64_t>{2, 3, 4, 5, 6, -100}, {2, 3}));
  b.token_type_ids = mf::from_vector(std::vector<int64_t>{0, 1, 1, 0, 0, 1}, {2, 3});
  b.attention_mask = mf::from_vector(std::vector<int64_t>{1, 1, 1, 1, 1, 0}, {2, 3});
  b.next_sentence_label = mf::from_vector(std::vector<int64_t>{0, 1}, {2});
  if (m.batch_kind() == mf::models::BatchKind::kSpanCorruption) {
    b.decoder_input_ids = mf::from_vector(std::vector<int64_t>{0, 7, 0, 8}, {2, 2});
    b.decoder_attention_mask = mf::from_vector(std::vector<int64_t>{1, 1, 1, 0}, {2, 2});
    b.labels = mf::from_vector(std::vector<int64_t>{7, 9, 8, -100}, {2, 2});
  }
  if (m.batch_kind() == mf::models::BatchKind::kImageClassification) {  // 8x8 images, 3 classes
    b = mf::models::Batch();
    std::vector<float> px(2 * 3 * 8 * 8);
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<float>(static_cast<int>(i * 29 % 17) - 8) / 8.0f;
    b.pixel_values = mf::from_vector(px, {2, 3, 8, 8});
    b.labels = mf::from_vector(std::vector<int64_t>{2, 0}, {2});
  }
  return b;
}

// A schema field's range holds for a config built in code too (a run config's values are checked
// on reading, config/ranges.cpp): validate() names the key, its range and the value.
TEST(ModelZoo, SchemaRangesHoldForConfigsBuiltInCode) {
  auto refusal = [](const auto& config) -> std::string {
    try {
      config.validate();
    } catch (const mf::Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  mf::models::Gpt2Config gpt2;
  EXPECT_EQ(refusal(gpt2), "(accepted)");
  gpt2.attention_dropout_prob = 1.0;
  EXPECT_NE(refusal(gpt2).find("gpt2: model.attention_dropout_prob must be in [0, 1), got 1"), std::string::npos)
      << refusal(gpt2);
  mf::models::GptNeoxConfig neox;
  EXPECT_EQ(refusal(neox), "(accepted)");
  neox.rotary_pct = 1.5;
  EXPECT_NE(refusal(neox).find("gpt_neox: model.rotary_pct must be in (0, 1], got 1.5"), std::string::npos) << refusal(neox);
  mf::models::T5Config t5;
  EXPECT_EQ(refusal(t5), "(accepted)");
  t5.layernorm_epsilon = 0.0;
  EXPECT_NE(refusal(t5).find("t5: model.layernorm_epsilon must be > 0, got 0"), std::string::npos) << refusal(t5);
  mf::models::VitConfig vit;
  EXPECT_EQ(refusal(vit), "(accepted)");
  vit.num_labels = 1;
  EXPECT_NE(refusal(vit).find("vit: model.num_labels must be >= 2, got 1"), std::string::npos) << refusal(vit);
}

TEST(ModelZoo, SpecsDescribeTheModelsTheyBuild) {
  for (const std::string& name : mf::models::model_names()) {
    const mf::models::ModelSpec& spec = mf::models::model_spec(name);
    const mf::Config c = small_config(name);
    auto whole = spec.build(c, 0, {});
    const auto shapes = mf::models::parameter_shapes(c);
    EXPECT_EQ(shapes, whole->parameter_shapes()) << name;
    // The shape-only build (models::parameter_shapes) declares every parameter and holds none.
    EXPECT_TRUE(spec.build(c, 0, mf::models::ModelContext::shape_only())->named_parameters().empty()) << name;
    // One process: the parameters are the whole model's, in the spec's order, of its shapes.
    const auto named = whole->named_parameters();
    const auto layouts = whole->parameter_layouts();
    ASSERT_EQ(named.size(), shapes.size()) << name;
    for (size_t k = 0; k < named.size(); ++k) {
      EXPECT_EQ(named[k].first, shapes[k].first) << name;
      EXPECT_EQ(layouts[k].logical, shapes[k].second) << name << " " << named[k].first;
    }
    EXPECT_EQ(whole->model_config().get_string("model.name"), name);
    EXPECT_EQ(whole->describe(), spec.describe(c)) << name;
    // Two pipeline stages: each parameter on the stage(s) holding it, under its whole-model name.
    std::set<std::string> seen, tied_held;
    for (int s = 0; s < 2; ++s) {
      mf::models::PipelineStage st{2 * s, 2 * s + 2, s == 0, s == 1, {}};
      auto stage = spec.build(c, 0, {{}, st});
      // Every stage is built whole, the other stages' parts shape-only: it declares the whole model.
      EXPECT_EQ(stage->parameter_shapes(), shapes) << name << " stage " << s;
      // Every parameter in a unit; in several only when each uses it (T5's bias table, in every
      // block of its stack), never twice in one.
      std::set<size_t> in_units;
      for (const auto& u : stage->parameter_units()) {
        std::set<size_t> unit;
        for (size_t k : u.params) {
          EXPECT_TRUE(unit.insert(k).second) << name << ": parameter " << k << " twice in unit " << u.id;
          const bool shared = stage->named_parameters()[k].first.find("relative_attention_bias") != std::string::npos;
          EXPECT_TRUE(in_units.insert(k).second || shared) << name << ": parameter " << k << " in two units";
        }
      }
      EXPECT_EQ(in_units.size(), stage->parameters().size()) << name << ": every parameter in a unit";
      for (const auto& [pname, t] : stage->named_parameters()) seen.insert(pname);
      EXPECT_EQ(stage->tied_parameters(), whole->tied_parameters()) << name << ": one tied list on every stage";
      for (const std::string& tied : stage->tied_parameters())
        for (const auto& [pname, t] : stage->named_parameters())
          if (pname == tied) tied_held.insert(tied);
      // The first stage's output is what the second stage receives.
      if (s == 0) {
        stage->eval();
        const mf::models::Batch b = small_batch(*stage);
        const int64_t T = stage->sequence_length(b);
        mf::Tensor out = stage->stage_forward(b, mf::Tensor(), 0, T);
        EXPECT_EQ(out.shape(), stage->activation_shape(2, T)) << name;
        EXPECT_EQ(out.dtype(), stage->activation_dtype(mf::cpu_device())) << name;
      }
    }
    EXPECT_EQ(seen.size(), shapes.size()) << name << ": the stages hold every parameter";
    for (const std::string& tied : whole->tied_parameters())
      EXPECT_TRUE(tied_held.count(tied)) << name << ": tied parameter " << tied << " on no stage";
  }
}

TEST(ModelZoo, TheWholeModelsLossIsItsStagesLoss) {
  for (const std::string& name : mf::models::model_names()) {
    const mf::Config c = small_config(name);
    const mf::models::ModelSpec& spec = mf::models::model_spec(name);
    auto whole = spec.build(c, 0, {});
    auto first = spec.build(c, 0, {{}, {0, 2, true, false, {}}});
    auto last = spec.build(c, 0, {{}, {2, 4, false, true, {}}});
    for (auto* m : {whole.get(), first.get(), last.get()}) m->eval();
    const mf::models::Batch b = small_batch(*whole);
    const double l = whole->loss(b).item();
    const int64_t T = whole->sequence_length(b);
    const mf::Tensor h = last->stage_forward(b, first->stage_forward(b, mf::Tensor(), 0, T), 0, T);
    const double piped = last->head_loss(h, b, whole->loss_counts(b)).item();
    EXPECT_EQ(l, piped) << name << ": same seed, same initial values, same loss";
    EXPECT_GT(l, 0.0) << name;
  }
}

}  // namespace
