// Hugging Face GPT-2 import/export and model.pretrained: export -> import is bit-identical in
// every dtype; the exported file opens with a safetensors parser written here (not io/); a file
// in the original `gpt2` repository's style, written by hand here (no "transformer." prefix,
// mask buffers, a tied lm_head, sharded or not), imports and gives the logits of the model with
// those weights set directly; a run from model.pretrained starts from them; bad input fails
// with one message naming the file and the tensor.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/models/bert/model.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/models/gpt2/spec.h"
#include "meshflow/models/gpt_neox/model.h"
#include "meshflow/models/hf_weights.h"
#include "meshflow/models/llama/model.h"
#include "meshflow/models/t5/model.h"
#include "meshflow/models/vit/model.h"
#include "meshflow/models/registry.h"
#include "meshflow/io/safetensors.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/runtime/pretrained.h"
#include "meshflow/train/run.h"
#include "testing.h"

namespace {
using namespace mft;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using mf::models::Gpt2Config;
using mf::models::Gpt2Model;

// config.json at `path` as `meshflow convert` reads it: the model.* keys of the zoo's Hugging Face
// mapping for its model_type.
mf::Config hf_model_keys(const std::string& path) {
  const json j = json::parse(mf::read_file(path));
  const mf::models::ModelSpec* s = mf::models::model_spec_for_hf_type(j.at("model_type").get<std::string>());
  if (s == nullptr) throw std::runtime_error(path + ": no model for its model_type");
  return s->hf.read_config(path);
}

Gpt2Config tiny(int64_t ffn = 48) {
  Gpt2Config c;
  c.vocab_size = 257;  // the byte tokenizer's
  c.max_seq_length = 16;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_attention_heads = 4;
  c.ffn_hidden_size = ffn;
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob = 0.0;
  return c;
}

// The whole model's parameters, initialised from `seed`, as contiguous copies in `dt`.
mf::nn::NamedTensors weights(const Gpt2Config& c, uint64_t seed, DType dt) {
  Gpt2Model m(c);
  m.init_weights(seed);
  mf::nn::NamedTensors out;
  for (const auto& [name, t] : m.named_parameters()) out.emplace_back(name, mf::contiguous(mf::cast(t.detach(), dt)));
  return out;
}

// A checkpoint's tensors by name (a checkpoint lists them sorted, not in model order).
std::map<std::string, Tensor> by_name(const mf::nn::NamedTensors& t) { return {t.begin(), t.end()}; }

std::string bytes_of(const Tensor& t) {
  Tensor c = mf::contiguous(t);
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

// --- a minimal safetensors writer and reader, independent of io/safetensors.cpp ---------------
struct RawTensor {
  std::string name, dtype;
  Shape shape;
  std::string bytes;
};

const char* st_dtype(DType dt) { return dt == DType::kBF16 ? "BF16" : dt == DType::kF16 ? "F16" : "F32"; }

void write_by_hand(const std::string& path, const std::vector<RawTensor>& ts) {
  json h;
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  const std::string header = h.dump();  // no padding: readers must not rely on alignment
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(len), 8);
  f << header;
  for (const auto& t : ts) f << t.bytes;
}

struct Parsed {
  json metadata;
  std::map<std::string, RawTensor> tensors;
};

// Reads the format from its description: u64 little-endian header size N, N bytes of JSON, data.
// Checks dtype strings, shapes against byte counts, and that the data_offsets tile the data
// section exactly (contiguous, in bounds, no gaps or overlaps).
Parsed parse_by_hand(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Parsed p;
  EXPECT_GE(file.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[static_cast<size_t>(i)]);
  EXPECT_LE(8 + n, file.size());
  json h = json::parse(file.substr(8, n));
  EXPECT_TRUE(h.is_object());
  const std::string data = file.substr(8 + n);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, e] : h.items()) {
    if (name == "__metadata__") {
      p.metadata = e;
      continue;
    }
    RawTensor t;
    t.name = name;
    t.dtype = e.at("dtype").get<std::string>();
    t.shape = e.at("shape").get<Shape>();
    const auto off = e.at("data_offsets").get<std::vector<uint64_t>>();
    const std::map<std::string, uint64_t> size = {{"F32", 4}, {"BF16", 2}, {"F16", 2}, {"F64", 8}};
    EXPECT_TRUE(size.count(t.dtype)) << name << ": dtype " << t.dtype;
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    EXPECT_EQ(off.size(), 2u);
    EXPECT_EQ(off[1] - off[0], numel * (size.count(t.dtype) ? size.at(t.dtype) : 0)) << name;
    EXPECT_LE(off[1], data.size()) << name;
    ranges.emplace_back(off[0], off[1]);
    t.bytes = data.substr(off[0], off[1] - off[0]);
    p.tensors[name] = t;
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [b, e] : ranges) {
    EXPECT_EQ(b, at) << "data_offsets are not contiguous";
    at = e;
  }
  EXPECT_EQ(at, data.size()) << "data section has bytes no tensor owns";
  return p;
}

// A file as the original `gpt2` repository holds it: GPT2Model names (no "transformer."), the
// attention mask buffers, and lm_head.weight (the embedding's bytes).
std::vector<RawTensor> original_style(const mf::nn::NamedTensors& w, int64_t positions) {
  std::vector<RawTensor> out;
  std::string wte;
  for (const auto& [name, t] : w) {
    const std::string short_name = name.substr(std::string("transformer.").size());
    out.push_back({short_name, st_dtype(t.dtype()), t.shape(), bytes_of(t)});
    if (short_name == "wte.weight") wte = out.back().bytes;
    if (short_name.find(".ln_1.bias") != std::string::npos) {
      const std::string block = short_name.substr(0, short_name.find(".ln_1"));
      std::vector<float> mask(static_cast<size_t>(positions * positions));
      for (int64_t i = 0; i < positions; ++i)
        for (int64_t j = 0; j <= i; ++j) mask[static_cast<size_t>(i * positions + j)] = 1;
      out.push_back({block + ".attn.bias", "F32", {1, 1, positions, positions},
                     std::string(reinterpret_cast<const char*>(mask.data()), mask.size() * 4)});
      const float masked = -1e4f;
      out.push_back({block + ".attn.masked_bias", "F32", {}, std::string(reinterpret_cast<const char*>(&masked), 4)});
    }
  }
  out.push_back({"lm_head.weight", out.front().dtype, w.front().second.shape(), wte});
  return out;
}

std::string config_json(const Gpt2Config& c) {
  return "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1, "
         "\"embd_pdrop\": 0.1, \"initializer_range\": 0.02, \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", "
         "\"n_ctx\": " + std::to_string(c.max_seq_length) + ", \"n_embd\": " + std::to_string(c.hidden_size) +
         ", \"n_head\": " + std::to_string(c.num_attention_heads) + ", \"n_layer\": " + std::to_string(c.num_layers) +
         ", \"n_positions\": " + std::to_string(c.max_seq_length) + ", \"n_inner\": " +
         (c.ffn_hidden_size > 0 ? std::to_string(c.ffn_hidden_size) : "null") + ", \"resid_pdrop\": 0.1, \"vocab_size\": " +
         std::to_string(c.vocab_size) + "}";
}

class HfConvert : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) / ("mf_hf_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& p) const { return (dir_ / p).string(); }

  // A training run's output folder as train writes it: config.yaml and checkpoints/iter_N.
  std::string run_dir(const std::string& name, const Gpt2Config& c, const mf::nn::NamedTensors& w) const {
    const std::string d = path(name);
    fs::create_directories(d);
    mf::write_file_atomic(d + "/config.yaml",
                          "model:\n  num_layers: " + std::to_string(c.num_layers) + "\n  hidden_size: " +
                              std::to_string(c.hidden_size) + "\n  num_attention_heads: " +
                              std::to_string(c.num_attention_heads) + "\n  ffn_hidden_size: " +
                              std::to_string(c.ffn_hidden_size) + "\n  max_seq_length: " + std::to_string(c.max_seq_length) +
                              "\n  vocab_size: 50\n  layernorm_epsilon: 1.0e-6\ntokenization:\n  tokenizer: byte\n");
    mf::io::TrainingState st;
    st.iter = 7;
    mf::io::write_checkpoint(d, st, w, {{"transformer.wte.weight.exp_avg", mf::zeros({2}, DType::kF32)}}, 0);
    return d;
  }
  std::string hf_dir(const std::string& name, const std::vector<RawTensor>& ts, const std::string& config) const {
    const std::string d = path(name);
    fs::create_directories(d);
    write_by_hand(d + "/model.safetensors", ts);
    if (!config.empty()) mf::write_file_atomic(d + "/config.json", config);
    return d;
  }
  fs::path dir_;
};

