// Beam search, as Hugging Face's generate does it with num_beams > 1 and do_sample off
// (BeamSearchScorer, early_stopping false): each row keeps num_beams running sequences; every step
// takes the best max(2, 1 + eos tokens) * num_beams continuations of all its beams (summed
// log-probabilities), a continuation ending in an eos token (among the first num_beams) becomes a
// finished hypothesis scored sum / generated_len^length_penalty, the others the next beams; a row
// is done when num_beams hypotheses are kept and no running beam can beat the worst of them; at
// max_new_tokens the running beams join the hypotheses and the best one is the answer.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "meshflow/infer/engine.h"
#include "meshflow/infer/stages.h"
#include "meshflow/ops/ops.h"

namespace mf::infer {

namespace {

struct Hypothesis {
  double score;
  std::vector<int64_t> tokens;  // the generated tokens, the eos that ended it included
  bool eos;
};

// A row's finished hypotheses (Hugging Face's BeamHypotheses).
struct Hypotheses {
  std::vector<Hypothesis> beams;
  double worst = 1e9;
  bool done = false;

  void add(std::vector<int64_t> tokens, double sum_logprobs, int64_t generated_len, double length_penalty, size_t num_beams,
           bool eos) {
    const double score = sum_logprobs / std::pow(static_cast<double>(generated_len), length_penalty);
    if (beams.size() >= num_beams && score <= worst) return;
    beams.push_back({score, std::move(tokens), eos});
    if (beams.size() > num_beams) {
      // Drop the lowest score (the first such on ties); the worst is then the second lowest.
      std::vector<size_t> order(beams.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return beams[a].score < beams[b].score; });
      worst = beams[order[1]].score;
      beams.erase(beams.begin() + static_cast<int64_t>(order[0]));
    } else {
      worst = std::min(score, worst);
    }
  }
  bool finished(double best_sum_logprobs, int64_t generated_len, double length_penalty, size_t num_beams) const {
    if (beams.size() < num_beams) return false;
    return worst >= best_sum_logprobs / std::pow(static_cast<double>(generated_len), length_penalty);
  }
  // The highest score (the last added on ties).
  const Hypothesis& best() const {
    size_t k = 0;
    for (size_t i = 1; i < beams.size(); ++i)
      if (beams[i].score >= beams[k].score) k = i;
    return beams[k];
  }
};

}  // namespace

