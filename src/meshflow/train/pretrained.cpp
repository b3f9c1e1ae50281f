#include "meshflow/train/pretrained.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "meshflow/config/config.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/io/hf_files.h"
#include "meshflow/io/safetensors.h"
#include "meshflow/ops/ops.h"
#include "meshflow/io/checkpoint.h"

namespace mf::train {

namespace fs = std::filesystem;

namespace {

bool is_float(DType dt) { return dt == DType::kF32 || dt == DType::kF64 || dt == DType::kBF16 || dt == DType::kF16; }

// The tensors in `expected`'s order, each checked: a parameter of that model, present once,
// floating point, of the expected shape. `expected_by`: whose shapes these are; `what`: the
// model's one-line description.
nn::NamedTensors match_shapes(const nn::NamedTensors& tensors, const std::vector<std::pair<std::string, Shape>>& expected,
                              const std::string& source, const std::string& expected_by, const std::string& what) {
  std::unordered_map<std::string, const Shape*> shape_of;
  for (const auto& [name, shape] : expected) shape_of.emplace(name, &shape);
  std::unordered_map<std::string, Tensor> by_name;
  for (const auto& [name, t] : tensors) {
    auto it = shape_of.find(name);
    MF_CHECK(it != shape_of.end(), source, ": unexpected tensor '", name, "' ", shape_str(t.shape()), ": ", expected_by,
             " (", what, ") has no such parameter");
    MF_CHECK(t.shape() == *it->second, source, ": tensor '", name, "' is ", shape_str(t.shape()), ", ", expected_by,
             " expects ", shape_str(*it->second), " (", what, ")");
    MF_CHECK(is_float(t.dtype()), source, ": tensor '", name, "' is ", dtype_name(t.dtype()),
             "; weights must be f32, f64, bf16 or f16");
    MF_CHECK(by_name.emplace(name, t).second, source, ": tensor '", name, "' appears twice");
  }
  nn::NamedTensors out;
  for (const auto& [name, shape] : expected) {
    auto it = by_name.find(name);
    MF_CHECK(it != by_name.end(), source, ": no tensor '", name, "', which ", expected_by, " (", what, ") expects");
    out.emplace_back(name, it->second);
  }
  return out;
}

// "num_layers 4, hidden_size 32, ...": the integer keys among the spec's config keys.
std::string sizes_str(const models::ModelSpec& spec, const Config& c) {
  std::string s;
  for (const std::string& key : spec.config_keys)
    if (c.type_of(key) == ConfigType::kInt) s += (s.empty() ? "" : ", ") + key.substr(6) + " " + c.get_text(key);
  return s;
}

// read(): a config made from a weights file; an error naming no file gets `file` in front (a size the
// run would refuse, read from a config.json or a checkpoint's tensors).
template <class Read>
Config config_from(const std::string& file, Read read) {
  try {
    return read();
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what.find(file) == std::string::npos ? file + ": " + what : what);
  }
}

nn::NamedTensors match_spec(const nn::NamedTensors& tensors, const models::ModelSpec& spec, const Config& c,
                            const std::string& source, const std::string& expected_by) {
  return match_shapes(tensors, spec.parameter_shapes(c), source, expected_by, sizes_str(spec, c));
}

// A model.* key as the weights' own config names it (config.json's name for Hugging Face).
std::string key_name(const ModelWeights& w, const std::string& key) {
  if (w.hugging_face)
    for (const auto& [ours, theirs] : w.spec->hf.key_names)
      if (ours == key) return theirs;
  return key;
}

// A meshflow checkpoint's model tensors (verified, read whole, stored dtypes), of the model its
// config.yaml names (else `expected_model`'s), with that config's keys where it is there.
ModelWeights meshflow_weights(const io::CheckpointReader& reader, const fs::path& config_yaml, const std::string& expected_model) {
  reader.verify(nullptr);
  nn::NamedTensors tensors;
  for (const std::string& n : reader.names())
    if (n.rfind("model/", 0) == 0) tensors.emplace_back(n.substr(6), reader.read_whole(n));
  const std::string source = reader.dir();
  ModelWeights w;
  w.source = source;
  w.config_source = config_yaml.string();
  std::optional<Config> run;
  if (fs::is_regular_file(config_yaml)) {
    run = Config::load(config_yaml.string());
    w.has_config = true;
  }
  const std::string name = run ? run->get_string("model.name")
                               : !expected_model.empty() ? expected_model : Config::defaults().get_string("model.name");
  w.spec = &models::model_spec(name);
  w.config = config_from(source, [&] { return w.spec->checkpoint_config(tensors, run ? &*run : nullptr, source); });
  w.tensors = match_spec(tensors, *w.spec, w.config, source, w.has_config ? "its config.yaml" : "its tensors");
  return w;
}

std::string hf_types() {
  std::string s;
  for (const std::string& n : models::model_names())
    if (!models::model_spec(n).hf.model_type.empty()) s += (s.empty() ? "" : ", ") + models::model_spec(n).hf.model_type;
  return s;
}

ModelWeights hf_weights(const std::string& path) {
  io::HfModelFiles files = io::find_hf_model_files(path);
  ModelWeights w;
  w.hugging_face = true;
  w.source = files.source;
  const std::string type = io::hf_model_type(files.config);
  w.spec = models::model_spec_for_hf_type(type.empty() ? "gpt2" : type);  // GPT-2's early files have no model_type
  MF_CHECK(w.spec != nullptr, files.config, ": model_type '", type, "' is not a model meshflow reads (Hugging Face "
           "model types it maps: ", hf_types(), ")");
  w.config = config_from(files.config, [&] { return w.spec->hf.read_config(files.config); });
  w.has_config = true;
  w.config_source = files.config;
  w.tensors = match_spec(w.spec->hf.read_tensors(files), *w.spec, w.config, w.source, "its config.json");
  return w;
}

std::string dtypes_str(const nn::NamedTensors& t) {
  std::set<std::string> names;
  for (const auto& [n, v] : t) names.insert(dtype_name(v.dtype()));
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : "+") + n;
  return s;
}