// The weight files' reader every family shares: renamed and dropped tensors, an unknown one, a
// tied copy equal to its parameter (dropped), differing (refused), or standing for it.
TEST_F(HfConvert, WeightRulesRenameDropAndCheckTiedCopies) {
  auto f32 = [](const std::string& name, float a, float b) {
    std::string bytes(8, '\0');
    std::memcpy(bytes.data(), &a, 4);
    std::memcpy(bytes.data() + 4, &b, 4);
    return RawTensor{name, "F32", {2}, bytes};
  };
  mf::models::HfWeightRules r;
  r.rename = [](const std::string& n) { return n == "buffer" ? std::string() : n.starts_with("old.") ? n.substr(4) : n; };
  r.known = [](const std::string& n) { return n == "table" || n == "norm"; };
  r.tied["head"] = {"table", ""};
  r.model = "a toy";
  auto read = [&](const std::string& name, const std::vector<RawTensor>& ts) {
    return mf::models::read_hf_weights({"", {hf_dir(name, ts, "") + "/model.safetensors"}, ""}, r);
  };
  const mf::nn::NamedTensors ok = read("ok", {f32("old.table", 1, 2), f32("buffer", 0, 0), f32("norm", 3, 4), f32("head", 1, 2)});
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[0].first, "table");
  EXPECT_EQ(ok[1].first, "norm");
  EXPECT_EQ(ok[0].second.to_vector<float>(), std::vector<float>({1, 2}));
  MFT_EXPECT_ERROR(read("unknown", {f32("table", 1, 2), f32("other", 0, 0)}), "model.safetensors", "unknown tensor 'other'",
                   "not a parameter of a toy");
  MFT_EXPECT_ERROR(read("untied", {f32("table", 1, 2), f32("head", 1, 3)}), "model.safetensors", "head",
                   "differs from table, to which Hugging Face ties it");
  const mf::nn::NamedTensors alias = read("alias", {f32("norm", 3, 4), f32("head", 5, 6)});
  ASSERT_EQ(alias.size(), 2u);
  EXPECT_EQ(alias[1].first, "table");
  EXPECT_EQ(alias[1].second.to_vector<float>(), std::vector<float>({5, 6}));
}

TEST_F(HfConvert, ParameterShapesAreTheModels) {
  for (int64_t ffn : {0, 48}) {
    Gpt2Model m(tiny(ffn));
    // The shape-only build declares what the allocated one holds.
    const auto shapes = Gpt2Model(tiny(ffn), mf::models::ModelContext::shape_only()).parameter_shapes();
    EXPECT_TRUE(Gpt2Model(tiny(ffn), mf::models::ModelContext::shape_only()).named_parameters().empty());
    const auto named = m.named_parameters();
    const auto layouts = m.parameter_layouts();
    ASSERT_EQ(shapes.size(), named.size());
    for (size_t i = 0; i < named.size(); ++i) {
      EXPECT_EQ(shapes[i].first, named[i].first);
      EXPECT_EQ(shapes[i].second, layouts[i].logical) << named[i].first;
      EXPECT_TRUE(mf::models::gpt2::is_parameter_name(named[i].first)) << named[i].first;
    }
  }
  for (const char* bad : {"transformer.h.0.attn.bias", "transformer.h.x.ln_1.weight", "transformer.h.0.ln_3.weight",
                          "lm_head.weight", "wte.weight"})
    EXPECT_FALSE(mf::models::gpt2::is_parameter_name(bad)) << bad;
}

// Export -> import: every tensor's name, order, dtype and bytes come back, in f32, bf16 and f16;
// the exported model.safetensors and config.json are what transformers' GPT2LMHeadModel reads.
TEST_F(HfConvert, ExportImportRoundTripIsBitIdentical) {
  const Gpt2Config c = tiny(0);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::string tag = mf::dtype_name(dt);
    const auto w = weights(c, 11, dt);
    const std::string run = run_dir("run_" + tag, c, w), hf = path("hf_" + tag), back = path("back_" + tag);
    mf::runtime::convert_to_hf(run, hf);

    Parsed p = parse_by_hand(hf + "/model.safetensors");
    EXPECT_EQ(p.metadata, json({{"format", "pt"}}));
    EXPECT_EQ(p.tensors.size(), w.size());  // no lm_head.weight: tied
    for (const auto& [name, t] : w) {
      ASSERT_TRUE(p.tensors.count(name)) << name;
      const RawTensor& r = p.tensors.at(name);
      EXPECT_EQ(r.dtype, st_dtype(dt)) << name;
      EXPECT_EQ(r.shape, t.shape()) << name;
      EXPECT_TRUE(r.bytes == bytes_of(t)) << name << " bytes differ";
    }
    json cfg = json::parse(mf::read_file(hf + "/config.json"));
    EXPECT_EQ(cfg["architectures"], json({"GPT2LMHeadModel"}));
    EXPECT_EQ(cfg["model_type"], "gpt2");
    EXPECT_EQ(cfg["n_embd"], 16);
    EXPECT_EQ(cfg["n_layer"], 2);
    EXPECT_EQ(cfg["n_head"], 4);
    EXPECT_EQ(cfg["n_positions"], 16);
    EXPECT_TRUE(cfg["n_inner"].is_null());  // 4 * n_embd
    EXPECT_EQ(cfg["vocab_size"], 257);  // from the tensors: config.yaml's 50 was padded to the tokenizer's
    EXPECT_DOUBLE_EQ(cfg["layer_norm_epsilon"].get<double>(), 1e-6);
    EXPECT_EQ(cfg["torch_dtype"], dt == DType::kF32 ? "float32" : dt == DType::kBF16 ? "bfloat16" : "float16");

    mf::runtime::convert_from_hf(hf, back);
    auto ckpt = mf::io::read_latest_checkpoint(back);
    ASSERT_TRUE(ckpt.has_value());
    EXPECT_EQ(ckpt->state.iter, 0);
    EXPECT_TRUE(ckpt->optimizer.empty());
    ASSERT_EQ(ckpt->model.size(), w.size());
    const auto got = by_name(ckpt->model);
    for (const auto& [name, t] : w) {
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_EQ(got.at(name).dtype(), dt) << name;
      EXPECT_TRUE(bytes_of(got.at(name)) == bytes_of(t)) << name << " bytes differ";
    }
    // The converted checkpoint describes itself: exporting it again gives the same files.
    const mf::runtime::ModelWeights again = mf::runtime::read_model_weights(back);
    EXPECT_TRUE(again.has_config);
    EXPECT_EQ(again.config.get_int("model.num_attention_heads"), 4);
    EXPECT_EQ(mf::models::gpt2_config(again.config, 0).ffn(), 64);
    mf::runtime::convert_to_hf(back, path("hf2_" + tag));
    EXPECT_EQ(mf::read_file(path("hf2_" + tag) + "/model.safetensors"), mf::read_file(hf + "/model.safetensors"));
    EXPECT_EQ(mf::read_file(path("hf2_" + tag) + "/config.json"), mf::read_file(hf + "/config.json"));
    // Every spelling of a meshflow checkpoint reads the same tensors.
    const std::string iter_dir = back + "/checkpoints/iter_0000000";
    for (const std::string& p2 : {iter_dir, iter_dir + "/shard_00000.safetensors", run, run + "/"})
      EXPECT_EQ(mf::runtime::read_model_weights(p2).tensors.size(), w.size()) << p2;
  }
}

