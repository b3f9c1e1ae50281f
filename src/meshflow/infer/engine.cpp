#include "meshflow/infer/engine.h"

#include <algorithm>
#include <chrono>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/infer/stages.h"
#include "meshflow/layers/kv_cache.h"
#include "meshflow/ops/ops.h"

namespace mf::infer {

Engine::Engine(std::shared_ptr<models::Model> model, comm::CommPtr pipeline, comm::CommPtr group)
    : model_(std::move(model)), pipeline_(std::move(pipeline)), group_(std::move(group)), state_(std::make_unique<State>()) {
  MF_CHECK(model_, "generate: no model");
  MF_CHECK(model_->generates(), "generate: ", model_->describe(), " does not generate text (a causal language model does)");
  MF_CHECK(model_->stage().later_chunks.empty(), "generate: interleaved pipeline stages are not supported for decoding "
           "(set train.dist.virtual_pipeline_size=1)");
  const int64_t pp = pipeline_ ? pipeline_->size() : 1;
  MF_CHECK(model_->stage().first == first_stage(pipeline_) && model_->stage().last == last_stage(pipeline_),
           "generate: the model's pipeline stage does not match its place in the pipeline group of ", pp, " stages");
  model_->eval();
  const auto params = model_->named_parameters();
  if (!params.empty()) state_->device = params.front().second.device();
}

Engine::~Engine() = default;

int64_t Engine::max_sequence_length() const { return model_->max_sequence_length(); }

Tensor Engine::forward(const Tensor& ids, const Tensor& mask, const models::DecodeState* d, bool whole, int64_t* offset,
                       bool last_only) {
  const models::Model& m = *model_;
  const comm::CommPtr& pp = pipeline_;
  int& tag = state_->tag;
  const int64_t B = ids.shape(0), T = ids.shape(1);
  models::Batch batch;
  batch.input_ids = ids;
  batch.attention_mask = mask;
  batch.decode = d;
  Tensor input;
  if (!first_stage(pp)) {
    input = empty(m.activation_shape(B, T), m.activation_dtype(state_->device), state_->device);
    pp->recv(input, pp->rank() - 1, tag)->wait();
  }
  const Tensor out = m.stage_forward(batch, input, 0, T);
  ++tag;
  if (!last_stage(pp)) {
    pp->send(contiguous(out), pp->rank() + 1, tag - 1)->wait();
    return Tensor();
  }
  return m.head_logits(last_only ? contiguous(narrow(out, 1, T - 1, 1)) : out, whole, offset);
}

models::DecodeState Engine::prepare(const std::vector<GenerationRequest>& requests, Tensor& ids, Tensor& mask) {
  const int64_t B = static_cast<int64_t>(requests.size()), vocab = model_->vocab_size(), limit = max_sequence_length();
  MF_CHECK(B > 0, "generate: no prompts");
  int64_t longest = 0, most_new = 0;
  for (int64_t b = 0; b < B; ++b) {
    const GenerationRequest& r = requests[static_cast<size_t>(b)];
    const int64_t n = static_cast<int64_t>(r.prompt.size());
    MF_CHECK(n > 0, "generate: prompt ", b, " is empty");
    MF_CHECK(r.max_new_tokens >= 1, "generate: prompt ", b, ": max_new_tokens must be >= 1, got ", r.max_new_tokens);
    // No sum in int64: max_new_tokens may come from a client up to INT64_MAX.
    MF_CHECK(r.max_new_tokens <= limit - n, "generate: prompt ", b, " has ", n, " tokens; with max_new_tokens ",
             r.max_new_tokens, " that is ", static_cast<uint64_t>(n) + static_cast<uint64_t>(r.max_new_tokens),
             " positions, over the model's ", limit, " (model.max_seq_length)");
    for (int64_t id : r.prompt)
      MF_CHECK(id >= 0 && id < vocab, "generate: prompt ", b, " has token id ", id, " outside the vocabulary [0, ", vocab, ")");
    try {
      check_sampling(r.sampling);
    } catch (const Error& e) {
      throw Error("generate: prompt " + std::to_string(b) + ": " + e.what());
    }
    longest = std::max(longest, n);
    most_new = std::max(most_new, r.max_new_tokens);
  }
  // The left-padded batch: row b's prompt at the end of `longest` slots, padding (id 0) masked.
  ids = zeros({B, longest}, DType::kI64);
  mask = zeros({B, longest + most_new}, DType::kI64);  // every slot the batch will fill
  models::DecodeState d;
  d.capacity = longest + most_new - 1;
  d.caches = &state_->caches;
  d.row_start.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const GenerationRequest& r = requests[static_cast<size_t>(b)];
    const int64_t n = static_cast<int64_t>(r.prompt.size()), pad = longest - n;
    for (int64_t t = 0; t < n; ++t) ids.data<int64_t>()[b * longest + pad + t] = r.prompt[static_cast<size_t>(t)];
    for (int64_t t = pad; t < longest + most_new; ++t) mask.data<int64_t>()[b * (longest + most_new) + t] = 1;
    d.row_start[static_cast<size_t>(b)] = -pad;
  }
  state_->caches.clear();  // preallocated by each layer on its first append, for d.capacity positions
  state_->caches.resize(static_cast<size_t>(model_->num_layers()));
  return d;
}

