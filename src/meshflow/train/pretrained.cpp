#include "meshflow/train/pretrained.h"

#include <filesystem>
#include <iomanip>
#include <set>
#include <sstream>
#include <unordered_map>

#include "meshflow/config/config.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/io/hf_gpt2.h"
#include "meshflow/io/safetensors.h"
#include "meshflow/ops/ops.h"
#include "meshflow/train/build.h"
#include "meshflow/train/checkpoint.h"

namespace mf::train {

namespace fs = std::filesystem;

namespace {

std::string sizes_str(const models::Gpt2Config& c) {
  return detail::cat("vocab_size ", c.vocab_size, ", max_seq_length ", c.max_seq_length, ", hidden_size ", c.hidden_size,
                     ", num_layers ", c.num_layers, ", ffn_hidden_size ", c.ffn());
}

bool is_float(DType dt) { return dt == DType::kF32 || dt == DType::kF64 || dt == DType::kBF16 || dt == DType::kF16; }

// The tensors in gpt2_parameter_shapes(c)'s order, each checked: a parameter of that model,
// present once, floating point, of the shape `c` gives. `expected_by`: whose shapes these are.
nn::NamedTensors match_gpt2(const nn::NamedTensors& tensors, const models::Gpt2Config& c, const std::string& source,
                            const std::string& expected_by) {
  const auto expected = models::gpt2_parameter_shapes(c);
  std::unordered_map<std::string, const Shape*> shape_of;
  for (const auto& [name, shape] : expected) shape_of.emplace(name, &shape);
  std::unordered_map<std::string, Tensor> by_name;
  for (const auto& [name, t] : tensors) {
    auto it = shape_of.find(name);
    MF_CHECK(it != shape_of.end(), source, ": unexpected tensor '", name, "' ", shape_str(t.shape()), ": ", expected_by,
             " (", sizes_str(c), ") has no such parameter");
    MF_CHECK(t.shape() == *it->second, source, ": tensor '", name, "' is ", shape_str(t.shape()), ", ", expected_by,
             " expects ", shape_str(*it->second), " (", sizes_str(c), ")");
    MF_CHECK(is_float(t.dtype()), source, ": tensor '", name, "' is ", dtype_name(t.dtype()),
             "; weights must be f32, f64, bf16 or f16");
    MF_CHECK(by_name.emplace(name, t).second, source, ": tensor '", name, "' appears twice");
  }
  nn::NamedTensors out;
  for (const auto& [name, shape] : expected) {
    auto it = by_name.find(name);
    MF_CHECK(it != by_name.end(), source, ": no tensor '", name, "', which ", expected_by, " (", sizes_str(c), ") expects");
    out.emplace_back(name, it->second);
  }
  return out;
}

const Tensor* find_tensor(const nn::NamedTensors& t, const std::string& name, int64_t ndim) {
  for (const auto& [n, v] : t)
    if (n == name && v.ndim() == ndim) return &v;
  return nullptr;
}

// A meshflow checkpoint's model tensors (verified, read whole, stored dtypes): sizes from the
// tensors; heads, epsilon and dropout from the run's config.yaml when it is there.
ModelWeights meshflow_weights(const CheckpointReader& reader, const fs::path& config_yaml) {
  reader.verify(nullptr);
  nn::NamedTensors tensors;
  for (const std::string& n : reader.names())
    if (n.rfind("model/", 0) == 0) tensors.emplace_back(n.substr(6), reader.read_whole(n));
  const std::string source = reader.dir();
  ModelWeights w;
  w.source = source;
  w.config_source = config_yaml.string();
  const Tensor* wte = find_tensor(tensors, "transformer.wte.weight", 2);
  MF_CHECK(wte != nullptr, source, ": no 2-D tensor 'transformer.wte.weight' (not a GPT-2 checkpoint)");
  if (fs::is_regular_file(config_yaml)) {
    w.config = gpt2_config(Config::load(config_yaml.string()), 0);
    w.has_config = true;
  } else {  // the sizes the tensors show; one head (unknown)
    const Tensor* wpe = find_tensor(tensors, "transformer.wpe.weight", 2);
    const Tensor* fc = find_tensor(tensors, "transformer.h.0.mlp.c_fc.weight", 2);
    MF_CHECK(wpe != nullptr && fc != nullptr, source, ": no 2-D tensors 'transformer.wpe.weight' and "
             "'transformer.h.0.mlp.c_fc.weight' (not a GPT-2 checkpoint)");
    int64_t layers = 0;
    while (find_tensor(tensors, "transformer.h." + std::to_string(layers) + ".ln_1.weight", 1)) ++layers;
    w.config.hidden_size = wte->shape(1);
    w.config.max_seq_length = wpe->shape(0);
    w.config.num_layers = layers;
    w.config.ffn_hidden_size = fc->shape(1);
    w.config.num_attention_heads = 1;
  }
  w.config.vocab_size = wte->shape(0);  // the tokenizer may have padded model.vocab_size
  w.tensors = match_gpt2(tensors, w.config, source, w.has_config ? "its config.yaml" : "its tensors");
  return w;
}

ModelWeights hf_weights(const std::string& path) {
  io::HfModelFiles files = io::find_hf_model_files(path);
  ModelWeights w;
  w.hugging_face = true;
  w.source = files.source;
  w.config = io::gpt2_config_from_hf(files.config);
  w.has_config = true;
  w.config_source = files.config;
  w.tensors = match_gpt2(io::read_hf_gpt2_tensors(files), w.config, w.source, "its config.json");
  return w;
}

std::string dtypes_str(const nn::NamedTensors& t) {
  std::set<std::string> names;
  for (const auto& [n, v] : t) names.insert(dtype_name(v.dtype()));
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : "+") + n;
  return s;
}

std::string model_str(const models::Gpt2Config& c) {
  return detail::cat("GPT-2: layers ", c.num_layers, ", hidden ", c.hidden_size, ", heads ", c.num_attention_heads, ", MLP ",
                     c.ffn(), ", vocabulary ", c.vocab_size, ", positions ", c.max_seq_length);
}

// config.yaml of a converted checkpoint: the model.* keys, as a run config writes them.
std::string checkpoint_config_yaml(const models::Gpt2Config& c, const std::string& source) {
  Config y;
  auto num = [](double v) {
    std::ostringstream os;
    os << std::setprecision(17) << v;
    return os.str();
  };
  y.set("model.num_layers", std::to_string(c.num_layers));
  y.set("model.hidden_size", std::to_string(c.hidden_size));
  y.set("model.num_attention_heads", std::to_string(c.num_attention_heads));
  y.set("model.ffn_hidden_size", std::to_string(c.ffn_hidden_size));  // 0: 4 * hidden, as n_inner null
  y.set("model.max_seq_length", std::to_string(c.max_seq_length));
  y.set("model.vocab_size", std::to_string(c.vocab_size));
  y.set("model.embedding_dropout_prob", num(c.embedding_dropout_prob));
  y.set("model.attention_dropout_prob", num(c.attention_dropout_prob));
  y.set("model.output_dropout_prob", num(c.output_dropout_prob));
  y.set("model.layernorm_epsilon", num(c.layernorm_epsilon));
  y.set("model.initializer_range", num(c.initializer_range));
  std::string text = "# GPT-2 weights converted by `meshflow convert` from " + source +
                     "\n# The model's sizes: a run that starts from these weights (model.pretrained=<this folder>)\n"
                     "# needs the same ones, e.g. with this file as its config's _base_.\nmodel:\n";
  for (const char* key : {"model.name", "model.num_layers", "model.hidden_size", "model.num_attention_heads",
                          "model.ffn_hidden_size", "model.max_seq_length", "model.vocab_size", "model.embedding_dropout_prob",
                          "model.attention_dropout_prob", "model.output_dropout_prob", "model.layernorm_epsilon",
                          "model.initializer_range"})
    text += "  " + std::string(key + 6) + ": " + y.get_text(key) + "\n";
  return text;
}

// `path` without a trailing separator, absolute: its parent is the folder holding it.
fs::path normal_path(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p;
}

}  // namespace

