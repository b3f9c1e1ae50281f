#include "meshflow/models/gpt2/spec.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <utility>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/models/hf_weights.h"
#include "meshflow/models/schema_hf.h"

namespace mf::models::gpt2 {

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

bool is_parameter_name(const std::string& name) {
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

namespace {

Gpt2Config gpt2_config_from_hf(const std::string& path) {
  const json j = read_hf_config(path, {"gpt2"});
  auto get = [&](const char* key, auto fallback) { return io::json_get(j, path, key, fallback); };
  require_hf_string(j, path, "activation_function", {"gelu_new", "gelu_pytorch_tanh"},
                    "meshflow's GPT-2 uses the tanh GELU, gelu_new");
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
  HfWeightRules r;
  r.rename = [](const std::string& raw) {
    const std::string name = raw.starts_with("transformer.") || raw == "lm_head.weight" ? raw : "transformer." + raw;
    const std::string rest = block_suffix(name);
    return rest == "attn.bias" || rest == "attn.masked_bias" ? std::string() : name;  // the causal mask, not a parameter
  };
  r.known = is_parameter_name;
  r.tied["lm_head.weight"] = {"transformer.wte.weight",
                              "the token embedding wte.weight (meshflow's GPT-2 ties the two; an untied head is not supported)"};
  r.model = "GPT-2";
  return read_hf_weights(files, r);
}

}  // namespace

HfMapping hf() {
  HfMapping m;
  m.model_type = "gpt2";
  m.architecture = "GPT2LMHeadModel";
  m.read_config = [](const std::string& path) { return model_config(gpt2_config_from_hf(path)); };
  m.write_config = [](const Config& c, DType dtype) { return gpt2_config_to_hf(gpt2_config(c, 0), dtype); };
  m.read_tensors = read_hf_gpt2_tensors;
  m.key_names = gpt2_schema().hf_key_names();
  return m;
}

}  // namespace mf::models::gpt2
