// Generation (infer/engine.h): logits through the key/value cache equal the logits recomputed
// without it at every position; a left-padded batch generates what each prompt generates alone;
// sampling follows its seed and its filters; bad requests are refused before any work.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "meshflow/infer/engine.h"
#include "meshflow/infer/sampling.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/models/llama/model.h"
#include "meshflow/models/registry.h"
#include "golden_testing.h"

namespace {

using namespace mft;

std::shared_ptr<mf::models::Model> tiny(const std::string& name) {
  const bool llama = name == "llama" || name == "qwen2", neox = name == "gpt_neox";
  std::string yaml = "model: {name: " + name + ", num_layers: 2, hidden_size: 32, num_attention_heads: 4, " +
                     (llama ? std::string("num_key_value_heads: 2, embedding_dropout_prob: 0.0, output_dropout_prob: 0.0, ") : std::string()) +
                     (neox ? std::string("embedding_dropout_prob: 0.0, rotary_pct: 0.5, ") : std::string()) +
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

// GPT-NeoX: half of each head rotated (by each row's positions when a padded batch decodes).
INSTANTIATE_TEST_SUITE_P(Zoo, GenerateModels, ::testing::Values("gpt2", "llama", "qwen2", "gpt_neox"));

// ---- against an independent PyTorch implementation with a KV cache (scripts/torch_decoder.py,
// scripts/make_generate_golden.py), from the same weights

std::shared_ptr<mf::models::Model> golden_model(const nlohmann::json& g, DType dt) {
  const nlohmann::json& c = g["config"];
  std::shared_ptr<mf::models::Model> m;
  if (g["name"] == "gpt2") {
    mf::models::Gpt2Config k;
    k.vocab_size = c["vocab_size"];
    k.max_seq_length = c["max_seq_length"];
    k.hidden_size = c["hidden_size"];
    k.num_layers = c["num_layers"];
    k.num_attention_heads = c["num_attention_heads"];
    k.embedding_dropout_prob = k.attention_dropout_prob = k.output_dropout_prob = 0.0;
    k.dtype = dt;
    m = std::make_shared<mf::models::Gpt2Model>(k);
  } else {
    mf::models::LlamaConfig k;
    k.variant = g["name"] == "qwen2" ? mf::models::LlamaVariant::kQwen2 : mf::models::LlamaVariant::kLlama;
    k.vocab_size = c["vocab_size"];
    k.hidden_size = c["hidden_size"];
    k.num_layers = c["num_layers"];
    k.num_attention_heads = c["num_attention_heads"];
    k.num_key_value_heads = c["num_key_value_heads"];
    k.ffn_hidden_size = c["ffn_hidden_size"];
    k.max_seq_length = c["max_seq_length"];
    k.layernorm_epsilon = c["rms_norm_eps"];
    k.rope_theta = c["rope_theta"];
    k.tie_word_embeddings = c["tie_word_embeddings"];
    k.qkv_bias = c["qkv_bias"];
    k.settings.dtype = dt;
    m = std::make_shared<mf::models::LlamaModel>(k);
  }
  load_golden_weights(*m, g["weights"], dt);
  return m;
}

std::vector<mf::infer::GenerationRequest> golden_requests(const nlohmann::json& g) {
  std::vector<mf::infer::GenerationRequest> rows;
  for (const auto& p : g["prompts"]) {
    mf::infer::GenerationRequest r;
    r.prompt = p.get<std::vector<int64_t>>();
    r.max_new_tokens = g["max_new_tokens"];
    rows.push_back(r);
  }
  return rows;
}

// Greedy continuations token for token, alone and as one left-padded batch, in f64 and f32 (the
// reference's smallest top-1/top-2 margin, over 1e-3, is far above f32's logit error); f64 logits
// of prompt 0 and its continuation within 1e-9.
TEST(GenerateGolden, GreedyTokensAndLogitsMatchPyTorch) {
  const nlohmann::json all = golden_file("generate_tiny.json");
  ASSERT_EQ(all["cases"].size(), 3u);
  for (const nlohmann::json& g : all["cases"]) {
    const std::string name = g["name"];
    ASSERT_GT(g["min_margin"].get<double>(), 1e-3) << name;
    const auto want_single = g["greedy_single"].get<std::vector<std::vector<int64_t>>>();
    const auto want_batch = g["greedy_batch"].get<std::vector<std::vector<int64_t>>>();
    for (DType dt : {DType::kF64, DType::kF32}) {
      mf::infer::Engine engine(golden_model(g, dt), nullptr, nullptr);
      const auto rows = golden_requests(g);
      const auto batch = engine.generate(rows);
      for (size_t b = 0; b < rows.size(); ++b) {
        EXPECT_EQ(engine.generate({rows[b]})[0].tokens, want_single[b]) << name << " " << mf::dtype_name(dt) << " prompt " << b;
        EXPECT_EQ(batch[b].tokens, want_batch[b]) << name << " " << mf::dtype_name(dt) << " batch row " << b;
      }
      if (dt != DType::kF64) continue;
      std::vector<int64_t> seq = rows[0].prompt;
      seq.insert(seq.end(), want_single[0].begin(), want_single[0].end());
      const Tensor ids = mf::from_vector(seq, {1, static_cast<int64_t>(seq.size())});
      std::vector<double> ref;
      for (const auto& row : g["logits"])
        for (double x : row) ref.push_back(x);
      const double full = rel_error(engine.full_logits(ids), ref);
      const double cached = rel_error(engine.cached_logits(ids, static_cast<int64_t>(rows[0].prompt.size())), ref);
      EXPECT_LT(full, 1e-9) << name;
      EXPECT_LT(cached, 1e-9) << name;
      std::printf("%s f64 logits vs PyTorch: recomputed %.2e, through the cache %.2e\n", name.c_str(), full, cached);
    }
  }
}

// Beam search (3 beams, an eos token that ends some hypotheses, length penalties 1 and 2): each
// prompt alone and the left-padded batch, tokens, finish reasons and scores, in f64 (the
// reference's smallest gap between candidates it ranks is 2.2e-4).
TEST(GenerateGolden, BeamSearchMatchesPyTorch) {
  const nlohmann::json all = golden_file("generate_tiny.json");
  for (const nlohmann::json& g : all["cases"]) {
    mf::infer::Engine engine(golden_model(g, DType::kF64), nullptr, nullptr);
    for (const char* key : {"beam", "beam_lp2"}) {
      const nlohmann::json& want = g[key];
      auto rows = golden_requests(g);
      for (auto& r : rows) {
        r.num_beams = want["num_beams"];
        r.length_penalty = want["length_penalty"];
        r.max_new_tokens = want["max_new_tokens"];
        r.stop_tokens = {want["eos_token_id"].get<int64_t>()};
      }
      const std::string what = g["name"].get<std::string>() + " " + key;
      const auto batch = engine.generate(rows);
      for (size_t b = 0; b < rows.size(); ++b) {
        const auto alone = engine.generate({rows[b]})[0];
        EXPECT_EQ(alone.tokens, want["single"][b].get<std::vector<int64_t>>()) << what << " prompt " << b;
        EXPECT_EQ(alone.finish_reason, want["finish_single"][b].get<std::string>()) << what << " prompt " << b;
        EXPECT_NEAR(alone.score, want["scores"][b].get<double>(), 1e-9) << what << " prompt " << b;
        EXPECT_EQ(batch[b].tokens, want["batch"][b].get<std::vector<int64_t>>()) << what << " batch row " << b;
        EXPECT_EQ(batch[b].finish_reason, want["finish_batch"][b].get<std::string>()) << what << " batch row " << b;
      }
    }
  }
}

}  // namespace

namespace {

using mf::infer::SamplingParams;

// One row's choice at draw `step`.
int64_t choose(const std::vector<double>& logits, const SamplingParams& p, int64_t step = 0,
               const std::vector<int64_t>& seen = {}) {
  const Tensor l = mf::from_vector(logits, {1, static_cast<int64_t>(logits.size())});
  return mf::infer::choose_tokens(l, 0, static_cast<int64_t>(logits.size()), {p}, {seen}, {step}, nullptr)[0];
}

// Frequencies of `draws` seeded draws (draw i: step i).
std::vector<double> frequencies(const std::vector<double>& logits, const SamplingParams& p, int draws) {
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) f[static_cast<size_t>(choose(logits, p, i))] += 1.0 / draws;
  return f;
}

std::vector<double> softmax(std::vector<double> l, double temperature) {
  double mx = *std::max_element(l.begin(), l.end()), z = 0;
  for (double& x : l) z += (x = std::exp((x - mx) / temperature));
  for (double& x : l) x /= z;
  return l;
}

// Within 5 standard deviations of a binomial frequency over n draws.
void expect_frequencies(const std::vector<double>& got, const std::vector<double>& want, int n) {
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 5 * std::sqrt(want[i] * (1 - want[i]) / n) + 1e-12) << "token " << i;
}