// The original gpt2 repository's spelling, written by hand, in f32 and bf16: imports to the
// same tensors, and a model loaded from it (bf16 cast to f32) gives the logits and loss of the
// model with those weights set directly; sharded files (an index) read the same.
TEST_F(HfConvert, ImportsAnOriginalStyleFileAndLoadsIntoAModel) {
  const Gpt2Config c = tiny();
  Tensor ids = mf::from_vector<int64_t>({3, 200, 17, 5, 9, 256, 0, 42, 7, 7, 100, 31, 64, 128, 1, 2}, {2, 8});
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const std::string tag = mf::dtype_name(dt);
    const auto w = weights(c, 5, dt);
    const std::string hf = hf_dir("orig_" + tag, original_style(w, c.max_seq_length), config_json(c));
    const std::string ck = path("ck_" + tag);
    mf::runtime::convert_from_hf(hf, ck);
    auto ckpt = mf::io::read_latest_checkpoint(ck);
    ASSERT_EQ(ckpt->model.size(), w.size());
    const auto got = by_name(ckpt->model);
    for (const auto& [name, t] : w) {
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_TRUE(bytes_of(got.at(name)) == bytes_of(t)) << name;
    }
    Gpt2Model direct(c), loaded(c);
    loaded.init_weights(99);
    mf::nn::NamedTensors f32;
    for (const auto& [name, t] : w) f32.emplace_back(name, mf::cast(t, DType::kF32));
    direct.load_state_dict(f32);
    for (const std::string& src : {hf, hf + "/model.safetensors", ck}) {
      const std::string what = mf::runtime::load_model_weights(loaded, mf::runtime::read_model_weights(src));
      if (dt == DType::kBF16) {
        EXPECT_NE(what.find("bf16 cast to f32"), std::string::npos) << what;
      }
      direct.eval();
      loaded.eval();
      EXPECT_EQ(loaded.logits(ids).to_vector<float>(), direct.logits(ids).to_vector<float>()) << src;
      EXPECT_EQ(loaded.loss(ids, ids).item(), direct.loss(ids, ids).item()) << src;
    }
  }
  // Sharded: two files and model.safetensors.index.json.
  const auto w = weights(c, 5, DType::kF32);
  auto all = original_style(w, c.max_seq_length);
  const std::string d = path("sharded");
  fs::create_directories(d);
  std::vector<RawTensor> a(all.begin(), all.begin() + 10), b(all.begin() + 10, all.end());
  write_by_hand(d + "/model-00001-of-00002.safetensors", a);
  write_by_hand(d + "/model-00002-of-00002.safetensors", b);
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  for (const auto& t : a) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : b) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  mf::write_file_atomic(d + "/model.safetensors.index.json", index.dump());
  mf::write_file_atomic(d + "/config.json", config_json(c));
  const auto sharded = mf::runtime::read_model_weights(d);
  ASSERT_EQ(sharded.tensors.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(bytes_of(sharded.tensors[i].second) == bytes_of(w[i].second));
}

// The Llama family as Hugging Face writes it (config.json by hand with its names; bf16 weights;
// Llama with 2 key/value heads, an untied head and Llama 3.1 rope scaling; Qwen2 with q/k/v
// biases and a tied lm_head.weight stored beside the embedding; Mistral with a sliding window),
// from one file and from two shards with an index: import -> export gives every tensor back bit
// for bit and a config.json with the same values, and the imported checkpoint computes the logits
// of the model with those weights set directly.
TEST_F(HfConvert, LlamaFamilyRoundTripIsBitIdentical) {
  using mf::models::LlamaConfig;
  using mf::models::LlamaVariant;
  struct Variant {
    const char* type;
    json extra;
  };
  const std::vector<Variant> variants = {
      {"llama", {{"architectures", {"LlamaForCausalLM"}}, {"num_key_value_heads", 2}, {"tie_word_embeddings", false},
                 {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                   {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8}}},
                 {"attention_bias", false}, {"mlp_bias", false}}},
      {"qwen2", {{"architectures", {"Qwen2ForCausalLM"}}, {"num_key_value_heads", 1}, {"tie_word_embeddings", true},
                 {"rope_theta", 1000000.0}, {"use_sliding_window", false}}},
      {"mistral", {{"architectures", {"MistralForCausalLM"}}, {"num_key_value_heads", 2}, {"tie_word_embeddings", false},
                   {"sliding_window", 5}}}};
  Tensor ids = mf::from_vector<int64_t>({3, 200, 17, 5, 9, 256, 0, 42, 7, 7, 100, 31}, {2, 6});
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.type);
    json cfg = {{"model_type", v.type}, {"vocab_size", 257}, {"hidden_size", 16}, {"intermediate_size", 40},
                {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"max_position_embeddings", 16},
                {"rms_norm_eps", 1e-6}, {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"}};
    for (auto& [k, val] : v.extra.items()) cfg[k] = val;
    const std::string cfg_path = path(std::string(v.type) + "_cfg.json");
    mf::write_file_atomic(cfg_path, cfg.dump(2));
    const LlamaConfig lc = mf::models::llama_config(hf_model_keys(cfg_path), 0);
    mf::models::LlamaModel model(lc);
    model.init_weights(3);
    std::vector<RawTensor> raw;
    mf::nn::NamedTensors w;
    for (const auto& [name, t] : model.named_parameters()) {
      w.emplace_back(name, mf::contiguous(mf::cast(t.detach(), DType::kBF16)));
      raw.push_back({name, "BF16", t.shape(), bytes_of(w.back().second)});
    }
    if (lc.tie_word_embeddings) raw.push_back({"lm_head.weight", "BF16", raw.front().shape, raw.front().bytes});
    // One file, and two shards with an index.
    const std::string one = hf_dir(std::string(v.type) + "_one", raw, cfg.dump(2));
    const std::string two = path(std::string(v.type) + "_two");
    fs::create_directories(two);
    const size_t half = raw.size() / 2;
    write_by_hand(two + "/model-00001-of-00002.safetensors", {raw.begin(), raw.begin() + static_cast<ptrdiff_t>(half)});
    write_by_hand(two + "/model-00002-of-00002.safetensors", {raw.begin() + static_cast<ptrdiff_t>(half), raw.end()});
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    for (size_t i = 0; i < raw.size(); ++i)
      index["weight_map"][raw[i].name] = i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    mf::write_file_atomic(two + "/model.safetensors.index.json", index.dump());
    mf::write_file_atomic(two + "/config.json", cfg.dump(2));
    for (const std::string& src : {one, two}) {
      const std::string ck = src + "_ck", out = src + "_hf";
      mf::runtime::convert_from_hf(src, ck);
      mf::runtime::convert_to_hf(ck, out);
      Parsed p = parse_by_hand(out + "/model.safetensors");
      EXPECT_EQ(p.tensors.size(), w.size()) << src;  // a tied lm_head.weight is not written
      for (const auto& [name, t] : w) {
        ASSERT_TRUE(p.tensors.count(name)) << name;
        EXPECT_EQ(p.tensors.at(name).dtype, "BF16") << name;
        EXPECT_TRUE(p.tensors.at(name).bytes == bytes_of(t)) << name << " bytes differ";
      }
      const json back = json::parse(mf::read_file(out + "/config.json"));
      for (auto& [k, val] : cfg.items()) {
        if (k == "rope_scaling") {
          for (auto& [rk, rv] : val.items()) EXPECT_EQ(back[k][rk], rv) << k << "." << rk;
        } else {
          EXPECT_EQ(back[k], val) << k;
        }
      }
      // The imported weights compute what the model with them set directly computes.
      mf::models::LlamaModel direct(lc), loaded(lc);
      mf::nn::NamedTensors f32;
      for (const auto& [name, t] : w) f32.emplace_back(name, mf::cast(t, DType::kF32));
      direct.load_state_dict(f32);
      mf::runtime::load_model_weights(loaded, mf::runtime::read_model_weights(ck));
      EXPECT_EQ(loaded.logits(ids).to_vector<float>(), direct.logits(ids).to_vector<float>()) << src;
    }
  }
}

