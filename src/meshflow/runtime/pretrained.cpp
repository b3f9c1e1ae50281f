#include "meshflow/runtime/pretrained.h"

#include <cmath>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
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

namespace mf::runtime {

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
  return match_shapes(tensors, models::parameter_shapes(c), source, expected_by, sizes_str(spec, c));
}

// A model.* key as the weights' own config names it (config.json's name for Hugging Face).
std::string key_name(const ModelWeights& w, const std::string& key) {
  if (w.hugging_face)
    for (const auto& [ours, theirs] : w.spec->hf.key_names)
      if (ours == key) return theirs;
  return key;
}

// The Hugging Face config.json kept beside a run's or a conversion's config.yaml (kHfConfigFile;
// "" when there is none).
std::string kept_hf_config(const fs::path& config_yaml) {
  const fs::path kept = config_yaml.parent_path() / kHfConfigFile;
  return fs::is_regular_file(kept) ? read_file(kept.string()) : std::string();
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
  w.hf_config_json = kept_hf_config(config_yaml);
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
  w.hf_config_json = read_file(files.config);
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

// config.json for --to-hf: the model's own fields (`ours`, ModelSpec::hf.write_config) over the
// config.json the weights came from (`kept`, "" none), so that what meshflow does not compute
// survives the round trip: the fields it does not write (Qwen2's sliding_window and
// max_window_layers, ...), the tokenizer's bos/eos token ids, and the label names where the model
// has as many classes as the file named.
std::string merged_hf_config(const std::string& ours_text, const std::string& kept_text, const std::string& kept_source) {
  using json = nlohmann::ordered_json;
  if (kept_text.empty()) return ours_text;
  json ours = json::parse(ours_text), kept;
  try {
    kept = json::parse(kept_text);
  } catch (const json::exception& e) {
    MF_THROW(kept_source, ": not valid JSON (", e.what(), ")");
  }
  MF_CHECK(kept.is_object(), kept_source, ": not a JSON object");
  const bool same_classes = ours.contains("id2label") && kept.contains("id2label") && kept["id2label"].is_object() &&
                            kept["id2label"].size() == ours["id2label"].size();
  for (auto& [key, value] : kept.items()) {
    if (key == "id2label" || key == "label2id" || key == "num_labels") {
      if (same_classes) ours[key] = value;
    } else if (key == "bos_token_id" || key == "eos_token_id" || !ours.contains(key)) {
      ours[key] = value;
    }
  }
  return ours.dump(2) + "\n";
}

// `path` without a trailing separator, absolute: its parent is the folder holding it.
fs::path normal_path(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p;
}

}  // namespace