std::vector<GenerationResult> Engine::generate(const std::vector<GenerationRequest>& requests, const TokenCallback& on_token) {
  NoGradGuard ng;
  if (!requests.empty() && std::any_of(requests.begin(), requests.end(), [](const GenerationRequest& r) { return r.num_beams != 1; }))
    return beam_search(requests, on_token);
  Tensor ids, mask;
  models::DecodeState d = prepare(requests, ids, mask);
  const int64_t B = ids.shape(0), vocab = model_->vocab_size();
  std::vector<std::vector<int64_t>> seen(static_cast<size_t>(B));
  std::vector<SamplingParams> params(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    seen[static_cast<size_t>(b)] = requests[static_cast<size_t>(b)].prompt;
    params[static_cast<size_t>(b)] = requests[static_cast<size_t>(b)].sampling;
  }
  std::vector<GenerationResult> results(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);
  comm::Communicator* tp = model_->place().comm(layers::Place::kWeights);
  Tensor step_ids = ids;
  timing_ = Timing{};
  timing_.rows = B;
  timing_.prefill_positions = B * ids.shape(1);
  auto clock = std::chrono::steady_clock::now();
  for (int64_t step = 0;; ++step) {
    const int64_t T = step_ids.shape(1);
    const Tensor step_mask = narrow(mask, 1, 0, d.past + T);
    int64_t offset = 0;
    const Tensor logits = forward(step_ids, contiguous(step_mask), &d, false, &offset, true);
    Tensor tokens = zeros({B}, DType::kI64);
    if (last_stage(pipeline_)) {
      const Tensor last = reshape(logits, {B, logits.shape(2)});  // (B, V here) of the last position
      std::vector<int64_t> steps(static_cast<size_t>(B), step);
      const std::vector<int64_t> chosen = choose_tokens(last, offset, vocab, params, seen, steps, tp);
      std::copy(chosen.begin(), chosen.end(), tokens.data<int64_t>());
    }
    from_last_stage(pipeline_, tokens);
    const auto now = std::chrono::steady_clock::now();
    (step == 0 ? timing_.prefill_seconds : timing_.decode_seconds) += std::chrono::duration<double>(now - clock).count();
    timing_.decode_steps += step > 0;
    // Each unfinished row takes its token; the callback (rank 0's word) may end it.
    Tensor keep = ones({B}, DType::kI64);
    for (int64_t b = 0; b < B; ++b) {
      if (done[static_cast<size_t>(b)]) continue;
      const int64_t tok = tokens.data<int64_t>()[b];
      GenerationResult& res = results[static_cast<size_t>(b)];
      res.tokens.push_back(tok);
      seen[static_cast<size_t>(b)].push_back(tok);
      if (on_token && !on_token(b, tok)) keep.data<int64_t>()[b] = 0;
    }
    if (group_ && group_->size() > 1) group_->broadcast(keep, 0)->wait();
    bool all_done = true;
    for (int64_t b = 0; b < B; ++b) {
      if (done[static_cast<size_t>(b)]) continue;
      const GenerationRequest& r = requests[static_cast<size_t>(b)];
      GenerationResult& res = results[static_cast<size_t>(b)];
      const int64_t tok = res.tokens.back();
      if (keep.data<int64_t>()[b] == 0 || std::find(r.stop_tokens.begin(), r.stop_tokens.end(), tok) != r.stop_tokens.end()) {
        res.finish_reason = "stop";
      } else if (static_cast<int64_t>(res.tokens.size()) >= r.max_new_tokens) {
        res.finish_reason = "length";
      } else {
        all_done = false;
        continue;
      }
      done[static_cast<size_t>(b)] = true;
    }
    if (all_done) break;
    d.past += T;
    step_ids = reshape(tokens, {B, 1});
    clock = std::chrono::steady_clock::now();
  }
  state_->caches.clear();  // the memory back between calls
  return results;
}

Tensor Engine::cached_logits(const Tensor& ids_any, int64_t prefill) {
  NoGradGuard ng;
  const Tensor ids = contiguous(cast(ids_any, DType::kI64));
  MF_CHECK(ids.ndim() == 2 && prefill >= 1 && prefill <= ids.shape(1), "cached_logits: ids ", ids.str(),
           " must be (B, T) with 1 <= prefill (", prefill, ") <= T");
  const int64_t B = ids.shape(0), T = ids.shape(1), V = model_->vocab_size();
  models::DecodeState d;
  d.capacity = T;
  d.caches = &state_->caches;
  d.row_start.assign(static_cast<size_t>(B), 0);
  state_->caches.clear();
  state_->caches.resize(static_cast<size_t>(model_->num_layers()));
  Tensor out = zeros({B, T, V}, DType::kF64);
  for (int64_t t0 = 0; t0 < T;) {
    const int64_t n = t0 == 0 ? prefill : 1;
    const Tensor piece = contiguous(narrow(ids, 1, t0, n));
    Tensor logits = forward(piece, Tensor(), &d, true, nullptr, false);
    Tensor got = last_stage(pipeline_) ? contiguous(cast(to(logits, cpu_device()), DType::kF64)) : zeros({B, n, V}, DType::kF64);
    from_last_stage(pipeline_, got);
    Tensor dst = narrow(out, 1, t0, n);
    copy_(dst, got);
    d.past += n;
    t0 += n;
  }
  state_->caches.clear();
  return out;
}

Tensor Engine::full_logits(const Tensor& ids_any) {
  NoGradGuard ng;
  const Tensor ids = contiguous(cast(ids_any, DType::kI64));
  MF_CHECK(ids.ndim() == 2, "full_logits: ids ", ids.str(), " must be (B, T)");
  const int64_t B = ids.shape(0), T = ids.shape(1);
  Tensor logits = forward(ids, Tensor(), nullptr, true, nullptr, false);
  Tensor got = last_stage(pipeline_) ? contiguous(cast(to(logits, cpu_device()), DType::kF64))
                                     : zeros({B, T, model_->vocab_size()}, DType::kF64);
  from_last_stage(pipeline_, got);
  return got;
}

}  // namespace mf::infer
