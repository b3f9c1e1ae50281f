// A model's hyperparameters declared once. Each field names its config key (model.*), the member
// of the model's config struct that holds it, its Hugging Face config.json key, and whether the
// weights' shapes show it (a size) or not (the structure: heads, norm epsilon, rotary base...).
// From the declaration come the run config's reading and writing, the registry's key lists
// (ModelSpec::config_keys, structure_keys, hf.key_names) and, in models/schema_hf.h, config.json's
// reading and writing. check() holds every field to its key's range (config/ranges.cpp, the one
// the run config's reading checks), or to a narrower one the model declares (the chained
// positive(), at_least()), for configs read and built in code alike; what relates several fields
// (heads dividing the hidden size) stays in the model's validate().
//
//   const Schema<GptNeoxConfig>& s = ...;
//   s.size("model.hidden_size", &GptNeoxConfig::hidden_size, "hidden_size")
//    .size("model.ffn_hidden_size", &GptNeoxConfig::ffn_hidden_size, "intermediate_size").positive();
#pragma once
#include <cstdint>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <type_traits>
#include <variant>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

namespace mf::models {

// config.json's names of the keys every Transformer family declares alike (Schema::transformer);
// "" : config.json holds none (the family reads it by hand, or not at all). The defaults are
// Hugging Face's common names (BertConfig, LlamaConfig, ViTConfig, GPTNeoXConfig).
struct TransformerHfNames {
  const char* num_layers = "num_hidden_layers";
  const char* hidden_size = "hidden_size";
  const char* num_attention_heads = "num_attention_heads";
  const char* ffn_hidden_size = "intermediate_size";
  const char* max_seq_length = "max_position_embeddings";
  const char* layernorm_epsilon = "layer_norm_eps";
  const char* embedding_dropout_prob = "";
  const char* attention_dropout_prob = "attention_probs_dropout_prob";
  const char* output_dropout_prob = "hidden_dropout_prob";
};

template <class C>
class Schema {
 public:
  using Member = std::variant<int64_t C::*, double C::*, bool C::*>;
  using Range = config_detail::Range;
  struct Field {
    std::string key;     // model.*
    Member member;
    std::string hf_key;  // config.json's ("" : none); dotted for a nested object ("rope_scaling.factor")
    bool structure;      // the weights' shapes do not show it
    std::optional<Range> range;  // narrower than the key's (config_detail::range_of); none: the key's
  };

  explicit Schema(std::string name) : name_(std::move(name)) {}
  // A field the weights' shapes show (a size).
  template <class T>
  Schema& size(const char* key, T C::*member, const char* hf_key = "") {
    fields_.push_back({key, Member(member), hf_key, false, std::nullopt});
    return *this;
  }
  // A field they do not show.
  template <class T>
  Schema& structure(const char* key, T C::*member, const char* hf_key = "") {
    fields_.push_back({key, Member(member), hf_key, true, std::nullopt});
    return *this;
  }
  // A narrower range than its key's for the field declared last.
  Schema& positive() { return range({0, kInf, true, true}); }
  Schema& at_least(double lo) { return range({lo, kInf, false, true}); }
  // The same for the field of `key`.
  Schema& at_least(const char* key, double lo) { return range(key, {lo, kInf, false, true}); }

  // The fields every Transformer family has, of those C holds, under the same model.* keys and
  // member names, with config.json's names `hf`: the sizes model.num_layers, hidden_size,
  // ffn_hidden_size (> 0), max_seq_length, vocab_size ("vocab_size"), the three dropouts and
  // initializer_range ("initializer_range"); the structure model.num_attention_heads and
  // layernorm_epsilon.
  Schema& transformer(const TransformerHfNames& hf = {}) {
    size("model.num_layers", &C::num_layers, hf.num_layers);
    size("model.hidden_size", &C::hidden_size, hf.hidden_size);
    if constexpr (requires { &C::num_attention_heads; })
      structure("model.num_attention_heads", &C::num_attention_heads, hf.num_attention_heads);
    size("model.ffn_hidden_size", &C::ffn_hidden_size, hf.ffn_hidden_size).positive();
    if constexpr (requires { &C::max_seq_length; }) size("model.max_seq_length", &C::max_seq_length, hf.max_seq_length);
    if constexpr (requires { &C::vocab_size; }) size("model.vocab_size", &C::vocab_size, "vocab_size");
    structure("model.layernorm_epsilon", &C::layernorm_epsilon, hf.layernorm_epsilon);
    if constexpr (requires { &C::embedding_dropout_prob; })
      size("model.embedding_dropout_prob", &C::embedding_dropout_prob, hf.embedding_dropout_prob);
    if constexpr (requires { &C::attention_dropout_prob; })
      size("model.attention_dropout_prob", &C::attention_dropout_prob, hf.attention_dropout_prob);
    if constexpr (requires { &C::output_dropout_prob; })
      size("model.output_dropout_prob", &C::output_dropout_prob, hf.output_dropout_prob);
    if constexpr (requires { &C::initializer_range; })
      size("model.initializer_range", &C::initializer_range, "initializer_range");
    return *this;
  }

