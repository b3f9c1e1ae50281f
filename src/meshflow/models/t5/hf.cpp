#include "meshflow/models/t5/spec.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/t5/model.h"
#include "meshflow/models/hf_weights.h"
#include "meshflow/models/schema_hf.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::t5 {

namespace {

using json = nlohmann::ordered_json;

T5Config t5_config_from_hf(const std::string& path) {
  std::string type;
  const json j = read_hf_config(path, {"t5", "mt5"}, &type);
  T5Config c;
  c.mt5 = type == "mt5";
  c.gated_gelu = require_hf_string(j, path, "feed_forward_proj", {"relu", "gated-gelu"},
                                   "relu: T5 v1.0; gated-gelu: T5 v1.1, mT5") == "gated-gelu";
  // T5Config's defaults where they differ from meshflow's (t5-small's sizes).
  c.hidden_size = 512;
  c.ffn_hidden_size = 2048;
  c.num_layers = 6;
  c.num_attention_heads = 8;
  read_hf_fields(t5_schema(), j, path, c);
  if (!j.contains("num_decoder_layers") || j["num_decoder_layers"].is_null()) c.num_decoder_layers = c.num_layers;
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob;  // dropout_rate
  const int64_t start = io::json_get(j, path, "decoder_start_token_id", c.pad_token_id);
  MF_CHECK(start == c.pad_token_id, path, ": decoder_start_token_id ", start, " differs from pad_token_id ", c.pad_token_id,
           " (meshflow's T5 starts the decoder with the padding id)");
  return validated(std::move(c), path);
}

std::string t5_config_to_hf(const T5Config& c, DType dtype) {
  json j = {{"architectures", {c.mt5 ? "MT5ForConditionalGeneration" : "T5ForConditionalGeneration"}},
            {"model_type", c.mt5 ? "mt5" : "t5"}};
  write_hf_fields(t5_schema(), c, j);
  j["feed_forward_proj"] = c.gated_gelu ? "gated-gelu" : "relu";
  j["dense_act_fn"] = c.gated_gelu ? "gelu_new" : "relu";
  j["is_gated_act"] = c.gated_gelu;
  j["is_encoder_decoder"] = true;
  j["eos_token_id"] = 1;
  j["decoder_start_token_id"] = c.pad_token_id;
  j["torch_dtype"] = io::torch_dtype_name(dtype);
  return j.dump(2) + "\n";
}

nn::NamedTensors read_hf_t5_tensors(const io::HfModelFiles& files, const T5Config& c) {
  HfWeightRules r;
  r.known = parameter_of(T5Model(c, ModelContext::shape_only()));
  // The stacks' embed_tokens and a tied lm_head are the shared embedding.
  for (const char* copy : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}) r.tied[copy] = {"shared.weight", ""};
  if (c.tie_word_embeddings) r.tied["lm_head.weight"] = {"shared.weight", ""};
  r.model = describe(c);
  return read_hf_weights(files, r);
}

}  // namespace

HfMapping hf(bool mt5) {
  HfMapping m = hf_mapping(mt5 ? "mt5" : "t5", mt5 ? "MT5ForConditionalGeneration" : "T5ForConditionalGeneration",
                           &t5_config_from_hf, &t5_config_to_hf, &read_hf_t5_tensors, &t5_config, t5_schema());
  m.key_names.emplace_back("model.feed_forward_proj", "feed_forward_proj");
  return m;
}

}  // namespace mf::models::t5