std::vector<GenerationResult> Engine::beam_search(const std::vector<GenerationRequest>& requests, const TokenCallback& on_token) {
  const GenerationRequest& first = requests.at(0);
  const int64_t G = static_cast<int64_t>(requests.size()), nb = first.num_beams, max_new = first.max_new_tokens;
  const double lp = first.length_penalty;
  for (int64_t g = 0; g < G; ++g) {
    const GenerationRequest& r = requests[static_cast<size_t>(g)];
    MF_CHECK(std::isfinite(r.length_penalty), "generate: length_penalty must be finite, got ", r.length_penalty);
    MF_CHECK(r.num_beams >= 1 && r.num_beams == nb && r.max_new_tokens == max_new && r.length_penalty == lp &&
                 r.stop_tokens == first.stop_tokens,
             "generate: beam search needs the same num_beams, max_new_tokens, length_penalty and stop tokens for every "
             "prompt of a call (prompt ", g, " has num_beams ", r.num_beams, ", max_new_tokens ", r.max_new_tokens, ")");
    MF_CHECK(!r.sampling.do_sample && r.sampling.repetition_penalty == 1.0,
             "generate: beam search is deterministic: prompt ", g, " asks for sampling or a repetition penalty");
  }
  // Each prompt repeated for its beams: row g * nb + j is beam j of prompt g.
  std::vector<GenerationRequest> rows;
  for (const GenerationRequest& r : requests)
    for (int64_t j = 0; j < nb; ++j) {
      rows.push_back(r);
      rows.back().num_beams = 1;
    }
  Tensor ids, mask;
  models::DecodeState d = prepare(rows, ids, mask);
  const int64_t R = G * nb, prompt_len = ids.shape(1), vocab = model_->vocab_size();
  const std::vector<int64_t>& eos = first.stop_tokens;
  const int64_t keep = std::max<int64_t>(2, 1 + static_cast<int64_t>(eos.size())) * nb;
  std::vector<double> beam_scores(static_cast<size_t>(R), 0.0);
  for (int64_t r = 0; r < R; ++r)
    if (r % nb != 0) beam_scores[static_cast<size_t>(r)] = -1e9;  // the beams of a row start as one
  std::vector<std::vector<int64_t>> seqs(static_cast<size_t>(R));
  std::vector<Hypotheses> hyps(static_cast<size_t>(G));
  comm::Communicator* tp = model_->place().comm(layers::Place::kWeights);
  timing_ = Timing{};
  timing_.rows = R;
  timing_.prefill_positions = R * prompt_len;
  auto clock = std::chrono::steady_clock::now();
  Tensor step_ids = ids;
  for (int64_t step = 0;; ++step) {
    const int64_t T = step_ids.shape(1);
    int64_t offset = 0;
    const Tensor logits = forward(step_ids, contiguous(narrow(mask, 1, 0, d.past + T)), &d, false, &offset, true);
    // The step's decision, made on the last stage: each row's next token and source row, and
    // whether the search ends.
    Tensor decision = zeros({2 * R + 1}, DType::kI64);
    int64_t* dec = decision.data<int64_t>();
    if (last_stage(pipeline_)) {
      const auto cands = beam_candidates(reshape(logits, {R, logits.shape(2)}), offset, vocab, nb, beam_scores, keep, tp);
      const int64_t cur_len = prompt_len + step + 1;
      std::vector<double> next_scores(static_cast<size_t>(R), 0.0);
      bool all_done = true;
      for (int64_t g = 0; g < G; ++g) {
        Hypotheses& h = hyps[static_cast<size_t>(g)];
        for (int64_t j = 0; j < nb; ++j) dec[R + g * nb + j] = g * nb;  // a done row's beams: anything
        if (h.done) continue;
        int64_t beam = 0;
        const auto& c = cands[static_cast<size_t>(g)];
        for (size_t rank = 0; rank < c.size() && beam < nb; ++rank) {
          const int64_t src = g * nb + c[rank].beam;
          if (std::find(eos.begin(), eos.end(), c[rank].token) != eos.end()) {
            if (static_cast<int64_t>(rank) >= nb) continue;
            std::vector<int64_t> t = seqs[static_cast<size_t>(src)];
            t.push_back(c[rank].token);
            h.add(std::move(t), c[rank].score, cur_len - prompt_len, lp, static_cast<size_t>(nb), true);
          } else {
            next_scores[static_cast<size_t>(g * nb + beam)] = c[rank].score;
            dec[g * nb + beam] = c[rank].token;
            dec[R + g * nb + beam] = src;
            ++beam;
          }
        }
        h.done = h.done || h.finished(c.front().score, cur_len - prompt_len, lp, static_cast<size_t>(nb));
        all_done = all_done && h.done;
      }
      beam_scores = next_scores;
      dec[2 * R] = all_done || step + 1 >= max_new;
    }
    from_last_stage(pipeline_, decision);
    // Every rank: the sequences and the caches follow their source rows.
    std::vector<std::vector<int64_t>> next(static_cast<size_t>(R));
    std::vector<int64_t> src(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) {
      src[static_cast<size_t>(r)] = dec[R + r];
      next[static_cast<size_t>(r)] = seqs[static_cast<size_t>(dec[R + r])];
      next[static_cast<size_t>(r)].push_back(dec[r]);
    }
    seqs = std::move(next);
    const auto now = std::chrono::steady_clock::now();
    (step == 0 ? timing_.prefill_seconds : timing_.decode_seconds) += std::chrono::duration<double>(now - clock).count();
    timing_.decode_steps += step > 0;
    if (dec[2 * R]) break;
    const Tensor index = from_vector(src, {R});
    for (layers::KvCache& c : state_->caches)
      if (c.k.defined()) {
        c.k = index_select(c.k, 0, index);
        c.v = index_select(c.v, 0, index);
      }
    d.past += T;
    step_ids = from_vector(std::vector<int64_t>(dec, dec + R), {R, 1});
    clock = std::chrono::steady_clock::now();
  }
  // The last stage's answers (the running beams of rows not done join their hypotheses), then
  // every stage's: (finish, length, tokens...) per prompt and the scores.
  Tensor answer = zeros({G, max_new + 2}, DType::kI64);
  Tensor scores = zeros({G}, DType::kF64);
  if (last_stage(pipeline_)) {
    for (int64_t g = 0; g < G; ++g) {
      Hypotheses& h = hyps[static_cast<size_t>(g)];
      if (!h.done)
        for (int64_t j = 0; j < nb; ++j) {
          const auto& s = seqs[static_cast<size_t>(g * nb + j)];
          h.add(s, beam_scores[static_cast<size_t>(g * nb + j)], static_cast<int64_t>(s.size()), lp, static_cast<size_t>(nb), false);
        }
      const Hypothesis& best = h.best();
      int64_t* a = answer.data<int64_t>() + g * (max_new + 2);
      a[0] = best.eos;
      a[1] = static_cast<int64_t>(best.tokens.size());
      std::copy(best.tokens.begin(), best.tokens.end(), a + 2);
      scores.data<double>()[g] = best.score;
    }
  }
  from_last_stage(pipeline_, answer);
  from_last_stage(pipeline_, scores);
  state_->caches.clear();
  std::vector<GenerationResult> out(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) {
    const int64_t* a = answer.data<int64_t>() + g * (max_new + 2);
    GenerationResult& res = out[static_cast<size_t>(g)];
    res.tokens.assign(a + 2, a + 2 + a[1]);
    res.finish_reason = a[0] ? "stop" : "length";
    res.score = scores.data<double>()[g];
    if (on_token)
      for (int64_t t : res.tokens) on_token(g, t);
  }
  return out;
}

}  // namespace mf::infer