namespace {

// Hugging Face's image processor (preprocessor_config.json) as the data.* keys of meshflow's
// evaluation transform: image_mean and image_std (0 and 1 without do_normalize). What that
// transform does not do (no resize, a filter other than PIL's BILINEAR, another rescale, a size
// that is not square) is an error naming the file. A processor without image_mean (a tokenizer's)
// gives nothing.
std::vector<std::pair<std::string, std::string>> hf_preprocessing(const std::string& path) {
  using json = nlohmann::ordered_json;
  const json j = io::read_json_file(path);
  MF_CHECK(j.is_object(), path, ": not a JSON object");
  if (!j.contains("image_mean") && !j.contains("image_std") && !j.contains("do_resize")) return {};
  MF_CHECK(io::json_get(j, path, "do_resize", true), path,
           ": do_resize false is not supported (evaluation resizes every image to model.image_size)");
  const int64_t resample = io::json_get(j, path, "resample", int64_t{2});
  MF_CHECK(resample == 2, path, ": resample ", resample, " is not supported (meshflow resizes with PIL's BILINEAR, 2)");
  MF_CHECK(io::json_get(j, path, "do_rescale", true), path, ": do_rescale false is not supported (pixels are x / 255)");
  const double rescale = io::json_get(j, path, "rescale_factor", 1.0 / 255.0);
  MF_CHECK(std::abs(rescale * 255.0 - 1.0) < 1e-9, path, ": rescale_factor ", rescale,
           " is not supported (pixels are rescaled by 1/255)");
  if (j.contains("size") && j["size"].is_object()) {
    const int64_t h = io::json_get(j["size"], path, "height", int64_t{0}), wd = io::json_get(j["size"], path, "width", h);
    MF_CHECK(h == wd, path, ": size ", h, "x", wd, " is not square (evaluation resizes to model.image_size squared)");
  }
  const bool normalize = io::json_get(j, path, "do_normalize", true);
  auto list = [&](const char* key, double fallback) {
    Config tmp;  // the text a run config writes
    const std::string config_key = std::string("data.") + key;
    if (!normalize) {
      tmp.set(config_key, detail::cat("[", fallback, ", ", fallback, ", ", fallback, "]"), path);
      return tmp.get_text(config_key);
    }
    const json v = j.contains(key) ? j[key] : json::array({0.5, 0.5, 0.5});  // ViTImageProcessor's default
    MF_CHECK(v.is_array() && !v.empty(), path, ": ", key, " must be a list of numbers");
    std::string text = "[";
    for (const json& x : v) {
      MF_CHECK(x.is_number(), path, ": ", key, " must be a list of numbers");
      text += (text.size() > 1 ? ", " : "") + config_detail::format_double(x.get<double>());
    }
    tmp.set(config_key, text + "]", path);
    return tmp.get_text(config_key);
  };
  return {{"data.image_mean", list("image_mean", 0.0)}, {"data.image_std", list("image_std", 1.0)}};
}

// Where read_model_weights finds the weights at `path`: a meshflow checkpoint (its reader and the
// run's config.yaml) or, when `checkpoint` is empty, a Hugging Face model.
struct WeightsPlace {
  std::optional<io::CheckpointReader> checkpoint;
  fs::path config_yaml;
};

WeightsPlace locate_weights(const std::string& path) {
  MF_CHECK(!path.empty(), "no weights path given");
  MF_CHECK(fs::exists(path), path, ": no such file or directory");
  fs::path p = normal_path(path);
  if (!fs::is_directory(p) && fs::exists(p.parent_path() / "metadata.json")) p = p.parent_path();  // a shard file
  if (fs::is_directory(p)) {
    if (auto reader = io::CheckpointReader::open_latest(p.string()))  // a run's or a conversion's output folder
      return WeightsPlace{std::move(reader), p / "config.yaml"};
    if (fs::exists(p / "metadata.json"))  // one checkpoints/iter_N folder
      return WeightsPlace{std::optional<io::CheckpointReader>(std::in_place, p.string()),
                          p.parent_path().parent_path() / "config.yaml"};
    MF_CHECK(fs::exists(p / "config.json") || fs::exists(p / "model.safetensors"), path,
             ": neither a Hugging Face model (config.json + model.safetensors) nor a meshflow checkpoint "
             "(checkpoints/latest, or an iter_N folder with metadata.json)");
  }
  return {};  // a Hugging Face model: needs config.json beside the weights
}

}  // namespace

ModelWeights read_model_weights(const std::string& path, const std::string& expected_model) {
  const WeightsPlace place = locate_weights(path);
  if (place.checkpoint) return meshflow_weights(*place.checkpoint, place.config_yaml, expected_model);
  return hf_weights(path);
}

ModelWeights read_weights_config(const std::string& path, const std::string& expected_model) {
  const WeightsPlace place = locate_weights(path);
  ModelWeights w;
  if (place.checkpoint) {
    w.source = place.checkpoint->dir();
    w.config_source = place.config_yaml.string();
    w.has_config = fs::is_regular_file(place.config_yaml);
    if (w.has_config) w.config = Config::load(w.config_source);
    const std::string name = w.has_config ? w.config.get_string("model.name")
                                          : !expected_model.empty() ? expected_model
                                                                    : Config::defaults().get_string("model.name");
    w.spec = &models::model_spec(name);
    w.hf_config_json = kept_hf_config(place.config_yaml);
    return w;
  }
  const io::HfModelFiles files = io::find_hf_model_files(path);
  const std::string type = io::hf_model_type(files.config);
  w.hugging_face = true;
  w.source = files.source;
  w.spec = models::model_spec_for_hf_type(type.empty() ? "gpt2" : type);
  MF_CHECK(w.spec != nullptr, files.config, ": model_type '", type, "' is not a model meshflow reads (Hugging Face "
           "model types it maps: ", hf_types(), ")");
  w.config = config_from(files.config, [&] { return w.spec->hf.read_config(files.config); });
  w.has_config = true;
  w.config_source = files.config;
  w.hf_config_json = read_file(files.config);
  const fs::path processor = fs::path(files.config).parent_path() / "preprocessor_config.json";
  if (fs::is_regular_file(processor)) {
    w.preprocessing = hf_preprocessing(processor.string());
    w.preprocessing_source = processor.string();
  }
  return w;
}