// config.yaml of a converted checkpoint: the model.* keys, as a run config writes them.
std::string checkpoint_config_yaml(const models::ModelSpec& spec, const Config& c, const std::string& source) {
  std::string text = "# " + spec.name + " weights converted by `meshflow convert` from " + source +
                     "\n# The model's sizes: a run that starts from these weights (model.pretrained=<this folder>)\n"
                     "# needs the same ones, e.g. with this file as its config's _base_.\nmodel:\n";
  for (const std::string& key : spec.config_keys) text += "  " + key.substr(6) + ": " + c.get_text(key) + "\n";
  return text;
}

// `path` without a trailing separator, absolute: its parent is the folder holding it.
fs::path normal_path(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p;
}

}  // namespace

ModelWeights read_model_weights(const std::string& path, const std::string& expected_model) {
  MF_CHECK(!path.empty(), "no weights path given");
  MF_CHECK(fs::exists(path), path, ": no such file or directory");
  fs::path p = normal_path(path);
  if (!fs::is_directory(p) && fs::exists(p.parent_path() / "metadata.json")) p = p.parent_path();  // a shard file
  if (fs::is_directory(p)) {
    if (auto reader = io::CheckpointReader::open_latest(p.string()))  // a run's or a conversion's output folder
      return meshflow_weights(*reader, p / "config.yaml", expected_model);
    if (fs::exists(p / "metadata.json"))  // one checkpoints/iter_N folder
      return meshflow_weights(io::CheckpointReader(p.string()), p.parent_path().parent_path() / "config.yaml", expected_model);
    MF_CHECK(fs::exists(p / "config.json") || fs::exists(p / "model.safetensors"), path,
             ": neither a Hugging Face model (config.json + model.safetensors) nor a meshflow checkpoint "
             "(checkpoints/latest, or an iter_N folder with metadata.json)");
  }
  return hf_weights(path);  // needs config.json beside the weights
}

std::string load_model_weights(models::Model& m, const ModelWeights& w, bool new_heads) {
  const Config mc = m.model_config();
  const std::string name = mc.get_string("model.name");
  MF_CHECK(w.spec != nullptr && w.spec->name == name, w.source, " holds weights of model.name '",
           w.spec ? w.spec->name : "?", "', the run's model.name is '", name, "'");
  if (w.has_config)
    for (const std::string& key : w.spec->structure_keys)
      MF_CHECK(w.config.get_text(key) == mc.get_text(key), w.config_source, " gives ", key_name(w, key), " ",
               w.config.get_text(key), ", the model config ", key, " ", mc.get_text(key));
  // Task heads (ModelSpec::head_prefixes): the weights' heads the model has not (or holds with
  // another shape) are dropped, and the model's head parameters they do not give keep their
  // initialisation.
  auto is_head = [&](const std::string& name) {
    if (!new_heads) return false;
    for (const std::string& h : w.spec->head_prefixes)
      if (name.compare(0, h.size(), h) == 0) return true;
    return false;
  };
  std::unordered_map<std::string, Shape> model_shape;
  for (const auto& [name, shape] : m.parameter_shapes()) model_shape.emplace(name, shape);
  nn::NamedTensors tensors = w.tensors;  // made to fit the model's sizes where the model can (ViT's image size)
  const std::string adapted = w.spec->adapt_weights ? w.spec->adapt_weights(mc, tensors) : std::string();
  nn::NamedTensors given;
  std::set<std::string> given_names;
  for (const auto& [name, t] : tensors) {
    auto it = model_shape.find(name);
    if (is_head(name) && (it == model_shape.end() || it->second != t.shape())) continue;
    given.emplace_back(name, t);
    given_names.insert(name);
  }
  std::vector<std::pair<std::string, Shape>> expected;
  std::vector<std::string> fresh;  // head parameters the weights do not give
  for (const auto& [name, shape] : m.parameter_shapes()) {
    if (is_head(name) && !given_names.count(name)) {
      fresh.push_back(name);
      continue;
    }
    expected.emplace_back(name, shape);
  }
  const nn::NamedTensors whole = match_shapes(given, expected, w.source, "the model config", sizes_str(*w.spec, mc));
  std::unordered_map<std::string, Tensor> by_name(whole.begin(), whole.end());
  std::set<std::string> cast_from;
  nn::NamedTensors mine;  // this stage's tensors, in the model's dtype
  for (const auto& [pname, t] : m.state_dict()) {
    auto it = by_name.find(pname);
    if (it == by_name.end() && std::find(fresh.begin(), fresh.end(), pname) != fresh.end()) continue;
    MF_CHECK(it != by_name.end(), w.source, ": no tensor '", pname, "'");
    Tensor v = it->second;
    if (v.dtype() != t.dtype()) {
      cast_from.insert(dtype_name(v.dtype()));
      v = cast(v, t.dtype());
    }
    mine.emplace_back(pname, v);
  }
  m.load_state_dict(nn::slice_local_state(m, mine, m.tensor_parallel()), fresh.empty());
  std::string note = w.hugging_face ? "Hugging Face " + w.spec->hf.architecture : "meshflow checkpoint";
  for (const auto& from : cast_from) note += detail::cat(", ", from, " cast to ", dtype_name(m.param_dtype()));
  if (!adapted.empty()) note += "; " + adapted;
  if (!fresh.empty()) {
    note += "; newly initialised:";
    for (const std::string& f : fresh) note += " " + f;
  }
  return detail::cat(whole.size(), " tensors from ", w.source, " (", note, ")");
}