// GPTNeoXForCausalLM files as Hugging Face writes them (config.json by hand with its names, bf16
// weights, the causal-mask and rotary buffers older files hold), with the parallel residual and a
// quarter of each head rotated, and with the sequential residual: import -> export gives every
// parameter back bit for bit (the buffers dropped) and a config.json with the same values, and the
// imported checkpoint computes the logits of the model with those weights set directly.
TEST_F(HfConvert, GptNeoxRoundTripIsBitIdentical) {
  Tensor ids = mf::from_vector<int64_t>({3, 200, 17, 5, 9, 256, 0, 42, 7, 7, 100, 31}, {2, 6});
  for (const bool parallel_residual : {true, false}) {
    SCOPED_TRACE(parallel_residual ? "parallel" : "sequential");
    const json cfg = {{"model_type", "gpt_neox"}, {"architectures", {"GPTNeoXForCausalLM"}}, {"vocab_size", 257},
                      {"hidden_size", 16}, {"intermediate_size", 40}, {"num_hidden_layers", 2},
                      {"num_attention_heads", 2}, {"max_position_embeddings", 16}, {"layer_norm_eps", 1e-5},
                      {"rotary_pct", parallel_residual ? 0.25 : 1.0}, {"rotary_emb_base", 10000.0},
                      {"use_parallel_residual", parallel_residual}, {"hidden_act", "gelu"},
                      {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}};
    const std::string tag = parallel_residual ? "neox_par" : "neox_seq";
    const std::string cfg_path = path(tag + "_cfg.json");
    mf::write_file_atomic(cfg_path, cfg.dump(2));
    const mf::models::GptNeoxConfig nc = mf::models::gpt_neox_config(hf_model_keys(cfg_path), 0);
    EXPECT_EQ(nc.rotary_dims(), parallel_residual ? 2 : 8);
    mf::models::GptNeoxModel model(nc);
    model.init_weights(3);
    std::vector<RawTensor> raw;
    mf::nn::NamedTensors w;
    for (const auto& [name, t] : model.named_parameters()) {
      w.emplace_back(name, mf::contiguous(mf::cast(t.detach(), DType::kBF16)));
      raw.push_back({name, "BF16", t.shape(), bytes_of(w.back().second)});
    }
    // Buffers of older files: the causal mask (bool), its fill value and the rotary frequencies.
    for (int l = 0; l < 2; ++l) {
      const std::string p = "gpt_neox.layers." + std::to_string(l) + ".attention.";
      raw.push_back({p + "bias", "BOOL", {1, 1, 16, 16}, std::string(256, '\1')});
      raw.push_back({p + "masked_bias", "F32", {}, std::string(4, '\0')});
      raw.push_back({p + "rotary_emb.inv_freq", "F32", {1}, std::string(4, '\0')});
    }
    const std::string src = hf_dir(tag, raw, cfg.dump(2)), ck = src + "_ck", out = src + "_hf";
    mf::runtime::convert_from_hf(src, ck);
    mf::runtime::convert_to_hf(ck, out);
    Parsed p = parse_by_hand(out + "/model.safetensors");
    EXPECT_EQ(p.tensors.size(), w.size());
    for (const auto& [name, t] : w) {
      ASSERT_TRUE(p.tensors.count(name)) << name;
      EXPECT_EQ(p.tensors.at(name).dtype, "BF16") << name;
      EXPECT_TRUE(p.tensors.at(name).bytes == bytes_of(t)) << name << " bytes differ";
    }
    const json back = json::parse(mf::read_file(out + "/config.json"));
    for (auto& [k, val] : cfg.items()) EXPECT_EQ(back[k], val) << k;
    mf::models::GptNeoxModel direct(nc), loaded(nc);
    mf::nn::NamedTensors f32;
    for (const auto& [name, t] : w) f32.emplace_back(name, mf::cast(t, DType::kF32));
    direct.load_state_dict(f32);
    mf::runtime::load_model_weights(loaded, mf::runtime::read_model_weights(ck));
    EXPECT_EQ(loaded.logits(ids).to_vector<float>(), direct.logits(ids).to_vector<float>());
  }
}

// BertForPreTraining, RobertaForMaskedLM and BertForSequenceClassification files as Hugging Face
// writes them (position_ids buffers, the tied decoder weight and bias, roberta-base's unused
// pooler) convert in and out with every parameter bit-identical and the decoder bias written back;
// the imported weights compute what the model with them set directly computes; and a pretraining
// file loads into a classifier with the encoder's weights, the classifier newly initialised.
TEST_F(HfConvert, BertFamilyRoundTripIsBitIdentical) {
  using mf::models::BertConfig;
  using mf::models::BertModel;
  struct Variant {
    const char* name;
    json cfg;
  };
  const json common = {{"vocab_size", 61}, {"hidden_size", 16}, {"intermediate_size", 40}, {"num_hidden_layers", 2},
                       {"num_attention_heads", 4}, {"hidden_act", "gelu"}, {"layer_norm_eps", 1e-12},
                       {"torch_dtype", "bfloat16"}};
  std::vector<Variant> variants = {
      {"bert", {{"model_type", "bert"}, {"architectures", {"BertForPreTraining"}}, {"max_position_embeddings", 16},
                {"type_vocab_size", 2}, {"pad_token_id", 0}}},
      {"roberta", {{"model_type", "roberta"}, {"architectures", {"RobertaForMaskedLM"}}, {"max_position_embeddings", 18},
                   {"type_vocab_size", 1}, {"pad_token_id", 1}}},
      {"bert_cls", {{"model_type", "bert"}, {"architectures", {"BertForSequenceClassification"}},
                    {"max_position_embeddings", 16}, {"type_vocab_size", 2}, {"pad_token_id", 0},
                    {"id2label", {{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}}}}}};
  mf::models::Batch batch(mf::from_vector<int64_t>({2, 20, 17, 5, 9, 3, 4, 42, 7, 0, 0, 0}, {2, 6}),
                          mf::from_vector<int64_t>({-100, 20, -100, -100, 9, -100, -100, -100, 7, -100, -100, -100}, {2, 6}));
  const Tensor types = mf::from_vector<int64_t>({0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0}, {2, 6});
  batch.attention_mask = mf::from_vector<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, {2, 6});
  std::string pretraining_ck;
  for (Variant& v : variants) {
    SCOPED_TRACE(v.name);
    for (auto& [k, val] : common.items()) v.cfg[k] = val;
    const std::string cfg_path = path(std::string(v.name) + "_cfg.json");
    mf::write_file_atomic(cfg_path, v.cfg.dump(2));
    const BertConfig bc = mf::models::bert_config(hf_model_keys(cfg_path), 0);
    BertModel model(bc);
    model.init_weights(3);
    std::vector<RawTensor> raw;
    mf::nn::NamedTensors w;
    std::string word, bias;
    for (const auto& [name, t] : model.named_parameters()) {
      w.emplace_back(name, mf::contiguous(mf::cast(t.detach(), DType::kBF16)));
      raw.push_back({name, "BF16", t.shape(), bytes_of(w.back().second)});
      if (name.find("word_embeddings") != std::string::npos) word = raw.back().bytes;
      if (name == "cls.predictions.bias" || name == "lm_head.bias") bias = raw.back().bytes;
    }
    const std::string p = bc.prefix();
    Tensor positions = mf::arange(bc.position_rows(), DType::kI64);
    raw.push_back({p + "embeddings.position_ids", "I64", {1, bc.position_rows()}, bytes_of(positions)});
    if (bc.task == mf::models::BertTask::kPretraining) {
      const std::string dec = bc.variant == mf::models::BertVariant::kRoberta ? "lm_head.decoder." : "cls.predictions.decoder.";
      raw.push_back({dec + "weight", "BF16", {bc.vocab_size, bc.hidden_size}, word});
      raw.push_back({dec + "bias", "BF16", {bc.vocab_size}, bias});
    }
    if (bc.variant == mf::models::BertVariant::kRoberta) {  // roberta-base's file holds a pooler
      raw.push_back({"roberta.pooler.dense.weight", "BF16", {16, 16}, raw[5].bytes.substr(0, 16 * 16 * 2)});
      raw.push_back({"roberta.pooler.dense.bias", "BF16", {16}, std::string(32, '\0')});
    }
    const std::string src = hf_dir(std::string(v.name) + "_one", raw, v.cfg.dump(2));
    const std::string ck = src + "_ck", out = src + "_hf";
    mf::runtime::convert_from_hf(src, ck);
    mf::runtime::convert_to_hf(ck, out);
    if (bc.nsp()) pretraining_ck = ck;
    Parsed parsed = parse_by_hand(out + "/model.safetensors");
    for (const auto& [name, t] : w) {
      ASSERT_TRUE(parsed.tensors.count(name)) << name;
      EXPECT_EQ(parsed.tensors.at(name).dtype, "BF16") << name;
      EXPECT_TRUE(parsed.tensors.at(name).bytes == bytes_of(t)) << name << " bytes differ";
    }
    const size_t extra = bc.task == mf::models::BertTask::kPretraining ? 1 : 0;  // the decoder's bias
    EXPECT_EQ(parsed.tensors.size(), w.size() + extra);
    const json back = json::parse(mf::read_file(out + "/config.json"));
    for (auto& [k, val] : v.cfg.items()) EXPECT_EQ(back[k], val) << k;
    batch.token_type_ids = bc.num_tokentypes > 1 ? types : mf::zeros({2, 6}, DType::kI64);
    BertModel direct(bc), loaded(bc);
    direct.eval();
    loaded.eval();
    mf::nn::NamedTensors f32;
    for (const auto& [name, t] : w) f32.emplace_back(name, mf::cast(t, DType::kF32));
    direct.load_state_dict(f32);
    mf::runtime::load_model_weights(loaded, mf::runtime::read_model_weights(ck));
    EXPECT_EQ(loaded.hidden_states(batch).to_vector<float>(), direct.hidden_states(batch).to_vector<float>());
    if (bc.pooler()) {
      EXPECT_EQ(loaded.pooled_logits(batch).to_vector<float>(), direct.pooled_logits(batch).to_vector<float>());
    }
    if (bc.task == mf::models::BertTask::kPretraining) {
      EXPECT_EQ(loaded.mlm_logits(batch).to_vector<float>(), direct.mlm_logits(batch).to_vector<float>());
    }
  }
  // Fine-tuning: the pretraining checkpoint into a classifier of 4 labels.
  BertConfig cc = mf::models::bert_config(hf_model_keys(path("bert_cls_cfg.json")), 0);
  cc.num_labels = 4;
  BertModel cls(cc), pre(mf::models::bert_config(hf_model_keys(path("bert_cfg.json")), 0));
  cls.init_weights(9);
  std::map<std::string, std::string> fresh;
  for (const auto& [name, t] : cls.named_parameters()) fresh[name] = bytes_of(t);
  MFT_EXPECT_ERROR(mf::runtime::load_model_weights(cls, mf::runtime::read_model_weights(pretraining_ck)),
                   "unexpected tensor 'cls.predictions.bias'");  // strict unless new heads are asked for (evaluation)
  const std::string note = mf::runtime::load_model_weights(cls, mf::runtime::read_model_weights(pretraining_ck), true);
  EXPECT_NE(note.find("newly initialised: classifier.weight classifier.bias"), std::string::npos) << note;
  mf::runtime::load_model_weights(pre, mf::runtime::read_model_weights(pretraining_ck));
  const auto pre_w = by_name(pre.named_parameters());
  for (const auto& [name, t] : cls.named_parameters()) {
    const bool head = name.compare(0, 11, "classifier.") == 0;
    EXPECT_TRUE(bytes_of(t) == (head ? fresh.at(name) : bytes_of(pre_w.at(name)))) << name;
  }
}