TEST(Sampling, GreedyTakesTheLargestLogitAndTheLowestIdOnTies) {
  EXPECT_EQ(choose({0.1, 2.0, -1.0, 2.0}, {}), 1);
  EXPECT_EQ(choose({-3.0, -2.0, -2.5}, {}), 1);
}

TEST(Sampling, DrawsFollowTheSoftmaxAtTheTemperature) {
  const std::vector<double> l = {1.0, 0.2, -0.5, 2.0, 0.0};
  const int n = 20000;
  for (double t : {1.0, 0.5}) {
    SamplingParams p;
    p.do_sample = true;
    p.temperature = t;
    p.seed = 7;
    expect_frequencies(frequencies(l, p, n), softmax(l, t), n);
  }
}

TEST(Sampling, TopKAndTopPKeepHuggingFacesTokens) {
  // Probabilities 0.5, 0.3, 0.1, 0.07, 0.03.
  const std::vector<double> probs = {0.5, 0.3, 0.1, 0.07, 0.03};
  std::vector<double> l;
  for (double q : probs) l.push_back(std::log(q));
  const int n = 20000;
  SamplingParams p;
  p.do_sample = true;
  p.seed = 3;
  p.top_k = 3;  // the three largest, renormalised
  expect_frequencies(frequencies(l, p, n), {0.5 / 0.9, 0.3 / 0.9, 0.1 / 0.9, 0, 0}, n);
  p.top_k = 0;
  p.top_p = 0.6;  // tokens with less than 0.6 of the mass above them: 0 (0) and 1 (0.5)
  expect_frequencies(frequencies(l, p, n), {0.5 / 0.8, 0.3 / 0.8, 0, 0, 0}, n);
  p.top_p = 0.5;  // token 1 has 0.5 above it: only token 0
  expect_frequencies(frequencies(l, p, 200), {1, 0, 0, 0, 0}, 200);
}