  // Throws "<model>: <key> must be <range>, got <value>" for the first field out of its range.
  void check(const C& c, const std::string& model) const {
    for (const Field& f : fields_) {
      const Range* r = f.range ? &*f.range : config_detail::range_of(f.key);
      if (r == nullptr) continue;
      const double v = std::visit([&](auto m) { return static_cast<double>(c.*m); }, f.member);
      MF_CHECK(r->holds(v), model, ": ", f.key, " must be ", words(*r), ", got ", text(c, f));
    }
  }

  // A key of the model's config section that no member holds (a dropout the family must not set:
  // read by hand), listed among config_keys().
  Schema& key(const char* key) {
    extra_keys_.emplace_back(key);
    return *this;
  }

  // Every field from the run config's model.* keys.
  void read(const Config& c, C& out) const {
    for (const Field& f : fields_)
      std::visit(
          [&](auto m) {
            using T = std::remove_cvref_t<decltype(out.*m)>;
            if constexpr (std::is_same_v<T, int64_t>) out.*m = c.get_int(f.key);
            else if constexpr (std::is_same_v<T, double>) out.*m = c.get_float(f.key);
            else out.*m = c.get_bool(f.key);
          },
          f.member);
  }
  // model.name and every field as a run config writes them.
  Config write(const C& in) const {
    Config y;
    y.set("model.name", name_);
    for (const Field& f : fields_) y.set(f.key, text(in, f));
    return y;
  }
  // model.name, every field's key, then the extra keys.
  std::vector<std::string> config_keys() const {
    std::vector<std::string> out = {"model.name"};
    for (const Field& f : fields_) out.push_back(f.key);
    out.insert(out.end(), extra_keys_.begin(), extra_keys_.end());
    return out;
  }
  std::vector<std::string> structure_keys() const {
    std::vector<std::string> out;
    for (const Field& f : fields_)
      if (f.structure) out.push_back(f.key);
    return out;
  }
  // (model.* key, config.json key) of the fields config.json holds.
  std::vector<std::pair<std::string, std::string>> hf_key_names() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const Field& f : fields_)
      if (!f.hf_key.empty()) out.emplace_back(f.key, f.hf_key);
    return out;
  }
  const std::vector<Field>& fields() const { return fields_; }
  const std::string& name() const { return name_; }

 private:
  // A value as the run config's text: integers as they are, reals to 17 digits, true/false.
  static std::string text(const C& in, const Field& f) {
    return std::visit(
        [&](auto m) -> std::string {
          using T = std::remove_cvref_t<decltype(in.*m)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            return std::to_string(in.*m);
          } else if constexpr (std::is_same_v<T, double>) {
            std::ostringstream os;
            os << std::setprecision(17) << in.*m;
            return os.str();
          } else {
            return in.*m ? "true" : "false";
          }
        },
        f.member);
  }

  static constexpr double kInf = std::numeric_limits<double>::infinity();
  static std::string words(const Range& r) {  // "in [0, 1)", "> 0", ">= 1"
    std::ostringstream os;
    if (r.hi == kInf) os << (r.lo_open ? "> " : ">= ") << r.lo;
    else os << "in " << (r.lo_open ? "(" : "[") << r.lo << ", " << r.hi << (r.hi_open ? ")" : "]");
    return os.str();
  }
  Schema& range(Range r) {
    MF_CHECK(!fields_.empty(), "schema ", name_, ": a range before any field");
    fields_.back().range = r;
    return *this;
  }
  Schema& range(const std::string& key, Range r) {
    for (Field& f : fields_)
      if (f.key == key) {
        f.range = r;
        return *this;
      }
    MF_THROW("schema ", name_, ": no field ", key, " to give a range");
  }

  std::string name_;
  std::vector<Field> fields_;
  std::vector<std::string> extra_keys_;
};

}  // namespace mf::models
