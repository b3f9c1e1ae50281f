// The decoding engine: text generation with a key/value cache for every causal language model of
// the zoo (GPT-2, the Llama family), on one process or split over tensor- and pipeline-parallel
// ranks, as the model's layers are split for training.
//
// A call generates for a batch of prompts of any lengths: they are left-padded into one (B, T)
// batch (padding hidden by the attention mask, positions counted from each row's first real token,
// as Hugging Face's generate does), the prompt runs once through the model (prefill) filling each
// layer's preallocated cache, then one token per row per step (decode). Each pipeline stage holds
// the caches of its layers; tensor parallelism splits them by heads (a key/value head shared by
// several query heads is cached once). The logits stay split over the vocabulary under tensor
// parallelism: the choice of each row's token is made from max/sum reductions and candidate lists
// over the tensor-parallel ranks, so every rank agrees on it (sampling.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/infer/sampling.h"
#include "meshflow/models/model.h"

namespace mf::infer {

// One row of a batch: a prompt and how to continue it (Hugging Face's GenerationConfig names).
struct GenerationRequest {
  std::vector<int64_t> prompt;        // token ids, at least one
  int64_t max_new_tokens = 16;        // >= 1; prompt + new tokens must fit model.max_seq_length
  SamplingParams sampling;            // greedy by default
  std::vector<int64_t> stop_tokens;   // eos_token_id(s): the row ends after producing one of them
  // Beam search (Hugging Face's, do_sample off, early_stopping false) when > 1: every row of the
  // call must then have the same num_beams and max_new_tokens; the tokens reach the callback once
  // the search ends. A hypothesis scores its summed log-probability / generated_len^length_penalty.
  int64_t num_beams = 1;
  double length_penalty = 1.0;
};

struct GenerationResult {
  std::vector<int64_t> tokens;  // the new tokens (a stop token included when it ended the row)
  std::string finish_reason;    // "stop" (a stop token, or the callback), "length" (max_new_tokens)
  double score = 0;             // beam search: the chosen hypothesis' score
};

// Called after every step with each unfinished row's new token, in row order, on every rank of
// the engine with the same arguments. Returning false ends the row (a stop string, a client that
// went away); the engine takes the decision of the engine group's rank 0, so every rank stops the
// same rows.
using TokenCallback = std::function<bool(int64_t row, int64_t token)>;

class Engine {
 public:
  // model: built for this rank's pipeline stage and tensor-parallel group (models/registry.h),
  // weights loaded; whole stages only (no interleaved chunks). pipeline: the pipeline-stage group
  // ordered by stage (null: one stage). group: every rank taking part (the pipeline stages x the
  // tensor-parallel ranks; null: this process alone) — they all call generate() with the same
  // requests.
  Engine(std::shared_ptr<models::Model> model, comm::CommPtr pipeline, comm::CommPtr group);
  ~Engine();

  // Generates for every request; collective over the engine group. Throws before any work for an
  // empty prompt, a prompt that leaves no room for max_new_tokens in model.max_seq_length, or bad
  // sampling parameters (naming the row and the value).
  std::vector<GenerationResult> generate(const std::vector<GenerationRequest>& requests,
                                         const TokenCallback& on_token = {});

  // The logits (B, T, V) of `ids` (B, T) computed in pieces through the cache (the first `prefill`
  // positions at once, then one position per call), gathered whole on every rank (tests: cached
  // logits against the logits recomputed without a cache).
  Tensor cached_logits(const Tensor& ids, int64_t prefill);
  // The same logits computed in one forward without a cache.
  Tensor full_logits(const Tensor& ids);

  // What the last generate() call took (this rank's clock): the prompt's forward (prefill: rows x
  // longest prompt positions, padding included) and the single-token steps after it.
  struct Timing {
    double prefill_seconds = 0, decode_seconds = 0;
    int64_t prefill_positions = 0, decode_steps = 0, rows = 0;
  };
  const Timing& last_timing() const { return timing_; }

  // The longest prompt + new tokens the model accepts (model.max_seq_length).
  int64_t max_sequence_length() const;
  const models::Model& model() const { return *model_; }

 private:
  struct State;
  // One forward of this stage over the new positions `ids` (B, T) (every rank holds them; the
  // first stage embeds them) with `mask` (B, keys) and the decode state (null: no cache). Returns
  // the last stage's logits (B, T, V), or (B, 1, V) of the last position when `last_only` (whole,
  // or this rank's vocabulary piece whose first id is *offset); undefined on other stages.
  Tensor forward(const Tensor& ids, const Tensor& mask, const models::DecodeState* d, bool whole, int64_t* offset,
                 bool last_only);
  // The left-padded batch of `requests` (ids (B, longest), mask (B, longest + most_new)) and its
  // decode state over fresh caches; checks every request first.
  models::DecodeState prepare(const std::vector<GenerationRequest>& requests, Tensor& ids, Tensor& mask);
  std::vector<GenerationResult> beam_search(const std::vector<GenerationRequest>& requests, const TokenCallback& on_token);
  std::shared_ptr<models::Model> model_;
  comm::CommPtr pipeline_, group_;
  std::unique_ptr<State> state_;
  Timing timing_;
};

}  // namespace mf::infer