// T5 v1.0 (tied) and v1.1 (untied, gated-GELU) files: Hugging Face -> meshflow checkpoint ->
// Hugging Face gives every tensor back bit for bit and the same config.json; the files' aliases of
// the shared embedding (encoder/decoder embed_tokens, a tied lm_head) are checked and dropped; the
// converted model computes what the weights loaded directly compute.
TEST_F(HfConvert, T5RoundTripIsBitIdentical) {
  using mf::models::T5Config;
  using mf::models::T5Model;
  const json common = {{"vocab_size", 40}, {"d_model", 16}, {"d_kv", 6}, {"d_ff", 24}, {"num_layers", 2},
                       {"num_decoder_layers", 3}, {"num_heads", 2}, {"relative_attention_num_buckets", 8},
                       {"relative_attention_max_distance", 20}, {"dropout_rate", 0.1}, {"layer_norm_epsilon", 1e-6},
                       {"initializer_factor", 1.0}, {"pad_token_id", 0}, {"eos_token_id", 1},
                       {"decoder_start_token_id", 0}, {"is_encoder_decoder", true}, {"torch_dtype", "bfloat16"}};
  struct Variant {
    const char* name;
    json cfg;
  };
  std::vector<Variant> variants = {
      {"t5", {{"model_type", "t5"}, {"architectures", {"T5ForConditionalGeneration"}}, {"feed_forward_proj", "relu"},
              {"tie_word_embeddings", true}}},
      {"mt5", {{"model_type", "mt5"}, {"architectures", {"MT5ForConditionalGeneration"}},
               {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}}};
  mf::models::Batch batch(mf::from_vector<int64_t>({5, 9, 3, 7, 1, 8, 4, 1, 0, 0}, {2, 5}),
                          mf::from_vector<int64_t>({32, 6, 1, 39, 11, 1, -100, -100}, {2, 4}));
  batch.attention_mask = mf::from_vector<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 5});
  batch.decoder_input_ids = mf::from_vector<int64_t>({0, 32, 6, 1, 0, 39, 11, 0}, {2, 4});
  batch.decoder_attention_mask = mf::from_vector<int64_t>({1, 1, 1, 1, 1, 1, 0, 0}, {2, 4});
  for (Variant& v : variants) {
    SCOPED_TRACE(v.name);
    for (auto& [k, val] : common.items()) v.cfg[k] = val;
    const std::string cfg_path = path(std::string(v.name) + "_cfg.json");
    mf::write_file_atomic(cfg_path, v.cfg.dump(2));
    const T5Config tc = mf::models::t5_config(hf_model_keys(cfg_path), 0);
    T5Model model(tc);
    model.init_weights(5);
    std::vector<RawTensor> raw;
    mf::nn::NamedTensors w;
    std::string shared;
    for (const auto& [name, t] : model.named_parameters()) {
      w.emplace_back(name, mf::contiguous(mf::cast(t.detach(), DType::kBF16)));
      raw.push_back({name, "BF16", t.shape(), bytes_of(w.back().second)});
      if (name == "shared.weight") shared = raw.back().bytes;
    }
    for (const char* alias : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"})
      raw.push_back({alias, "BF16", {tc.vocab_size, tc.hidden_size}, shared});
    if (tc.tie_word_embeddings) raw.push_back({"lm_head.weight", "BF16", {tc.vocab_size, tc.hidden_size}, shared});
    const std::string src = hf_dir(std::string(v.name) + "_one", raw, v.cfg.dump(2));
    const std::string ck = src + "_ck", out = src + "_hf";
    mf::runtime::convert_from_hf(src, ck);
    mf::runtime::convert_to_hf(ck, out);
    Parsed parsed = parse_by_hand(out + "/model.safetensors");
    for (const auto& [name, t] : w) {
      ASSERT_TRUE(parsed.tensors.count(name)) << name;
      EXPECT_EQ(parsed.tensors.at(name).dtype, "BF16") << name;
      EXPECT_TRUE(parsed.tensors.at(name).bytes == bytes_of(t)) << name << " bytes differ";
    }
    EXPECT_EQ(parsed.tensors.size(), w.size());
    const json back = json::parse(mf::read_file(out + "/config.json"));
    for (auto& [k, val] : v.cfg.items()) EXPECT_EQ(back[k], val) << k;
    T5Model direct(tc), loaded(tc);
    direct.eval();
    loaded.eval();
    mf::nn::NamedTensors f32;
    for (const auto& [name, t] : w) f32.emplace_back(name, mf::cast(t, DType::kF32));
    direct.load_state_dict(f32);
    mf::runtime::load_model_weights(loaded, mf::runtime::read_model_weights(ck));
    EXPECT_EQ(loaded.logits(batch).to_vector<float>(), direct.logits(batch).to_vector<float>());
  }
  // An alias that is not the shared embedding is refused.
  json cfg = variants[0].cfg;
  T5Model model(mf::models::t5_config(hf_model_keys(path("t5_cfg.json")), 0));
  model.init_weights(1);
  std::vector<RawTensor> raw;
  for (const auto& [name, t] : model.named_parameters())
    raw.push_back({name, "F32", t.shape(), bytes_of(mf::contiguous(t.detach()))});
  Tensor other = mf::zeros({40, 16}, DType::kF32);
  raw.push_back({"decoder.embed_tokens.weight", "F32", {40, 16}, bytes_of(other)});
  const std::string bad = hf_dir("t5_bad", raw, cfg.dump(2));
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(bad, bad + "_ck"), "decoder.embed_tokens.weight");
}

