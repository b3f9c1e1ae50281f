#include "meshflow/models/t5/hf.h"

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/t5/model.h"
#include "meshflow/models/schema_hf.h"

namespace mf::models {

using json = nlohmann::ordered_json;

namespace {
bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}
}  // namespace

T5Config t5_config_from_hf(const std::string& path) {
  const json j = io::read_json_file(path);
  MF_CHECK(j.is_object(), path, ": not a JSON object");
  const std::string type = io::json_get(j, path, "model_type", std::string("t5"));
  MF_CHECK(type == "t5" || type == "mt5", path, ": model_type '", type, "' is not one of t5, mt5");
  T5Config c;
  c.mt5 = type == "mt5";
  const std::string proj = io::json_get(j, path, "feed_forward_proj", std::string("relu"));
  MF_CHECK(proj == "relu" || proj == "gated-gelu", path, ": feed_forward_proj '", proj,
           "' is not supported (relu: T5 v1.0; gated-gelu: T5 v1.1, mT5)");
  c.gated_gelu = proj == "gated-gelu";
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
  const bool mt5 = c.mt5;
  json j = {{"architectures", {mt5 ? "MT5ForConditionalGeneration" : "T5ForConditionalGeneration"}},
            {"model_type", mt5 ? "mt5" : "t5"}};
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
  std::set<std::string> names;
  for (const auto& [name, shape] : T5Model(c, ModelContext::shape_only()).parameter_shapes()) names.insert(name);
  nn::NamedTensors out;
  std::map<std::string, std::pair<Tensor, std::string>> aliases;  // embed_tokens, a tied lm_head
  for (const std::string& file : files.weights) {
    for (auto& [name, t] : io::load_safetensors(file).tensors) {
      if (name == "encoder.embed_tokens.weight" || name == "decoder.embed_tokens.weight" ||
          (name == "lm_head.weight" && c.tie_word_embeddings)) {
        aliases[name] = {t, file};
        continue;
      }
      MF_CHECK(names.count(name), file, ": unknown tensor '", name, "' (not a parameter of ", t5_describe(c), ")");
      out.emplace_back(name, t);
    }
  }
  const Tensor* shared = nullptr;
  for (const auto& [n, t] : out)
    if (n == "shared.weight") shared = &t;
  if (!shared) {  // a file may hold the embedding only under an alias
    for (const auto& [name, tf] : aliases)
      if (name != "lm_head.weight") {
        out.emplace_back("shared.weight", tf.first);
        shared = &out.back().second;
        break;
      }
  }
  for (const auto& [name, tf] : aliases)
    MF_CHECK(shared != nullptr && same_bytes(*shared, tf.first), tf.second, ": ", name, " ", tf.first.str(),
             " differs from shared.weight, to which Hugging Face ties it");
  return out;
}

}  // namespace mf::models
