#include "meshflow/models/gpt2/hf.h"

#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <utility>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/models/schema_hf.h"

namespace mf::models {

using json = nlohmann::ordered_json;

namespace {

// "transformer.h.<digits>.<rest>" -> <rest>; "" for other names.
std::string block_suffix(const std::string& name) {
  const std::string h = "transformer.h.";
  if (!name.starts_with(h)) return "";
  size_t i = h.size();
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == h.size() || i >= name.size() || name[i] != '.') return "";
  return name.substr(i + 1);
}

}  // namespace

bool is_gpt2_parameter_name(const std::string& name) {
  static const std::set<std::string> outer = {"transformer.wte.weight", "transformer.wpe.weight",
                                              "transformer.ln_f.weight", "transformer.ln_f.bias"};
  if (outer.count(name)) return true;
  const std::string rest = block_suffix(name);
  if (rest.empty()) return false;
  // A block's parameter names (after "transformer.h.<l>."), read once off a shape-only block.
  static const std::set<std::string> block = [] {
    Gpt2Config one;
    one.num_layers = 1;
    std::set<std::string> names;
    const std::string prefix = "transformer.h.0.";
    for (const auto& [n, shape] : Gpt2Model(one, ModelContext::shape_only()).parameter_shapes())
      if (n.compare(0, prefix.size(), prefix) == 0) names.insert(n.substr(prefix.size()));
    return names;
  }();
  return block.count(rest) > 0;
}

Gpt2Config gpt2_config_from_hf(const std::string& path) {
  const json j = io::read_json_file(path);
  MF_CHECK(j.is_object(), path, ": not a JSON object");
  auto get = [&](const char* key, auto fallback) { return io::json_get(j, path, key, fallback); };
  const std::string type = get("model_type", std::string("gpt2"));
  MF_CHECK(type == "gpt2", path, ": model_type '", type, "' is not GPT-2 (meshflow reads GPT2LMHeadModel weights)");
  const std::string act = get("activation_function", std::string("gelu_new"));
  MF_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh", path, ": activation_function '", act,
           "' is not supported (meshflow's GPT-2 uses the tanh GELU, gelu_new)");
  MF_CHECK(get("scale_attn_weights", true), path, ": scale_attn_weights false is not supported");
  MF_CHECK(!get("scale_attn_by_inverse_layer_idx", false), path, ": scale_attn_by_inverse_layer_idx true is not supported");
  MF_CHECK(get("tie_word_embeddings", true), path,
           ": tie_word_embeddings false is not supported (GPT-2's head is the token embedding)");
  MF_CHECK(!get("add_cross_attention", false), path, ": add_cross_attention true is not supported");
  Gpt2Config c;
  read_hf_fields(gpt2_schema(), j, path, c);
  if (!j.contains("n_positions")) c.max_seq_length = get("n_ctx", c.max_seq_length);
  return validated(std::move(c), path);
}

std::string gpt2_config_to_hf(const Gpt2Config& c, DType dtype) {
  const char* torch_dtype = io::torch_dtype_name(dtype);
  json j = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"activation_function", "gelu_new"}};
  write_hf_fields(gpt2_schema(), c, j);
  j["n_ctx"] = c.max_seq_length;
  j["n_inner"] = c.ffn_hidden_size > 0 ? json(c.ffn_hidden_size) : json(nullptr);
  for (const char* k : {"scale_attn_weights", "tie_word_embeddings", "use_cache"}) j[k] = true;
  for (const char* k : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"}) j[k] = false;
  j["torch_dtype"] = torch_dtype;
  if (c.vocab_size > 50256) {  // GPT-2's <|endoftext|>
    j["bos_token_id"] = 50256;
    j["eos_token_id"] = 50256;
  }
  return j.dump(2) + "\n";
}

nn::NamedTensors read_hf_gpt2_tensors(const io::HfModelFiles& files) {
  nn::NamedTensors out;
  Tensor lm_head;
  std::string lm_head_file;
  for (const std::string& file : files.weights) {
    for (auto& [raw, t] : io::load_safetensors(file).tensors) {
      if (raw == "lm_head.weight") {
        lm_head = t;
        lm_head_file = file;
        continue;
      }
      const std::string name = raw.starts_with("transformer.") ? raw : "transformer." + raw;
      const std::string rest = block_suffix(name);
      if (rest == "attn.bias" || rest == "attn.masked_bias") continue;  // the causal mask, not a parameter
      MF_CHECK(is_gpt2_parameter_name(name), file, ": unknown tensor '", raw, "' (not a GPT-2 parameter or buffer)");
      out.emplace_back(name, t);
    }
  }
  if (lm_head.defined()) {  // tied: must be the embedding itself
    const Tensor* wte = nullptr;
    for (const auto& [name, t] : out)
      if (name == "transformer.wte.weight") wte = &t;
    MF_CHECK(wte != nullptr && wte->shape() == lm_head.shape() && wte->dtype() == lm_head.dtype() &&
                 std::memcmp(wte->raw_data(), lm_head.raw_data(), lm_head.nbytes()) == 0,
             lm_head_file, ": lm_head.weight ", lm_head.str(),
             " differs from the token embedding wte.weight (meshflow's GPT-2 ties the two; an untied head is not "
             "supported)");
  }
  return out;
}

}  // namespace mf::models
