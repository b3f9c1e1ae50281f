// The valid range of every numeric key of the schema (a list's range holds for each element).
// A value outside it is refused wherever it comes from — the defaults, a file, an override — with
// the key, the value, the range and the source; tests/config_test.cpp checks that every numeric
// key of the defaults document has an entry here.
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

namespace mf::config_detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// [lo, hi] with open ends where marked; "0 = derived" keys start at 0.
Range closed(double lo, double hi) { return {lo, hi, false, false}; }
Range at_least(double lo) { return {lo, kInf, false, true}; }
Range above(double lo) { return {lo, kInf, true, true}; }
Range below_one(double lo) { return {lo, 1.0, false, true}; }  // [lo, 1)
Range above_to(double lo, double hi) { return {lo, hi, true, false}; }  // (lo, hi]
Range any_number() { return {-kInf, kInf, true, true}; }
// Whole numbers from lo that an int64 holds (the list elements the run reads as integers).
Range integers_from(double lo) { return {lo, 9223372036854775808.0, false, true, true}; }

const std::map<std::string, Range>& ranges() {
  static const std::map<std::string, Range> r = {
      {"model.num_layers", at_least(1)},
      {"model.hidden_size", at_least(1)},
      {"model.num_attention_heads", at_least(1)},
      {"model.ffn_hidden_size", at_least(0)},
      {"model.max_seq_length", at_least(1)},
      {"model.vocab_size", at_least(1)},
      {"model.embedding_dropout_prob", below_one(0)},
      {"model.attention_dropout_prob", below_one(0)},
      {"model.output_dropout_prob", below_one(0)},
      {"model.layernorm_epsilon", above(0)},
      {"model.initializer_range", at_least(0)},
      {"model.num_key_value_heads", at_least(0)},
      {"model.head_dim", at_least(0)},
      {"model.rope_theta", above(0)},
      {"model.rotary_pct", above_to(0, 1)},
      {"model.rope_scaling.factor", above(0)},
      {"model.rope_scaling.low_freq_factor", above(0)},
      {"model.rope_scaling.high_freq_factor", above(0)},
      {"model.rope_scaling.original_max_position_embeddings", at_least(1)},
      {"model.num_tokentypes", at_least(0)},
      {"model.pad_token_id", at_least(0)},
      {"model.num_labels", at_least(1)},
      {"model.num_decoder_layers", at_least(0)},
      {"model.relative_attention_num_buckets", at_least(1)},
      {"model.relative_attention_max_distance", at_least(1)},
      {"model.decoder_seq_length", at_least(1)},
      {"model.initializer_factor", at_least(0)},
      {"model.image_size", at_least(1)},
      {"model.patch_size", at_least(1)},
      {"model.num_channels", at_least(1)},
      {"model.sliding_window", at_least(0)},
      {"train.train_iter", at_least(0)},
      {"train.exit_iter", at_least(0)},
      {"train.train_micro_batch_size", at_least(1)},
      {"train.global_batch_size", at_least(0)},
      {"train.num_accumulation_steps", at_least(0)},
      {"train.test_micro_batch_size", at_least(1)},
      {"train.log_period", at_least(1)},
      {"train.straggler_factor", at_least(0)},
      {"train.seed", any_number()},  // any integer: a seed is a name
      {"train.checkpointer.period", at_least(0)},
      {"train.checkpointer.max_to_keep", at_least(0)},
      {"train.evaluation.eval_period", at_least(0)},
      {"train.evaluation.eval_iter", at_least(1)},
      {"train.amp.loss_scale", at_least(0)},
      {"train.amp.initial_loss_scale", above(0)},
      {"train.amp.min_loss_scale", above(0)},
      {"train.amp.loss_scale_window", at_least(1)},
      {"train.amp.hysteresis", at_least(1)},
      {"train.activation_checkpoint.start_layer", at_least(0)},
      {"train.activation_checkpoint.end_layer", at_least(-1)},
      {"train.zero_optimization.stage", closed(1, 3)},
      {"train.dist.data_parallel_size", at_least(0)},
      {"train.dist.tensor_parallel_size", at_least(1)},
      {"train.dist.context_parallel_size", at_least(1)},
      {"train.dist.pipeline_parallel_size", at_least(1)},
      {"train.dist.pipeline_num_layers", at_least(0)},
      {"train.dist.custom_pipeline_stage_id", integers_from(0)},
      {"train.dist.virtual_pipeline_size", at_least(1)},
      {"train.dist.timeout", {0, 1e9, true, false}},  // up to 31 years: a deadline in nanoseconds stays in int64
      {"train.dist.grad_bucket_mb", above(0)},
      {"graph.auto_parallel.memory_per_rank_gb", at_least(0)},
      {"train.scheduler.warmup_iter", at_least(0)},
      {"train.scheduler.warmup_factor", closed(0, 1)},
      {"train.scheduler.alpha", closed(0, 1)},
      {"train.scheduler.milestones", integers_from(0)},
      {"train.scheduler.gamma", above(0)},
      {"train.profile.start_step", at_least(1)},
      {"train.profile.num_steps", at_least(1)},
      {"train.threads", at_least(0)},
      {"optim.lr", at_least(0)},
      {"optim.weight_decay", at_least(0)},
      {"optim.betas", below_one(0)},
      {"optim.eps", at_least(0)},
      {"optim.momentum", closed(0, 1)},
      {"optim.clip_grad_max_norm", any_number()},  // <= 0 disables clipping
      {"optim.clip_grad_norm_type", {1, kInf, false, false}},  // .inf included
      {"data.seq_length", at_least(0)},
      {"data.masked_lm_prob", closed(0, 1)},
      {"data.short_seq_prob", closed(0, 1)},
      {"data.noise_density", closed(0, 1)},
      {"data.mean_noise_span_length", at_least(1)},
      {"data.image_mean", any_number()},
      {"data.image_std", above(0)},
      {"data.decode_threads", closed(0, 1024)},
      {"tokenization.extra_ids", closed(0, 1 << 20)},
  };
  return r;
}

std::string bound_text(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 9223372036854775808.0) return "2^63";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}


}  // namespace

bool Range::holds(double x) const {
  if (std::isnan(x)) return false;
  return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
}

const Range* range_of(const std::string& key) {
  auto it = ranges().find(key);
  return it == ranges().end() ? nullptr : &it->second;
}

std::string range_text(const Range& r) {
  std::string s = r.lo_open ? "(" : "[";
  s += bound_text(r.lo);
  s += ", ";
  s += bound_text(r.hi);
  s += r.hi_open ? ")" : "]";
  return r.integer ? "of integers " + s : s;
}

void check_range(const std::string& key, const ConfigValue& v, const std::string& text, const std::string& source) {
  const Range* r = range_of(key);
  if (r == nullptr) return;
  std::vector<double> xs;
  if (const auto* i = std::get_if<int64_t>(&v)) xs.push_back(static_cast<double>(*i));
  if (const auto* d = std::get_if<double>(&v)) xs.push_back(*d);
  if (const auto* l = std::get_if<std::vector<double>>(&v)) xs = *l;
  for (double x : xs)
    MF_CHECK(r->holds(x) && (!r->integer || x == std::floor(x)), key, "=", text, " is outside its range ", range_text(*r),
             std::holds_alternative<std::vector<double>>(v) ? " (for each element)" : "", from_text(source));
}

}  // namespace mf::config_detail