ModelWeights read_model_weights(const std::string& path) {
  MF_CHECK(!path.empty(), "no weights path given");
  MF_CHECK(fs::exists(path), path, ": no such file or directory");
  fs::path p = normal_path(path);
  if (!fs::is_directory(p) && fs::exists(p.parent_path() / "metadata.json")) p = p.parent_path();  // a shard file
  if (fs::is_directory(p)) {
    if (auto reader = CheckpointReader::open_latest(p.string()))  // a run's or a conversion's output folder
      return meshflow_weights(*reader, p / "config.yaml");
    if (fs::exists(p / "metadata.json"))  // one checkpoints/iter_N folder
      return meshflow_weights(CheckpointReader(p.string()), p.parent_path().parent_path() / "config.yaml");
    MF_CHECK(fs::exists(p / "config.json") || fs::exists(p / "model.safetensors"), path,
             ": neither a Hugging Face model (config.json + model.safetensors) nor a meshflow checkpoint "
             "(checkpoints/latest, or an iter_N folder with metadata.json)");
  }
  return hf_weights(path);  // needs config.json beside the weights
}

std::string load_model_weights(models::Gpt2Model& m, const ModelWeights& w) {
  const models::Gpt2Config& mc = m.config();
  if (w.has_config)
    MF_CHECK(w.config.num_attention_heads == mc.num_attention_heads, w.config_source, " gives ",
             w.hugging_face ? "n_head " : "model.num_attention_heads ", w.config.num_attention_heads,
             ", the model config model.num_attention_heads ", mc.num_attention_heads);
  const nn::NamedTensors whole = match_gpt2(w.tensors, mc, w.source, "the model config");
  std::unordered_map<std::string, Tensor> by_name(whole.begin(), whole.end());
  std::set<std::string> cast_from;
  nn::NamedTensors mine;  // this stage's tensors, in the model's dtype
  for (const auto& [name, t] : m.state_dict()) {
    auto it = by_name.find(name);
    MF_CHECK(it != by_name.end(), w.source, ": no tensor '", name, "'");
    Tensor v = it->second;
    if (v.dtype() != t.dtype()) {
      cast_from.insert(dtype_name(v.dtype()));
      v = cast(v, t.dtype());
    }
    mine.emplace_back(name, v);
  }
  m.load_state_dict(nn::slice_local_state(m, mine, m.tensor_parallel()));
  std::string note = w.hugging_face ? "Hugging Face GPT-2" : "meshflow checkpoint";
  for (const auto& from : cast_from) note += detail::cat(", ", from, " cast to ", dtype_name(mc.dtype));
  return detail::cat(whole.size(), " tensors from ", w.source, " (", note, ")");
}

