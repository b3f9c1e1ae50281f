// Choosing each row's next token from logits split over the vocabulary (tensor parallelism),
// with Hugging Face's logits processors in its order: repetition penalty, temperature, top-k,
// top-p; greedy when do_sample is off.
//
// Every rank of the tensor-parallel group holds the logits of its vocabulary slice [offset,
// offset + V_local) and reaches the same token: greedy is the largest logit (lowest id on ties)
// over a max reduction; sampling is the Gumbel-max draw argmax_i (l_i / temperature + g_i) over
// the kept tokens, g_i drawn from Philox at (seed, step, vocabulary id i) — so a row's tokens
// depend on its seed alone, not on the layout, the batch or the row's place in it. top-k and
// top-p find their thresholds from each rank's candidate list (its k largest; its largest with a
// local probability mass reaching p), gathered over the group.
#pragma once
#include <cstdint>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/tensor/tensor.h"

namespace mf::infer {

struct SamplingParams {
  bool do_sample = false;
  double temperature = 1.0;         // > 0
  int64_t top_k = 0;                // 0: off
  double top_p = 1.0;               // (0, 1]; 1: off
  double repetition_penalty = 1.0;  // > 0; 1: off (CTRL's: logits of seen tokens / p if > 0, * p if < 0)
  uint64_t seed = 0;
};
// Throws naming the field and the value when a parameter is out of range.
void check_sampling(const SamplingParams& p);

// logits (B, V_local) of vocabulary ids [offset, offset + V_local) of `vocab` on this rank (f32 or
// f64, host); seen[b]: the tokens row b has read and produced (repetition penalty); step: the
// row's index of the token drawn (0 for the first new token). Returns the chosen ids (B), the
// same on every rank of `tp` (null: the whole vocabulary is here).
std::vector<int64_t> choose_tokens(const Tensor& logits, int64_t offset, int64_t vocab,
                                   const std::vector<SamplingParams>& params,
                                   const std::vector<std::vector<int64_t>>& seen, const std::vector<int64_t>& step,
                                   comm::Communicator* tp);

// Beam search's candidates (Hugging Face's): for each group of `beams` rows of logits (B * beams,
// V_local), the `keep` best of log_softmax(row) + beam_scores[row] over the group's beams and the
// whole vocabulary, best first (ties: the lower beam, then the lower id), the same on every rank
// of `tp` (each rank's `keep` best gathered; the softmax's max and sum reduced over the group).
struct BeamCandidate {
  double score;   // the sequence's summed log-probability with this token
  int64_t beam;   // 0 .. beams-1 within its group
  int64_t token;  // vocabulary id
};
std::vector<std::vector<BeamCandidate>> beam_candidates(const Tensor& logits, int64_t offset, int64_t vocab, int64_t beams,
                                                        const std::vector<double>& beam_scores, int64_t keep,
                                                        comm::Communicator* tp);

}  // namespace mf::infer