// ViTForImageClassification: Hugging Face -> meshflow checkpoint -> Hugging Face gives every tensor
// back bit for bit and the same config.json (a ViTModel file's pooler dropped); loading into a model
// of another image size interpolates the position embeddings, and into one of another class count
// starts a new classifier.
TEST_F(HfConvert, VitRoundTripIsBitIdentical) {
  using mf::models::VitConfig;
  using mf::models::VitModel;
  json cfg = {{"model_type", "vit"}, {"architectures", {"ViTForImageClassification"}}, {"image_size", 12},
              {"patch_size", 4}, {"num_channels", 3}, {"hidden_size", 16}, {"num_hidden_layers", 2},
              {"num_attention_heads", 4}, {"intermediate_size", 24}, {"hidden_act", "gelu"}, {"layer_norm_eps", 1e-12},
              {"qkv_bias", true}, {"torch_dtype", "bfloat16"},
              {"id2label", {{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}}}};
  const std::string cfg_path = path("vit_cfg.json");
  mf::write_file_atomic(cfg_path, cfg.dump(2));
  const VitConfig vc = mf::models::vit_config(hf_model_keys(cfg_path));
  ASSERT_EQ(vc.num_labels, 3);
  VitModel model(vc);
  model.init_weights(4);
  std::vector<RawTensor> raw;
  mf::nn::NamedTensors w;
  for (const auto& [name, t] : model.named_parameters()) {
    w.emplace_back(name, mf::contiguous(mf::cast(t.detach(), DType::kBF16)));
    raw.push_back({name, "BF16", t.shape(), bytes_of(w.back().second)});
  }
  raw.push_back({"vit.pooler.dense.weight", "BF16", {16, 16}, raw[4].bytes.substr(0, 16 * 16 * 2)});
  const std::string src = hf_dir("vit_one", raw, cfg.dump(2));
  const std::string ck = src + "_ck", out = src + "_hf";
  mf::runtime::convert_from_hf(src, ck);
  mf::runtime::convert_to_hf(ck, out);
  Parsed parsed = parse_by_hand(out + "/model.safetensors");
  for (const auto& [name, t] : w) {
    ASSERT_TRUE(parsed.tensors.count(name)) << name;
    EXPECT_TRUE(parsed.tensors.at(name).bytes == bytes_of(t)) << name << " bytes differ";
  }
  EXPECT_EQ(parsed.tensors.size(), w.size());
  const json back = json::parse(mf::read_file(out + "/config.json"));
  for (auto& [k, val] : cfg.items()) EXPECT_EQ(back[k], val) << k;
  mf::models::Batch batch;
  batch.pixel_values = mf::cast(mf::from_vector(std::vector<double>(2 * 3 * 12 * 12, 0.25), {2, 3, 12, 12}), DType::kF32);
  for (int64_t i = 0; i < batch.pixel_values.numel(); ++i) batch.pixel_values.data<float>()[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
  VitModel direct(vc), loaded(vc);
  direct.eval();
  loaded.eval();
  mf::nn::NamedTensors f32;
  for (const auto& [name, t] : w) f32.emplace_back(name, mf::cast(t, DType::kF32));
  direct.load_state_dict(f32);
  mf::runtime::load_model_weights(loaded, mf::runtime::read_model_weights(ck));
  EXPECT_EQ(loaded.logits(batch).to_vector<float>(), direct.logits(batch).to_vector<float>());
  // Another image size (16: a 4x4 grid) and class count (7): interpolated positions, a new head.
  VitConfig other = vc;
  other.image_size = 16;
  other.num_labels = 7;
  VitModel bigger(other);
  bigger.init_weights(5);
  const std::string note = mf::runtime::load_model_weights(bigger, mf::runtime::read_model_weights(src), true);
  EXPECT_NE(note.find("position embeddings interpolated from 3x3 to 4x4"), std::string::npos) << note;
  EXPECT_NE(note.find("newly initialised: classifier.weight classifier.bias"), std::string::npos) << note;
  const auto got = by_name(bigger.named_parameters());
  const Tensor expect = mf::models::vit_interpolate_positions(mf::cast(by_name(w).at("vit.embeddings.position_embeddings"), DType::kF32), 4);
  EXPECT_EQ(got.at("vit.embeddings.position_embeddings").to_vector<float>(), expect.to_vector<float>());
}

// `meshflow train model.pretrained=...` starts from the weights: with lr 0 the run's checkpoint
// holds them exactly (cast to the model's f32).
TEST_F(HfConvert, TrainingStartsFromPretrainedWeights) {
  const Gpt2Config c = tiny();
  const auto w = weights(c, 8, DType::kBF16);
  const std::string hf = hf_dir("pre", original_style(w, c.max_seq_length), config_json(c));
  std::string text;
  for (int d = 0; d < 60; ++d) text += "the cat sat on the mat and the dog ran far away " + std::to_string(d) + "\n%\n";
  mf::write_file_atomic(path("corpus.txt"), text);
  mf::ByteTokenizer tok;
  const std::string prefix = mf::preprocess({path("corpus.txt")}, path("corpus"), tok).prefix;
  mf::Config cfg;
  for (const char* kv : {"model.num_layers=2", "model.hidden_size=16", "model.num_attention_heads=4",
                         "model.ffn_hidden_size=48", "model.max_seq_length=16", "model.vocab_size=257",
                         "train.train_iter=1", "train.train_micro_batch_size=2", "train.evaluation.enabled=false",
                         "tokenization.tokenizer=byte", "optim.lr=0"})
    cfg.apply_override(kv);
  cfg.set("data.data_prefix", prefix);
  cfg.set("train.output_dir", path("out"));
  cfg.set("model.pretrained", hf);
  std::FILE* log = std::tmpfile();
  mf::train::run_training(cfg, log);
  std::rewind(log);
  char line[512] = {};
  ASSERT_NE(std::fgets(line, sizeof line, log), nullptr);
  std::fclose(log);
  EXPECT_NE(std::string(line).find("model.pretrained: 28 tensors"), std::string::npos) << line;
  auto ckpt = mf::io::read_latest_checkpoint(path("out"));
  ASSERT_TRUE(ckpt.has_value());
  ASSERT_EQ(ckpt->model.size(), w.size());
  const auto got = by_name(ckpt->model);
  for (const auto& [name, t] : w) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(bytes_of(got.at(name)) == bytes_of(mf::cast(t, DType::kF32))) << name;
  }
}

TEST_F(HfConvert, BadInputNamesTheFileAndTheTensor) {
  const Gpt2Config c = tiny();
  const auto w = weights(c, 3, DType::kF32);
  const auto good = original_style(w, c.max_seq_length);
  // No config.json.
  const std::string no_cfg = hf_dir("no_cfg", good, "");
  const std::string no_cfg_json = no_cfg + "/config.json";
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(no_cfg, path("o1")), no_cfg_json.c_str(), "not found");
  EXPECT_FALSE(fs::exists(path("o1")));
  // A tensor of the wrong shape.
  auto bad_shape = good;
  for (auto& t : bad_shape)
    if (t.name == "h.1.mlp.c_fc.weight") {
      t.shape = {16, 40};
      t.bytes.resize(16 * 40 * 4);
    }
  const std::string shape_dir = hf_dir("shape", bad_shape, config_json(c));
  const std::string shape_file = shape_dir + "/model.safetensors";
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(shape_dir, path("o2")), shape_file.c_str(),
                   "'transformer.h.1.mlp.c_fc.weight' is (16, 40)", "config.json expects (16, 48)");
  // An unknown tensor.
  auto unknown = good;
  unknown.push_back({"h.0.attn.q_proj.weight", "F32", {2}, std::string(8, '\0')});
  const std::string unknown_dir = hf_dir("unknown", unknown, config_json(c));
  const std::string unknown_file = unknown_dir + "/model.safetensors";
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(unknown_dir, path("o3")), unknown_file.c_str(),
                   "unknown tensor 'h.0.attn.q_proj.weight'");
  // A missing tensor, a layer the config does not have.
  auto missing = good;
  missing.erase(std::remove_if(missing.begin(), missing.end(), [](const RawTensor& t) { return t.name == "ln_f.bias"; }),
                missing.end());
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(hf_dir("missing", missing, config_json(c)), path("o4")),
                   "no tensor 'transformer.ln_f.bias'");
  Gpt2Config one_layer = c;
  one_layer.num_layers = 1;
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(hf_dir("layers", good, config_json(one_layer)), path("o5")),
                   "unexpected tensor 'transformer.h.1.ln_1.weight'", "num_layers 1");
  // An untied head.
  auto untied = good;
  untied.back().bytes[0] ^= 1;
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(hf_dir("untied", untied, config_json(c)), path("o6")), "lm_head.weight",
                   "differs from the token embedding");
  // Another architecture.
  json relu = json::parse(config_json(c));
  relu["activation_function"] = "relu";
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(hf_dir("relu", good, relu.dump()), path("o7")), "config.json",
                   "activation_function 'relu'");
  // model.pretrained: the weights must fit the model config.
  const std::string hf = hf_dir("ok", good, config_json(c));
  Gpt2Config wider = c;
  wider.hidden_size = 32;
  wider.num_attention_heads = 4;
  Gpt2Model wide(wider);
  MFT_EXPECT_ERROR(mf::runtime::load_model_weights(wide, mf::runtime::read_model_weights(hf)),
                   "tensor 'transformer.wte.weight' is (257, 16), the model config expects (257, 32)");
  Gpt2Config two_heads = c;
  two_heads.num_attention_heads = 2;
  Gpt2Model m2(two_heads);
  MFT_EXPECT_ERROR(mf::runtime::load_model_weights(m2, mf::runtime::read_model_weights(hf)), "config.json gives n_head 4",
                   "model.num_attention_heads 2");
  MFT_EXPECT_ERROR(mf::runtime::read_model_weights(path("nope")), "nope: no such file or directory");
  // --to-hf needs the run's config.yaml (the heads are not in the weights); not an HF folder.
  const std::string run = run_dir("run", c, w);
  fs::remove(run + "/config.yaml");
  MFT_EXPECT_ERROR(mf::runtime::convert_to_hf(run, path("o8")), "no config.yaml", "attention heads");
  MFT_EXPECT_ERROR(mf::runtime::convert_to_hf(hf, path("o9")), "already a Hugging Face model");
  // --from-hf does not overwrite a run.
  mf::runtime::convert_from_hf(hf, path("o10"));
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(hf, path("o10")), "already holds checkpoints", "nothing is overwritten");
  // Nor a file, nor a Hugging Face model already exported.
  mf::write_file_atomic(path("o11"), "keep me");
  MFT_EXPECT_ERROR(mf::runtime::convert_from_hf(hf, path("o11")), "--output", "o11 is an existing file");
  MFT_EXPECT_ERROR(mf::runtime::convert_to_hf(path("o10"), path("o11")), "o11 is an existing file");
  EXPECT_EQ(mf::read_file(path("o11")), "keep me");
  mf::runtime::convert_to_hf(path("o10"), path("o12"));
  MFT_EXPECT_ERROR(mf::runtime::convert_to_hf(path("o10"), path("o12")), "already holds model.safetensors");
}