std::string convert_from_hf(const std::string& hf_path, const std::string& out_dir) {
  ModelWeights w = read_model_weights(hf_path);
  MF_CHECK(w.hugging_face, hf_path, " is a meshflow checkpoint, not a Hugging Face model (--from-hf reads config.json "
           "and model.safetensors)");
  const fs::path out(out_dir);
  MF_CHECK(!fs::exists(out / "checkpoints") && !fs::exists(out / "config.yaml"), out_dir,
           " already holds a run or a checkpoint (config.yaml or checkpoints/); choose another --output");
  fs::create_directories(out);
  // The sizes first, the checkpoint (whose `latest` pointer is written last) after: an
  // interrupted conversion leaves no loadable checkpoint rather than one without its sizes.
  const std::string yaml = checkpoint_config_yaml(w.config, w.source);
  write_file_atomic((out / "config.yaml").string(), yaml);
  std::vector<ShardPiece> pieces;  // whole tensors, one process; the sizes in metadata.json too
  for (const auto& [name, t] : w.tensors) pieces.push_back({"model/" + name, t, t.shape(), TensorRegion::whole(t.shape())});
  write_checkpoint_shards(nullptr, out_dir, TrainingState{}, yaml, {}, pieces, 0);
  return detail::cat("wrote ", (out / "checkpoints" / "iter_0000000").string(), ": ", w.tensors.size(), " tensors (",
                     dtypes_str(w.tensors), "), ", model_str(w.config), "; sizes in ", (out / "config.yaml").string());
}

std::string convert_to_hf(const std::string& checkpoint_path, const std::string& out_dir) {
  ModelWeights w = read_model_weights(checkpoint_path);
  MF_CHECK(!w.hugging_face, checkpoint_path, " is already a Hugging Face model (--to-hf reads a meshflow checkpoint)");
  MF_CHECK(w.has_config, checkpoint_path, ": no config.yaml of the run at ", w.config_source,
           " (the number of attention heads is not in the weights)");
  const fs::path out(out_dir);
  fs::create_directories(out);
  // "format": "pt" is what transformers' loader expects of a safetensors file's metadata.
  io::save_safetensors((out / "model.safetensors").string(), w.tensors, {{"format", "pt"}});
  write_file_atomic((out / "config.json").string(), io::gpt2_config_to_hf(w.config, w.tensors.front().second.dtype()));
  return detail::cat("wrote ", (out / "model.safetensors").string(), " and config.json: ", w.tensors.size(), " tensors (",
                     dtypes_str(w.tensors), "), ", model_str(w.config));
}

}  // namespace mf::train