std::vector<std::string> structure_keys(const models::ModelSpec& spec, const Config& weights_config) {
  std::vector<std::string> keys;
  for (const std::string& key : spec.structure_keys)
    if (!spec.structure_key_applies || spec.structure_key_applies(weights_config, key)) keys.push_back(key);
  return keys;
}

Config with_pretrained_structure(const Config& c, const ModelWeights& w, std::string* note) {
  Config out = c;
  if (note != nullptr) note->clear();
  if (!w.has_config || w.spec == nullptr || w.spec->name != c.get_string("model.name")) return out;  // load_model_weights names it
  struct Given {
    std::string key, value, name, file;  // ours, the weights' value, and the file's name for it
  };
  std::vector<Given> given;
  for (const std::string& key : structure_keys(*w.spec, w.config))
    given.push_back({key, w.config.get_text(key), key_name(w, key), w.config_source});
  for (const auto& [key, value] : w.preprocessing)
    given.push_back({key, value, key.substr(key.find('.') + 1), w.preprocessing_source});
  auto shown = [](const std::string& v) { return v.empty() ? std::string("\"\"") : v; };
  std::string taken;
  for (const Given& g : given) {
    const std::string ours = c.get_text(g.key);
    if (g.value == ours) continue;
    const std::string by = c.given_by(g.key);
    MF_CHECK(!c.is_given(g.key), g.key, " ", shown(ours), by.empty() ? "" : " (from " + by + ")", " differs from ", g.name,
             " ", shown(g.value), " in ", g.file, ": set ", g.key, "=", g.value,
             ", or leave the key out to take the file's value");
    out.set(g.key, g.value, g.file);
    taken += detail::cat(taken.empty() ? "" : ", ", g.key, "=", g.value, " (", g.file, ")");
  }
  if (note != nullptr && !taken.empty()) *note = "model.pretrained: taken from the weights, which the config leaves out: " + taken;
  return out;
}

Config pretrained_run_config(const Config& c, std::string* note, std::string* hf_config_json) {
  const std::string pretrained = c.get_string("model.pretrained");
  if (pretrained.empty()) return c;
  try {
    const ModelWeights w = read_weights_config(pretrained, c.get_string("model.name"));
    if (hf_config_json != nullptr) *hf_config_json = w.hf_config_json;
    return with_pretrained_structure(c, w, note);
  } catch (const Error& e) {
    throw Error(std::string("model.pretrained: ") + e.what());
  }
}

std::string load_model_weights(models::Model& m, const ModelWeights& w, bool new_heads) {
  const Config mc = m.model_config();
  const std::string name = mc.get_string("model.name");
  MF_CHECK(w.spec != nullptr && w.spec->name == name, w.source, " holds weights of model.name '",
           w.spec ? w.spec->name : "?", "', the run's model.name is '", name, "'");
  if (w.has_config)
    for (const std::string& key : structure_keys(*w.spec, w.config))
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
  m.load_state_dict(nn::slice_local_state(m, mine, m.place().size(), m.place().rank()), fresh.empty());
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
  check_output_folder(out_dir, {"checkpoints", "config.yaml", kHfConfigFile});
  ModelWeights w = read_model_weights(hf_path);
  MF_CHECK(w.hugging_face, hf_path, " is a meshflow checkpoint, not a Hugging Face model (--from-hf reads config.json "
           "and model.safetensors)");
  const fs::path out(out_dir);
  make_folder(out_dir, "--output");
  // The sizes first, the checkpoint (whose `latest` pointer is written last) after: an
  // interrupted conversion leaves no loadable checkpoint rather than one without its sizes.
  const std::string yaml = checkpoint_config_yaml(*w.spec, w.config, w.source);
  write_file_atomic((out / kHfConfigFile).string(), w.hf_config_json);  // what --to-hf writes back
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
  const std::string ours = w.spec->hf.write_config(w.config, w.tensors.front().second.dtype());
  write_file_atomic((out / "config.json").string(),
                    merged_hf_config(ours, w.hf_config_json, (fs::path(w.config_source).parent_path() / kHfConfigFile).string()));
  return detail::cat("wrote ", (out / "model.safetensors").string(), " and config.json: ", hf.size(), " tensors (",
                     dtypes_str(hf), "), ", w.spec->describe(w.config));
}

}  // namespace mf::runtime
