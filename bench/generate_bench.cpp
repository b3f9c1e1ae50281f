// meshflow's side of the text-generation benchmark (bench/generate_bench.sh runs it beside
// bench/generate_torch.py in one run), llama-bench's figures: pp512 — one prefill of 512 prompt
// tokens per row, tokens/s = B * 512 / seconds; tg128 — 128 single-token decode steps through the
// key/value cache after an 8-token prompt, greedy, tokens/s = B * 128 / seconds. Each the best of
// --reps after a warm-up, f32, the engine's own clocks (Engine::last_timing: the prefill's forward
// and token choice; the decode steps). One JSON line per (test, batch) on stdout:
//   {"impl":"meshflow","model":"gpt2","test":"pp512","batch":1,"tokens_per_s":..,"seconds":..,"threads":2}
// Sizes as the PyTorch side: --model gpt2 is GPT-2 small (124M), --model llama a 125M Llama (12
// layers, 768 hidden, 12 heads over 4 key/value heads, SwiGLU 2048, 32000 tokens); random weights.
// Usage: meshflow_generate_bench [--model gpt2|llama] [--threads N] [--batch 1 8] [--pp 512]
//        [--tg 128] [--prompt 8] [--reps 3] [--quick (pp64, tg16, 2 repetitions)]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/infer/engine.h"
#include "meshflow/models/registry.h"

namespace {

struct Args {
  std::string model = "gpt2";
  int threads = 0;
  std::vector<int64_t> batches = {1, 8};
  int64_t pp = 512, tg = 128, prompt = 8, reps = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "generate_bench: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--model") a.model = next();
    else if (k == "--threads") a.threads = std::stoi(next());
    else if (k == "--pp") a.pp = std::stoll(next());
    else if (k == "--tg") a.tg = std::stoll(next());
    else if (k == "--prompt") a.prompt = std::stoll(next());
    else if (k == "--reps") a.reps = std::stoll(next());
    else if (k == "--quick") a.pp = 64, a.tg = 16, a.reps = 2;
    else if (k == "--batch") {
      a.batches.clear();
      while (i + 1 < argc && argv[i + 1][0] != '-') a.batches.push_back(std::stoll(argv[++i]));
    } else {
      std::fprintf(stderr, "generate_bench: unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

std::shared_ptr<mf::models::Model> build(const std::string& name) {
  const bool llama = name == "llama";
  const std::string yaml =
      llama ? "model: {name: llama, num_layers: 12, hidden_size: 768, num_attention_heads: 12, num_key_value_heads: 4, "
              "ffn_hidden_size: 2048, vocab_size: 32000, max_seq_length: 2048, embedding_dropout_prob: 0.0, "
              "output_dropout_prob: 0.0, attention_dropout_prob: 0.0}"
            : "model: {name: gpt2, num_layers: 12, hidden_size: 768, num_attention_heads: 12, ffn_hidden_size: 3072, "
              "vocab_size: 50257, max_seq_length: 1024, embedding_dropout_prob: 0.0, output_dropout_prob: 0.0, "
              "attention_dropout_prob: 0.0}";
  return mf::models::build_model(mf::Config::from_yaml(yaml), llama ? 32000 : 50257);
}

std::vector<mf::infer::GenerationRequest> rows(int64_t B, int64_t prompt, int64_t new_tokens, int64_t vocab) {
  std::vector<mf::infer::GenerationRequest> r(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < prompt; ++t) r[static_cast<size_t>(b)].prompt.push_back((b * 7919 + t * 104729 + 13) % vocab);
    r[static_cast<size_t>(b)].max_new_tokens = new_tokens;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const int threads = omp_get_max_threads();
  auto model = build(a.model);
  mf::infer::Engine engine(model, nullptr, nullptr);
  const int64_t vocab = model->vocab_size();
  std::fprintf(stderr, "generate_bench: %s, %d threads\n", model->describe().c_str(), threads);
  for (const char* test : {"pp", "tg"}) {
    const bool pp = std::string(test) == "pp";
    for (int64_t B : a.batches) {
      // pp: a prefill and one token; tg: the prompt, its token, then tg decode steps.
      const auto req = pp ? rows(B, a.pp, 1, vocab) : rows(B, a.prompt, a.tg + 1, vocab);
      double best = 1e300;
      for (int64_t rep = 0; rep <= a.reps; ++rep) {  // rep 0: the warm-up
        engine.generate(req);
        const auto& t = engine.last_timing();
        const double s = pp ? t.prefill_seconds : t.decode_seconds;
        if (rep > 0) best = std::min(best, s);
      }
      const int64_t n = pp ? a.pp : a.tg;
      std::printf("{\"impl\": \"meshflow\", \"model\": \"%s\", \"test\": \"%s%lld\", \"batch\": %lld, \"tokens_per_s\": %.2f, "
                  "\"seconds\": %.4f, \"threads\": %d}\n",
                  a.model.c_str(), test, static_cast<long long>(n), static_cast<long long>(B),
                  static_cast<double>(B * n) / best, best, threads);
      std::fflush(stdout);
    }
  }
  return 0;
}