// ---- model.pretrained takes the model's structure from the weights' config.json; --to-hf keeps
// the fields the import read.

// A Hugging Face folder of `cfg` holding the weights of the model it describes (f32, seeded by
// train.seed), under the model's parameter names.
std::string hf_model_dir(const fs::path& d, const json& cfg) {
  fs::create_directories(d);
  mf::write_file_atomic((d / "config.json").string(), cfg.dump(2));
  const mf::models::ModelSpec* spec = mf::models::model_spec_for_hf_type(cfg.at("model_type").get<std::string>());
  EXPECT_NE(spec, nullptr);
  auto model = mf::models::build_model(spec->hf.read_config((d / "config.json").string()), 0);
  std::vector<RawTensor> raw;
  for (const auto& [name, t] : model->state_dict()) raw.push_back({name, "F32", t.shape(), bytes_of(t)});
  write_by_hand((d / "model.safetensors").string(), raw);
  return d.string();
}

json llama3_json(double factor) {
  return {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 257}, {"hidden_size", 16},
          {"intermediate_size", 40}, {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"max_position_embeddings", 16}, {"rms_norm_eps", 1e-6}, {"rope_theta", 500000.0},
          {"rope_scaling", {{"rope_type", "llama3"}, {"factor", factor}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8}}},
          {"tie_word_embeddings", false}, {"hidden_act", "silu"}, {"bos_token_id", 128000}, {"eos_token_id", 128001},
          {"torch_dtype", "float32"}};
}

// A run config of `overrides` (given on the command line) starting from the weights at `folder`.
mf::Config pretrained_config(const std::string& folder, const std::vector<std::string>& overrides) {
  mf::Config c;
  for (const std::string& kv : overrides) c.apply_override(kv);
  c.set("model.pretrained", folder);
  return c;
}

// Llama 3 weights made with rope_scaling factor 8 refuse a config that sets 32 (one line: the key,
// both values, the file); a config that sets only rope_scaling.type=llama3 computes with the file's
// factor 32, theta and epsilon (named in the log line), never the defaults.
TEST_F(HfConvert, PretrainedRopeScalingComesFromConfigJson) {
  const std::string f8 = hf_model_dir(dir_ / "llama_f8", llama3_json(8.0));
  const std::string f32 = hf_model_dir(dir_ / "llama_f32", llama3_json(32.0));
  const std::string f8_json = f8 + "/config.json";
  MFT_EXPECT_ERROR(mf::runtime::pretrained_run_config(pretrained_config(
                       f8, {"model.name=llama", "model.rope_scaling.type=llama3", "model.rope_scaling.factor=32"})),
                   "model.pretrained: model.rope_scaling.factor 32.0 (from command line) differs from rope_scaling.factor 8.0 in",
                   f8_json.c_str(), "set model.rope_scaling.factor=8.0");
  std::string note;
  const mf::Config c =
      mf::runtime::pretrained_run_config(pretrained_config(f32, {"model.name=llama", "model.rope_scaling.type=llama3",
                                                               "model.embedding_dropout_prob=0", "model.output_dropout_prob=0"}),
                                       &note);
  const mf::models::LlamaConfig lc = mf::models::llama_config(c, 0);
  EXPECT_TRUE(lc.llama3_rope);
  EXPECT_EQ(lc.rope_scaling.factor, 32.0);
  EXPECT_EQ(lc.rope_scaling.original_max_position_embeddings, 8);
  EXPECT_EQ(lc.rope_theta, 500000.0);
  EXPECT_EQ(lc.layernorm_epsilon, 1e-6);
  EXPECT_EQ(lc.num_key_value_heads, 2);
  for (const char* part : {"model.rope_scaling.factor=32.0", "model.rope_theta=500000.0", "model.layernorm_epsilon=1.0e-6",
                           "config.json"})
    EXPECT_NE(note.find(part), std::string::npos) << note;
  // Without rope_scaling.type the file's llama3 is taken too; a config that turns it off is refused.
  EXPECT_EQ(mf::runtime::pretrained_run_config(pretrained_config(f32, {"model.name=llama"})).get_string("model.rope_scaling.type"),
            "llama3");
  MFT_EXPECT_ERROR(
      mf::runtime::pretrained_run_config(pretrained_config(f32, {"model.name=llama", "model.rope_scaling.type="})),
      "model.rope_scaling.type \"\" (from command line) differs from rope_scaling.rope_type llama3");
  // Without llama3 scaling in the file its factor means nothing: a config's factor is no conflict.
  json plain = llama3_json(8.0);
  plain["rope_scaling"] = nullptr;
  const std::string fp = hf_model_dir(dir_ / "llama_plain", plain);
  EXPECT_NO_THROW(mf::runtime::pretrained_run_config(pretrained_config(fp, {"model.name=llama", "model.rope_scaling.factor=32"})));
}