TEST(Sampling, TheSameSeedDrawsTheSameTokensAndAnotherSeedOthers) {
  std::vector<double> l(50);
  for (size_t i = 0; i < l.size(); ++i) l[i] = std::sin(static_cast<double>(i));
  SamplingParams a;
  a.do_sample = true;
  a.seed = 11;
  SamplingParams b = a;
  b.seed = 12;
  int differ = 0;
  for (int step = 0; step < 40; ++step) {
    EXPECT_EQ(choose(l, a, step), choose(l, a, step));
    differ += choose(l, a, step) != choose(l, b, step);
  }
  EXPECT_GT(differ, 10);
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfSeenTokens) {
  SamplingParams p;
  p.repetition_penalty = 2.0;
  EXPECT_EQ(choose({2.0, 1.5, -1.0}, p, 0, {0}), 1);      // 2.0 / 2 = 1.0 < 1.5
  EXPECT_EQ(choose({-0.6, -1.0, -0.8}, p, 0, {0}), 2);    // -0.6 * 2 = -1.2
  EXPECT_EQ(choose({2.0, 1.5, -1.0}, p, 0, {0, 0}), 1);   // once per token, however often seen
  EXPECT_EQ(choose({2.0, 1.5, -1.0}, p, 0, {2}), 0);
}

TEST(Sampling, BadParametersAreRefusedNamingTheField) {
  SamplingParams p;
  p.temperature = 0;
  MFT_EXPECT_ERROR(mf::infer::check_sampling(p), "temperature must be finite and > 0");
  p = {};
  p.top_p = 0;
  MFT_EXPECT_ERROR(mf::infer::check_sampling(p), "top_p must be in (0, 1]");
  p = {};
  p.top_k = -1;
  MFT_EXPECT_ERROR(mf::infer::check_sampling(p), "top_k must be >= 0");
  p = {};
  p.repetition_penalty = 0;
  MFT_EXPECT_ERROR(mf::infer::check_sampling(p), "repetition_penalty must be finite and > 0");
}

TEST(Generate, RequestsThatDoNotFitAreRefusedBeforeAnyWork) {
  mf::infer::Engine engine(tiny("gpt2"), nullptr, nullptr);
  mf::infer::GenerationRequest r;
  MFT_EXPECT_ERROR(engine.generate({r}), "prompt 0 is empty");
  r.prompt.assign(30, 1);
  r.max_new_tokens = 11;  // 41 positions > 40
  MFT_EXPECT_ERROR(engine.generate({r}), "over the model's 40");
  r.max_new_tokens = std::numeric_limits<int64_t>::max();  // no int64 overflow in the check
  MFT_EXPECT_ERROR(engine.generate({r}), "that is 9223372036854775837 positions, over the model's 40");
  r.max_new_tokens = 4;
  r.prompt[3] = 97;
  MFT_EXPECT_ERROR(engine.generate({r}), "token id 97 outside the vocabulary");
}

TEST(Generate, StopTokensEndARowAndTheCallbackCanEndIt) {
  mf::infer::Engine engine(tiny("llama"), nullptr, nullptr);
  mf::infer::GenerationRequest r;
  r.prompt = {3, 4, 5};
  r.max_new_tokens = 10;
  const auto free_run = engine.generate({r})[0].tokens;
  ASSERT_EQ(free_run.size(), 10u);
  r.stop_tokens = {free_run[2]};
  const auto stopped = engine.generate({r, r})[1];
  const size_t first = static_cast<size_t>(std::find(free_run.begin(), free_run.end(), free_run[2]) - free_run.begin());
  EXPECT_EQ(stopped.tokens, std::vector<int64_t>(free_run.begin(), free_run.begin() + static_cast<int64_t>(first) + 1));
  EXPECT_EQ(stopped.finish_reason, "stop");
  r.stop_tokens.clear();
  int calls = 0;
  const auto cut = engine.generate({r}, [&](int64_t, int64_t) { return ++calls < 4; })[0];
  EXPECT_EQ(cut.tokens.size(), 4u);
  EXPECT_EQ(cut.finish_reason, "stop");
}

}  // namespace