namespace {
// --output must be a new folder or an existing one without what conversion writes: nothing is
// overwritten.
void check_output_folder(const std::string& out_dir, const std::vector<const char*>& written) {
  const fs::path out(out_dir);
  MF_CHECK(!out_dir.empty(), "--output is empty: give a new folder");
  MF_CHECK(!fs::exists(out) || fs::is_directory(out), "--output ", out_dir,
           " is an existing file; give a new folder (nothing is overwritten)");
  for (const char* name : written)
    MF_CHECK(!fs::exists(out / name), "--output ", out_dir, " already holds ", name, "; choose another folder (nothing is overwritten)");
}
}  // namespace

std::string convert_from_hf(const std::string& hf_path, const std::string& out_dir) {
  check_output_folder(out_dir, {"checkpoints", "config.yaml"});
  ModelWeights w = read_model_weights(hf_path);
  MF_CHECK(w.hugging_face, hf_path, " is a meshflow checkpoint, not a Hugging Face model (--from-hf reads config.json "
           "and model.safetensors)");
  const fs::path out(out_dir);
  make_folder(out_dir, "--output");
  // The sizes first, the checkpoint (whose `latest` pointer is written last) after: an
  // interrupted conversion leaves no loadable checkpoint rather than one without its sizes.
  const std::string yaml = checkpoint_config_yaml(*w.spec, w.config, w.source);
  write_file_atomic((out / "config.yaml").string(), yaml);
  std::vector<io::ShardPiece> pieces;  // whole tensors, one process; the sizes in metadata.json too
  for (const auto& [name, t] : w.tensors) pieces.push_back({"model/" + name, t, t.shape(), io::TensorRegion::whole(t.shape())});
  io::write_checkpoint_shards(nullptr, out_dir, io::TrainingState{}, yaml, {}, pieces, 0);
  return detail::cat("wrote ", (out / "checkpoints" / "iter_0000000").string(), ": ", w.tensors.size(), " tensors (",
                     dtypes_str(w.tensors), "), ", w.spec->describe(w.config), "; sizes in ", (out / "config.yaml").string());
}

std::string convert_to_hf(const std::string& checkpoint_path, const std::string& out_dir) {
  check_output_folder(out_dir, {"model.safetensors", "config.json"});
  ModelWeights w = read_model_weights(checkpoint_path);
  MF_CHECK(!w.hugging_face, checkpoint_path, " is already a Hugging Face model (--to-hf reads a meshflow checkpoint)");
  MF_CHECK(w.has_config, checkpoint_path, ": no config.yaml of the run at ", w.config_source,
           " (what the tensors do not show, such as the number of attention heads)");
  MF_CHECK(!w.spec->hf.model_type.empty(), checkpoint_path, ": model.name '", w.spec->name,
           "' has no Hugging Face format");
  const fs::path out(out_dir);
  make_folder(out_dir, "--output");
  // "format": "pt" is what transformers' loader expects of a safetensors file's metadata.
  const nn::NamedTensors hf = w.spec->hf.write_tensors ? w.spec->hf.write_tensors(w.tensors) : w.tensors;
  io::save_safetensors((out / "model.safetensors").string(), hf, {{"format", "pt"}});
  write_file_atomic((out / "config.json").string(), w.spec->hf.write_config(w.config, w.tensors.front().second.dtype()));
  return detail::cat("wrote ", (out / "model.safetensors").string(), " and config.json: ", hf.size(), " tensors (",
                     dtypes_str(hf), "), ", w.spec->describe(w.config));
}

}  // namespace mf::train