// One structure key per model family, from the weights' config.json where the run's config leaves it
// out, an error where it sets another value: GPT-2's layer_norm_epsilon, Qwen2's q/k/v biases,
// BERT's layer_norm_eps, RoBERTa's pad_token_id, T5's relative_attention_num_buckets, ViT's
// patch_size and its image processor's image_mean / image_std.
TEST_F(HfConvert, PretrainedStructureKeysOfEveryFamily) {
  struct Case {
    const char* name;
    json cfg;
    std::vector<std::string> run;  // the model.* keys a config gives besides the conflicting one
    std::string key, file_value, conflicting;
  };
  json gpt2 = json::parse(config_json(tiny()));
  gpt2["layer_norm_epsilon"] = 1e-6;
  json qwen2 = llama3_json(8.0);
  qwen2["model_type"] = "qwen2";
  qwen2.erase("rope_scaling");
  const json bert = {{"model_type", "bert"}, {"vocab_size", 61}, {"hidden_size", 16}, {"intermediate_size", 40},
                     {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"max_position_embeddings", 16},
                     {"type_vocab_size", 2}, {"layer_norm_eps", 1e-6}};
  json roberta = bert;
  roberta["model_type"] = "roberta";
  roberta["pad_token_id"] = 1;
  roberta["type_vocab_size"] = 1;
  roberta["max_position_embeddings"] = 18;
  const json t5 = {{"model_type", "t5"}, {"vocab_size", 64}, {"d_model", 16}, {"d_kv", 4}, {"d_ff", 32}, {"num_layers", 2},
                   {"num_heads", 4}, {"relative_attention_num_buckets", 16}, {"relative_attention_max_distance", 32}};
  const json vit = {{"model_type", "vit"}, {"image_size", 12}, {"patch_size", 4}, {"num_channels", 3}, {"hidden_size", 16},
                    {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"intermediate_size", 24},
                    {"id2label", {{"0", "cat"}, {"1", "dog"}}}};
  const std::vector<Case> cases = {
      {"gpt2", gpt2, {"model.name=gpt2"}, "model.layernorm_epsilon", "1.0e-6", "1.0e-5"},
      {"qwen2", qwen2, {"model.name=qwen2"}, "model.qkv_bias", "true", "false"},
      {"bert", bert, {"model.name=bert"}, "model.layernorm_epsilon", "1.0e-6", "1.0e-12"},
      {"roberta", roberta, {"model.name=roberta"}, "model.pad_token_id", "1", "0"},
      {"t5", t5, {"model.name=t5"}, "model.relative_attention_num_buckets", "16", "32"},
      {"vit", vit, {"model.name=vit"}, "model.patch_size", "4", "2"}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const std::string folder = hf_model_dir(dir_ / k.name, k.cfg);
    std::string note;
    const mf::Config taken = mf::runtime::pretrained_run_config(pretrained_config(folder, k.run), &note);
    EXPECT_EQ(taken.get_text(k.key), k.file_value);
    EXPECT_NE(note.find(k.key + "=" + k.file_value), std::string::npos) << note;
    std::vector<std::string> conflicting = k.run;
    conflicting.push_back(k.key + "=" + k.conflicting);
    const std::string ours = k.key + " " + k.conflicting + " (from command line) differs from",
                      theirs = " " + k.file_value + " in " + folder + "/config.json";
    MFT_EXPECT_ERROR(mf::runtime::pretrained_run_config(pretrained_config(folder, conflicting)), ours.c_str(), theirs.c_str());
  }
  // ViT's image processor: its mean and std where the config leaves them out; another resampling
  // filter than PIL's BILINEAR is refused.
  const std::string folder = (dir_ / "vit").string();
  mf::write_file_atomic(folder + "/preprocessor_config.json",
                        R"({"do_normalize": true, "do_resize": true, "image_mean": [0.485, 0.456, 0.406],
                            "image_processor_type": "ViTImageProcessor", "image_std": [0.229, 0.224, 0.225],
                            "resample": 2, "rescale_factor": 0.00392156862745098, "size": {"height": 12, "width": 12}})");
  const mf::Config vc = mf::runtime::pretrained_run_config(pretrained_config(folder, {"model.name=vit"}));
  EXPECT_EQ(vc.get_float_list("data.image_mean"), (std::vector<double>{0.485, 0.456, 0.406}));
  EXPECT_EQ(vc.get_float_list("data.image_std"), (std::vector<double>{0.229, 0.224, 0.225}));
  MFT_EXPECT_ERROR(mf::runtime::pretrained_run_config(pretrained_config(folder, {"model.name=vit", "data.image_std=[0.5, 0.5, 0.5]"})),
                   "data.image_std [0.5, 0.5, 0.5] (from command line) differs from image_std [0.229, 0.224, 0.225]",
                   "preprocessor_config.json");
  mf::write_file_atomic(folder + "/preprocessor_config.json", R"({"image_mean": [0.5, 0.5, 0.5], "resample": 3})");
  MFT_EXPECT_ERROR(mf::runtime::pretrained_run_config(pretrained_config(folder, {"model.name=vit"})),
                   "preprocessor_config.json: resample 3 is not supported");
}

// convert --to-hf writes back what the import read and meshflow does not compute: Llama 3's bos/eos
// token ids, Qwen2's sliding_window / max_window_layers, ViT's label names — from a conversion, and
// from a run trained from the Hugging Face weights (which keeps their config.json and the rope
// scaling it took from them).
TEST_F(HfConvert, ToHfKeepsWhatTheImportRead) {
  json qwen2 = llama3_json(8.0);
  qwen2["model_type"] = "qwen2";
  qwen2["architectures"] = {"Qwen2ForCausalLM"};
  qwen2.erase("rope_scaling");
  qwen2["use_sliding_window"] = false;
  qwen2["sliding_window"] = 4096;
  qwen2["max_window_layers"] = 28;
  const json vit = {{"model_type", "vit"}, {"image_size", 12}, {"patch_size", 4}, {"num_channels", 3}, {"hidden_size", 16},
                    {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"intermediate_size", 24},
                    {"id2label", {{"0", "tabby cat"}, {"1", "golden retriever"}, {"2", "goldfinch"}}},
                    {"label2id", {{"tabby cat", 0}, {"golden retriever", 1}, {"goldfinch", 2}}}};
  const std::vector<std::pair<json, std::vector<std::string>>> files = {
      {llama3_json(32.0), {"bos_token_id", "eos_token_id"}},
      {qwen2, {"bos_token_id", "eos_token_id", "sliding_window", "max_window_layers", "use_sliding_window"}},
      {vit, {"id2label", "label2id"}}};
  for (const auto& [cfg, kept] : files) {
    const std::string type = cfg["model_type"];
    SCOPED_TRACE(type);
    const std::string src = hf_model_dir(dir_ / type, cfg), ck = path(type + "_ck"), out = path(type + "_hf");
    mf::runtime::convert_from_hf(src, ck);
    mf::runtime::convert_to_hf(ck, out);
    const json back = json::parse(mf::read_file(out + "/config.json"));
    for (const std::string& key : kept) EXPECT_EQ(back[key], cfg[key]) << key;
  }
  // A ViT fine-tuned to another class count names its classes LABEL_k, not the file's.
  {
    const std::string ck = path("vit_ck");
    mf::Config cfg = mf::Config::load(ck + "/config.yaml");
    cfg.set("model.num_labels", "5");
    cfg.save(ck + "/config.yaml");
    auto m = mf::models::build_model(cfg, 0);
    mf::io::write_checkpoint(path("vit5"), mf::io::TrainingState{}, m->state_dict(), {}, 0);
    fs::copy_file(ck + "/config.yaml", path("vit5/config.yaml"));
    fs::copy_file(ck + "/hf_config.json", path("vit5/hf_config.json"));
    mf::runtime::convert_to_hf(path("vit5"), path("vit5_hf"));
    const json back = json::parse(mf::read_file(path("vit5_hf/config.json")));
    EXPECT_EQ(back["id2label"].size(), 5u);
    EXPECT_EQ(back["id2label"]["0"], "LABEL_0");
  }
  // A run from the Llama 3 weights: one step at lr 0 (only rope_scaling.type set), then --to-hf.
  std::string text;
  for (int d = 0; d < 60; ++d) text += "the cat sat on the mat and the dog ran far away " + std::to_string(d) + "\n%\n";
  mf::write_file_atomic(path("corpus.txt"), text);
  mf::ByteTokenizer tok;
  const std::string prefix = mf::preprocess({path("corpus.txt")}, path("corpus"), tok).prefix;
  mf::Config cfg = pretrained_config(path("llama"), {"model.name=llama", "model.rope_scaling.type=llama3",
                                                     "model.num_layers=2", "model.hidden_size=16",
                                                     "model.num_attention_heads=4", "model.ffn_hidden_size=40",
                                                     "model.max_seq_length=16", "model.vocab_size=257",
                                                     "model.embedding_dropout_prob=0", "model.output_dropout_prob=0",
                                                     "model.attention_dropout_prob=0", "train.train_iter=1",
                                                     "train.train_micro_batch_size=2", "train.evaluation.enabled=false",
                                                     "tokenization.tokenizer=byte", "optim.lr=0"});
  cfg.set("data.data_prefix", prefix);
  cfg.set("train.output_dir", path("run"));
  std::FILE* log = std::tmpfile();
  mf::train::run_training(cfg, log);
  std::fclose(log);
  const mf::Config saved = mf::Config::load(path("run/config.yaml"));
  EXPECT_EQ(saved.get_float("model.rope_scaling.factor"), 32.0);
  EXPECT_EQ(saved.get_int("model.num_key_value_heads"), 2);
  mf::runtime::convert_to_hf(path("run"), path("run_hf"));
  const json back = json::parse(mf::read_file(path("run_hf/config.json")));
  EXPECT_EQ(back["bos_token_id"], 128000);
  EXPECT_EQ(back["eos_token_id"], 128001);
  EXPECT_EQ(back["rope_scaling"]["factor"], 32.0);
  EXPECT_EQ(back["rope_theta"], 500000.0);
}

}  // namespace
