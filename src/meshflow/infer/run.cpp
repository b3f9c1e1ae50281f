#include "meshflow/infer/run.h"

#include <cmath>
#include <fstream>

#include "meshflow/infer/load.h"
#include "meshflow/infer/text_stream.h"

namespace mf::infer {

namespace {

std::vector<std::string> read_prompts(const GenerateArgs& a) {
  std::vector<std::string> p = a.prompts;
  if (!a.prompt_file.empty()) {
    std::ifstream f(a.prompt_file);
    MF_CHECK(f.good(), "generate: cannot read --prompt-file ", a.prompt_file);
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) p.push_back(line);
  }
  MF_CHECK(!p.empty(), "generate: no prompt (give --prompt TEXT or --prompt-file FILE)");
  return p;
}

}  // namespace

void run_generation(const Config& c, const GenerateArgs& a, std::FILE* out, const comm::CommPtr& world) {
  const std::vector<std::string> prompts = read_prompts(a);
  // The flags' own checks before the weights load (the engine makes them again per request).
  check_sampling(a.sampling);
  MF_CHECK(std::isfinite(a.length_penalty), "generate: --length-penalty must be finite, got ", a.length_penalty);
  LoadedModel m = load_for_inference(c, world);
  const Tokenizer& tok = *m.tokenizer;
  const std::vector<int64_t> stops = a.ignore_eos ? std::vector<int64_t>{} : std::vector<int64_t>{tok.eod_id()};
  std::vector<GenerationRequest> rows;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest r;
    for (int32_t id : tok.encode(prompts[i])) r.prompt.push_back(id);
    MF_CHECK(!r.prompt.empty(), "generate: prompt ", i, " encodes to no tokens");
    r.max_new_tokens = a.max_new_tokens;
    r.sampling = a.sampling;
    r.sampling.seed = a.sampling.seed + i;  // row i draws from seed + i (the rows of a batch differ)
    r.num_beams = a.num_beams;
    r.length_penalty = a.length_penalty;
    r.stop_tokens = stops;
    rows.push_back(std::move(r));
  }
  if (m.main_rank) std::fprintf(stderr, "generate: %s\n", m.description.c_str());
  const bool stream = rows.size() == 1 && m.main_rank;
  TextStream text(tok, {}, stops);  // a stop token's text is not printed
  if (stream) {
    std::fprintf(out, "%s", prompts[0].c_str());
    std::fflush(out);
  }
  auto on_token = [&](int64_t, int64_t token) {
    if (stream && !text.stopped()) {
      std::fputs(text.push(token).c_str(), out);
      std::fflush(out);
    }
    return true;
  };
  const std::vector<GenerationResult> res = m.engine->generate(rows, on_token);
  if (!m.main_rank) return;
  if (stream) std::fprintf(out, "%s\n", text.finish().c_str());
  int64_t produced = 0;
  for (size_t i = 0; i < res.size(); ++i) {
    produced += static_cast<int64_t>(res[i].tokens.size());
    if (!stream) {
      std::span<const int64_t> ids(res[i].tokens);
      if (!a.ignore_eos && !ids.empty() && ids.back() == tok.eod_id()) ids = ids.first(ids.size() - 1);
      std::fprintf(out, "=== %zu (%s)\n%s%s\n", i, res[i].finish_reason.c_str(), prompts[i].c_str(),
                   decode_known(tok, ids).c_str());
    }
    if (a.print_ids) {
      std::fprintf(out, "ids %zu:", i);
      for (int64_t t : res[i].tokens) std::fprintf(out, " %lld", static_cast<long long>(t));
      std::fprintf(out, " (%s)\n", res[i].finish_reason.c_str());
    }
  }
  std::fflush(out);  // the text before the figures, whatever buffers stdout (a pipe)
  const Engine::Timing& t = m.engine->last_timing();
  std::fprintf(stderr, "generate: %zu prompt(s), %lld new tokens; prefill %lld positions in %.3f s (%.1f tokens/s), "
                       "decode %lld steps of %lld rows in %.3f s (%.1f tokens/s)\n",
               rows.size(), static_cast<long long>(produced), static_cast<long long>(t.prefill_positions), t.prefill_seconds,
               t.prefill_seconds > 0 ? static_cast<double>(t.prefill_positions) / t.prefill_seconds : 0.0,
               static_cast<long long>(t.decode_steps), static_cast<long long>(t.rows), t.decode_seconds,
               t.decode_seconds > 0 ? static_cast<double>(t.decode_steps * t.rows) / t.decode_seconds : 0.0);
}

}  // namespace mf::infer
