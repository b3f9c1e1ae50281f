// Config system: defaults schema, typed getters, overrides, `_base_` chains, validation
// messages with suggestions, dump → load round trip, the shipped configs/, Registry, and the key
// reference (every key has a meaning; docs/guides/config-reference.md is up to date).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "meshflow/config/config.h"
#include "meshflow/config/reference.h"
#include "meshflow/config/registry.h"
#include "meshflow/core/atomic_file.h"
#include "testing.h"

namespace {

namespace fs = std::filesystem;
using mf::Config;
using mf::ConfigType;

// A fresh directory under the test temp dir, removed at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "mf_config_XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = path + "/" + name;
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p, std::ios::binary) << text;  // plain write: no fsync in tests
    return p;
  }
};

// Not __FILE__: a compiler launcher (ccache with base_dir) may make it relative.
std::string repo_root() { return MESHFLOW_SOURCE_DIR; }

TEST(Config, DefaultsHaveTypesAndValues) {
  Config c = Config::defaults();
  EXPECT_EQ(c.get_string("model.name"), "gpt2");
  EXPECT_EQ(c.get_int("model.num_layers"), 12);
  EXPECT_EQ(c.get_int("model.hidden_size"), 768);
  EXPECT_EQ(c.get_int("model.vocab_size"), 50257);
  EXPECT_EQ(c.get_int("model.ffn_hidden_size"), 0);
  EXPECT_DOUBLE_EQ(c.get_float("model.layernorm_epsilon"), 1e-5);
  EXPECT_EQ(c.get_string("model.pretrained"), "");
  EXPECT_FALSE(c.get_bool("train.resume"));
  EXPECT_EQ(c.get_string("train.amp.dtype"), "bf16");
  EXPECT_EQ(c.get_string("train.scheduler.name"), "cosine");
  EXPECT_TRUE(c.get_float_list("train.scheduler.milestones").empty());
  EXPECT_EQ(c.get_float_list("optim.betas"), (std::vector<double>{0.9, 0.95}));
  EXPECT_EQ(c.get_string("data.splits"), "949,50,1");
  EXPECT_TRUE(c.get_bool("tokenization.append_eod"));

  EXPECT_EQ(c.type_of("train.train_iter"), ConfigType::kInt);
  EXPECT_EQ(c.type_of("optim.lr"), ConfigType::kFloat);
  EXPECT_EQ(c.type_of("train.dist.sequence_parallel"), ConfigType::kBool);
  EXPECT_EQ(c.type_of("data.splits"), ConfigType::kString);
  EXPECT_EQ(c.type_of("optim.betas"), ConfigType::kFloatList);
  EXPECT_EQ(c.type_of("optim.clip_grad_max_norm"), ConfigType::kFloat);
  // A float: fractions of a second are valid timeouts (the key is read with get_float).
  EXPECT_EQ(c.type_of("train.dist.timeout"), ConfigType::kFloat);
  EXPECT_EQ(c.get_float("train.dist.timeout"), 300.0);
  c.apply_override("train.dist.timeout=0.5");
  EXPECT_EQ(c.get_float("train.dist.timeout"), 0.5);
  c.apply_override("train.dist.timeout=300");  // an integer text is a valid float too
  EXPECT_EQ(c.get_float("train.dist.timeout"), 300.0);

  // Every key the trainer relies on exists.
  for (const char* k :
       {"train.output_dir", "train.global_batch_size", "train.num_accumulation_steps", "train.test_micro_batch_size",
        "train.log_period", "train.seed", "train.checkpointer.period", "train.checkpointer.max_to_keep",
        "train.evaluation.enabled", "train.evaluation.eval_period", "train.evaluation.eval_iter", "train.amp.enabled",
        "train.activation_checkpoint.enabled", "train.zero_optimization.enabled", "train.zero_optimization.stage",
        "train.dist.data_parallel_size", "train.dist.tensor_parallel_size", "train.dist.pipeline_parallel_size",
        "train.dist.pipeline_num_layers", "train.scheduler.warmup_iter", "train.scheduler.warmup_factor",
        "train.scheduler.alpha", "train.scheduler.gamma", "train.threads", "optim.name", "optim.weight_decay",
        "optim.eps", "optim.momentum", "optim.clip_grad_norm_type", "data.data_prefix", "data.seq_length",
        "tokenization.tokenizer", "tokenization.vocab_file", "tokenization.merges_file", "tokenization.tokenizer_file",
        "tokenization.eod_token", "tokenization.do_lower_case", "model.num_attention_heads",
        "model.max_seq_length", "model.embedding_dropout_prob", "model.attention_dropout_prob",
        "model.output_dropout_prob", "model.initializer_range"})
    EXPECT_TRUE(c.has(k)) << k;
  EXPECT_EQ(Config::keys().front(), "model.name");
  EXPECT_EQ(Config(), c);
}

TEST(Config, OverridesAndSetParseStrictly) {
  Config c = Config::defaults();
  c.apply_override("train.train_iter=10");
  c.apply_override("optim.lr=3e-4");
  c.apply_override("model.layernorm_epsilon=1");  // floats accept ints
  c.apply_override("train.resume=true");
  c.apply_override("optim.betas=[0.8,0.99]");
  c.apply_override("train.scheduler.milestones=[100, 200]");
  c.apply_override("data.splits=98,2,0");
  c.apply_override("model.pretrained=");
  c.set("train.seed", "-7");
  EXPECT_EQ(c.get_int("train.train_iter"), 10);
  EXPECT_EQ(c.get_float("optim.lr"), 3e-4);
  EXPECT_EQ(c.get_float("model.layernorm_epsilon"), 1.0);
  EXPECT_TRUE(c.get_bool("train.resume"));
  EXPECT_EQ(c.get_float_list("optim.betas"), (std::vector<double>{0.8, 0.99}));
  EXPECT_EQ(c.get_float_list("train.scheduler.milestones"), (std::vector<double>{100, 200}));
  EXPECT_EQ(c.get_string("data.splits"), "98,2,0");
  EXPECT_EQ(c.get_string("model.pretrained"), "");
  EXPECT_EQ(c.get_int("train.seed"), -7);
  EXPECT_EQ(c.get_float("train.train_iter"), 10.0);  // get_float reads int keys

  MFT_EXPECT_ERROR(c.apply_override("train.train_iter=ten"), "train.train_iter expects an integer, got \"ten\"",
                   "command line");
  MFT_EXPECT_ERROR(c.apply_override("train.train_iter=1.5"), "expects an integer", "\"1.5\"");
  MFT_EXPECT_ERROR(c.apply_override("train.train_iter=1e3"), "expects an integer");
  MFT_EXPECT_ERROR(c.apply_override("optim.lr=fast"), "optim.lr expects a float, got \"fast\"");
  MFT_EXPECT_ERROR(c.apply_override("train.resume=yes"), "train.resume expects a bool", "\"yes\"");
  MFT_EXPECT_ERROR(c.apply_override("optim.betas=0.9"), "optim.betas expects a list of numbers", "\"0.9\"");
  MFT_EXPECT_ERROR(c.apply_override("optim.betas=[0.9, x]"), "optim.betas expects a list of numbers");
  MFT_EXPECT_ERROR(c.apply_override("train.train_iter"), "override `train.train_iter` is not key=value");
  MFT_EXPECT_ERROR(c.apply_override("=3"), "has no key");
  MFT_EXPECT_ERROR(c.apply_override("train.train_itr=10"), "unknown config key `train.train_itr`", "command line",
                   "did you mean `train.train_iter`?");
  MFT_EXPECT_ERROR(c.apply_override("train_iter=10"), "did you mean `train.train_iter`?");
  MFT_EXPECT_ERROR(c.apply_override("optim.train_iter=10"), "did you mean `train.train_iter`?");
  MFT_EXPECT_ERROR(c.apply_override("train.amp.enable=true"), "did you mean `train.amp.enabled`?");
  MFT_EXPECT_ERROR(c.apply_override("model.hiden=8"), "did you mean `model.hidden_size`?");
  MFT_EXPECT_ERROR(c.apply_override("train.dist=1"), "`train.dist` is a section");
  // A failed override leaves the value alone.
  EXPECT_EQ(c.get_int("train.train_iter"), 10);
}

TEST(Config, GettersCheckKeyAndType) {
  Config c = Config::defaults();
  MFT_EXPECT_ERROR(c.get_int("train.train_iters"), "unknown config key `train.train_iters`",
                   "did you mean `train.train_iter`?");
  MFT_EXPECT_ERROR(c.get_int("optim.lr"), "optim.lr", "holds a float", "not an integer");
  MFT_EXPECT_ERROR(c.get_string("train.resume"), "holds a bool");
  MFT_EXPECT_ERROR(c.get_bool("model.name"), "holds a string");
  MFT_EXPECT_ERROR(c.get_float_list("optim.lr"), "not a list of numbers");
  MFT_EXPECT_ERROR(c.set("zzzzzzzzzzzzzzzz", "1"), "unknown config key `zzzzzzzzzzzzzzzz`");
  try {
    c.set("zzzzzzzzzzzzzzzz", "1");
  } catch (const mf::Error& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
  // A key far longer than any valid one gets no suggestion and is not compared with every key
  // (seen under fuzz/config_fuzz.cpp: each comparison costs its length, a megabyte key minutes).
  const std::string huge = "train." + std::string(size_t{1} << 20, 'x');
  try {
    c.apply_override(huge + "=1");
    ADD_FAILURE() << "a megabyte key was accepted";
  } catch (const mf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown config key"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos);
  }
  MFT_EXPECT_ERROR(c.apply_override("train.train_iterrr=1"), "did you mean `train.train_iter`?");
}

TEST(Config, BaseChainsOverrideInOrder) {
  TempDir d;
  d.write("root.yaml",
          "model:\n  num_layers: 6\n  hidden_size: 512\noptim:\n  lr: 1.0e-3\ntrain:\n  dist:\n    "
          "data_parallel_size: 2\n");
  d.write("sub/mid.yaml", "_base_: ../root.yaml\nmodel:\n  hidden_size: 256\ntrain:\n  train_iter: 50\n");
  std::string leaf = d.write("sub/leaf.yaml",
                             "_base_: mid.yaml\nmodel:\n  num_attention_heads: 4\n"
                             "train.scheduler.name: linear\n# a comment\noptim:\n  betas: [0.8, 0.9]\n"
                             "model.pretrained:\n");
  Config c = Config::load(leaf, {"train.train_iter=70", "model.num_layers=3", "train.train_iter=80"});
  EXPECT_EQ(c.get_int("model.num_layers"), 3);          // root, then override
  EXPECT_EQ(c.get_int("model.hidden_size"), 256);       // mid over root
  EXPECT_EQ(c.get_int("model.num_attention_heads"), 4); // leaf
  EXPECT_EQ(c.get_float("optim.lr"), 1e-3);             // root only
  EXPECT_EQ(c.get_int("train.dist.data_parallel_size"), 2);
  EXPECT_EQ(c.get_int("train.train_iter"), 80);         // overrides in order
  EXPECT_EQ(c.get_string("train.scheduler.name"), "linear");  // dotted key inside a file
  EXPECT_EQ(c.get_float_list("optim.betas"), (std::vector<double>{0.8, 0.9}));
  EXPECT_EQ(c.get_string("model.pretrained"), "");
  EXPECT_EQ(c.get_int("model.vocab_size"), 50257);      // untouched default

  // Absolute base path, and a list of bases applied in order.
  std::string abs_root = fs::absolute(d.path + "/root.yaml").string();
  std::string two = d.write("two.yaml", "_base_: [" + abs_root + ", sub/mid.yaml]\n");
  Config t = Config::load(two, {});
  EXPECT_EQ(t.get_int("model.hidden_size"), 256);
  EXPECT_EQ(t.get_int("model.num_layers"), 6);

  // An empty file is a mistake (a config sets keys or names a base), said plainly.
  MFT_EXPECT_ERROR(Config::load(d.write("empty.yaml", "# nothing\n"), {}), "empty.yaml is empty");
}

TEST(Config, FileErrorsNameKeyAndFile) {
  TempDir d;
  std::string bad_key = d.write("bad_key.yaml", "train:\n  train_itr: 10\n");
  MFT_EXPECT_ERROR(Config::load(bad_key, {}), "unknown config key `train.train_itr`", "bad_key.yaml",
                   "did you mean `train.train_iter`?");
  std::string bad_section = d.write("bad_section.yaml", "trian:\n  train_iter: 10\n");
  MFT_EXPECT_ERROR(Config::load(bad_section, {}), "unknown config key `trian`", "bad_section.yaml");
  std::string bad_val = d.write("bad_val.yaml", "train:\n  train_iter: ten\n");
  MFT_EXPECT_ERROR(Config::load(bad_val, {}), "train.train_iter expects an integer, got \"ten\"", "bad_val.yaml");
  std::string leaf_map = d.write("leaf_map.yaml", "optim:\n  lr:\n    value: 1\n");
  MFT_EXPECT_ERROR(Config::load(leaf_map, {}), "optim.lr expects a float", "leaf_map.yaml");
  std::string null_int = d.write("null_int.yaml", "train:\n  seed:\n");
  MFT_EXPECT_ERROR(Config::load(null_int, {}), "train.seed expects an integer, got null");
  std::string not_map = d.write("not_map.yaml", "- 1\n- 2\n");
  MFT_EXPECT_ERROR(Config::load(not_map, {}), "must be a mapping", "not_map.yaml");
  std::string syntax = d.write("syntax.yaml", "model: [unclosed\n");
  MFT_EXPECT_ERROR(Config::load(syntax, {}), "cannot parse config", "syntax.yaml");
  MFT_EXPECT_ERROR(Config::load(d.path + "/missing.yaml", {}), "config file not found", "missing.yaml");
  std::string missing_base = d.write("missing_base.yaml", "_base_: nowhere.yaml\n");
  MFT_EXPECT_ERROR(Config::load(missing_base, {}), "config file not found", "nowhere.yaml");
  // Errors in a base name the base file.
  std::string child = d.write("child.yaml", "_base_: bad_val.yaml\n");
  MFT_EXPECT_ERROR(Config::load(child, {}), "bad_val.yaml");
  // Override errors after a good file.
  std::string ok = d.write("ok.yaml", "train:\n  train_iter: 10\n");
  MFT_EXPECT_ERROR(Config::load(ok, {"optim.lrr=1"}), "did you mean `optim.lr`?", "command line");
}

TEST(Config, BaseCyclesAreDetected) {
  TempDir d;
  std::string a = d.write("a.yaml", "_base_: b.yaml\n");
  d.write("b.yaml", "_base_: c/../a.yaml\n");
  fs::create_directories(d.path + "/c");
  MFT_EXPECT_ERROR(Config::load(a, {}), "cycle", "a.yaml", "b.yaml");
  std::string self = d.write("self.yaml", "_base_: self.yaml\n");
  MFT_EXPECT_ERROR(Config::load(self, {}), "cycle", "self.yaml");
  // A diamond (the same base twice, not nested) is not a cycle.
  d.write("base.yaml", "train:\n  seed: 5\n");
  d.write("x.yaml", "_base_: base.yaml\n");
  std::string diamond = d.write("diamond.yaml", "_base_: [x.yaml, base.yaml]\n");
  EXPECT_EQ(Config::load(diamond, {}).get_int("train.seed"), 5);
}

TEST(Config, DumpLoadsBackIdentically) {
  TempDir d;
  Config c = Config::defaults();
  c.apply_override("optim.lr=3e-4");
  c.apply_override("model.embedding_dropout_prob=0.1");
  c.apply_override("model.attention_dropout_prob=0.30000000000000004");
  c.apply_override("model.layernorm_epsilon=1e-12");
  c.apply_override("train.scheduler.gamma=100");
  c.apply_override("optim.betas=[0.9, 0.999, 1e-300]");
  c.apply_override("train.scheduler.milestones=[]");
  c.apply_override("model.pretrained=");
  c.apply_override("data.splits=949,50,1");
  c.apply_override("train.output_dir=true");   // strings that look like other things
  c.apply_override("tokenization.vocab_file=0123");
  c.apply_override("tokenization.merges_file=a: b # c");
  c.apply_override("train.amp.dtype=null");
  c.apply_override("train.activation_checkpoint.end_layer=-1");
  std::string text = c.dump();
  EXPECT_NE(text.find("lr: 0.0003"), std::string::npos) << text;
  EXPECT_NE(text.find("model:\n  name: gpt2"), std::string::npos) << text;
  EXPECT_NE(text.find("gamma: 100.0"), std::string::npos) << text;
  EXPECT_EQ(text.find("_base_"), std::string::npos);

  std::string path = d.path + "/resolved.yaml";
  c.save(path);
  EXPECT_EQ(mf::read_file(path), text);
  Config back = Config::load(path, {});
  EXPECT_EQ(back, c);
  for (const std::string& k : Config::keys()) EXPECT_EQ(back.get_text(k), c.get_text(k)) << k;
  EXPECT_EQ(back.get_float("model.attention_dropout_prob"), 0.30000000000000004);
  EXPECT_EQ(back.get_string("train.output_dir"), "true");
  EXPECT_EQ(back.get_string("tokenization.vocab_file"), "0123");
  EXPECT_EQ(back.get_string("tokenization.merges_file"), "a: b # c");
  EXPECT_EQ(back.get_string("train.amp.dtype"), "null");
  EXPECT_EQ(back.dump(), text);  // deterministic
  EXPECT_EQ(Config::from_yaml(Config::defaults().dump()), Config::defaults());
}

TEST(Config, ShippedConfigsLoad) {
  std::string dir = repo_root() + "/configs/gpt2/";
  Config base = Config::load(dir + "base.yaml", {});
  EXPECT_EQ(base.get_int("model.num_layers"), 12);
  EXPECT_EQ(base.get_int("model.hidden_size"), 768);
  EXPECT_EQ(base.get_int("model.num_attention_heads"), 12);
  EXPECT_EQ(base.get_int("model.max_seq_length"), 1024);
  EXPECT_EQ(base.get_int("model.vocab_size"), 50257);
  EXPECT_EQ(base.get_string("optim.name"), "adamw");
  EXPECT_EQ(base.get_float("optim.lr"), 6e-4);
  EXPECT_EQ(base.get_float("optim.weight_decay"), 0.1);
  EXPECT_EQ(base.get_float_list("optim.betas"), (std::vector<double>{0.9, 0.95}));
  EXPECT_EQ(base.get_float("optim.clip_grad_max_norm"), 1.0);
  EXPECT_EQ(base.get_string("train.scheduler.name"), "cosine");
  EXPECT_GT(base.get_int("train.scheduler.warmup_iter"), 0);

  Config small = Config::load(dir + "small.yaml", {});
  EXPECT_EQ(small.get_int("model.num_layers"), 12);
  EXPECT_EQ(small.get_int("data.seq_length"), 256);
  EXPECT_EQ(small.get_int("train.train_micro_batch_size"), 4);

  Config tiny = Config::load(dir + "tiny.yaml", {"train.train_iter=5"});
  EXPECT_EQ(tiny.get_int("model.num_layers"), 4);
  EXPECT_EQ(tiny.get_int("model.hidden_size"), 128);
  EXPECT_EQ(tiny.get_int("model.num_attention_heads"), 4);
  EXPECT_EQ(tiny.get_int("data.seq_length"), 128);
  EXPECT_EQ(tiny.get_float("model.embedding_dropout_prob"), 0.1);
  EXPECT_EQ(tiny.get_string("tokenization.tokenizer"), "gpt2_bpe");
  EXPECT_EQ(tiny.get_string("tokenization.vocab_file"), "data/gpt2/encoder.json");
  EXPECT_EQ(tiny.get_string("tokenization.merges_file"), "data/gpt2/vocab.bpe");
  EXPECT_EQ(tiny.get_string("data.data_prefix"), "data/fortunes_text_document");
  EXPECT_EQ(tiny.get_string("train.output_dir"), "output/gpt2_tiny");
  EXPECT_EQ(tiny.get_int("train.train_iter"), 5);
  EXPECT_EQ(Config::load(dir + "tiny.yaml", {}).get_int("train.train_iter"), 500);
}

TEST(ConfigRegistry, CreatesByNameAndListsUnknown) {
  mf::Registry<std::unique_ptr<int>(const Config&, int)> reg("model.name");
  reg.add("gpt2", [](const Config& c, int x) { return std::make_unique<int>(int(c.get_int("model.num_layers")) + x); });
  reg.add("bert", [](const Config&, int x) { return std::make_unique<int>(-x); });
  Config c = Config::defaults();
  EXPECT_EQ(*reg.create("gpt2", c, 1), 13);
  EXPECT_EQ(*reg.create(c.get_string("model.name"), c, 0), 12);
  EXPECT_EQ(*reg.get("bert")(c, 2), -2);
  EXPECT_TRUE(reg.contains("bert"));
  EXPECT_FALSE(reg.contains("t5"));
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"bert", "gpt2"}));
  MFT_EXPECT_ERROR(reg.create("t5", c, 0), "unknown model.name `t5`", "registered: bert, gpt2");
  MFT_EXPECT_ERROR(reg.add("gpt2", [](const Config&, int) { return std::make_unique<int>(0); }), "registered twice");
  mf::Registry<int()> empty("optim.name");
  MFT_EXPECT_ERROR(empty.get("sgd"), "unknown optim.name `sgd`", "registered: none");
}

}  // namespace

namespace {

// Every numeric key of the defaults document has its valid range; a value outside it is refused
// from the command line and from a file, naming key, value, range and source.
TEST(Config, EveryNumericKeyHasARangeAndOutOfRangeValuesAreRefused) {
  for (const auto& e : mf::config_detail::schema()) {
    const bool numeric = e.type == mf::ConfigType::kInt || e.type == mf::ConfigType::kFloat || e.type == mf::ConfigType::kFloatList;
    EXPECT_EQ(mf::config_detail::range_of(e.key) != nullptr, numeric) << e.key;
  }
  Config c = Config::defaults();
  MFT_EXPECT_ERROR(c.apply_override("optim.lr=-1"), "optim.lr=-1 is outside its range [0, inf)", "command line");
  MFT_EXPECT_ERROR(c.apply_override("model.attention_dropout_prob=1"), "outside its range [0, 1)");
  MFT_EXPECT_ERROR(c.apply_override("train.zero_optimization.stage=4"), "outside its range [1, 3]");
  MFT_EXPECT_ERROR(c.apply_override("train.dist.timeout=0"), "outside its range (0, 1000000000]");
  // A deadline past int64 nanoseconds (1e10 s once failed every collective at once).
  MFT_EXPECT_ERROR(c.apply_override("train.dist.timeout=1e10"), "outside its range (0, 1000000000]");
  // Iterations and stage ids are whole numbers an int64 holds (1e19 once overflowed to a milestone
  // before step 1; 1.5 was cut to 1).
  MFT_EXPECT_ERROR(c.apply_override("train.scheduler.milestones=[10, 1e19]"), "outside its range of integers [0, 2^63)");
  MFT_EXPECT_ERROR(c.apply_override("train.scheduler.milestones=[1.5]"), "outside its range of integers [0, 2^63)");
  MFT_EXPECT_ERROR(c.apply_override("train.dist.custom_pipeline_stage_id=[0.5, 0]"), "of integers");
  c.apply_override("train.scheduler.milestones=[0, 9000000000000000000]");
  MFT_EXPECT_ERROR(c.apply_override("data.decode_threads=100000"), "outside its range [0, 1024]");
  MFT_EXPECT_ERROR(c.apply_override("optim.betas=[0.9, 1.5]"), "optim.betas=[0.9, 1.5]", "(for each element)");
  MFT_EXPECT_ERROR(c.apply_override("train.train_micro_batch_size=0"), "outside its range [1, inf)");
  c.apply_override("optim.clip_grad_norm_type=.inf");  // the bounds that are in range are accepted
  c.apply_override("optim.clip_grad_max_norm=-1");
  c.apply_override("train.activation_checkpoint.end_layer=-1");
  EXPECT_EQ(c.get_float("optim.lr"), 6e-4);  // unchanged by the refused override
  TempDir d;
  MFT_EXPECT_ERROR(Config::load(d.write("neg.yaml", "optim:\n  lr: -0.5\n"), {}), "optim.lr=-0.5", "neg.yaml");
}

// A key twice in one mapping is refused (YAML's rule; the parser would let the second win), and a
// config path that is a folder says so (a run folder: where its config is).
TEST(Config, DuplicateKeysAndFoldersAreRefused) {
  TempDir d;
  MFT_EXPECT_ERROR(Config::load(d.write("dup.yaml", "model:\n  hidden_size: 128\n  hidden_size: 256\n"), {}),
                   "dup.yaml: `model.hidden_size` is set twice (again on line 3)");
  MFT_EXPECT_ERROR(Config::load(d.write("dup2.yaml", "model:\n  num_layers: 2\ntrain:\n  seed: 1\nmodel:\n  hidden_size: 8\n"), {}),
                   "`model` is set twice (again on line 5)");
  // The same key in a base and in the file that names it is an override, not a duplicate.
  d.write("base.yaml", "model:\n  num_layers: 2\n");
  EXPECT_EQ(Config::load(d.write("child.yaml", "_base_: base.yaml\nmodel:\n  num_layers: 3\n"), {}).get_int("model.num_layers"), 3);
  MFT_EXPECT_ERROR(Config::load(d.path, {}), "is a folder; give a YAML file");
  d.write("run/config.yaml", "model:\n  num_layers: 2\n");
  MFT_EXPECT_ERROR(Config::load(d.path + "/run", {}), "is a folder; a run's config is ", "run/config.yaml");
}

}  // namespace

namespace {

// The reader of the defaults document's comments: a key's trailing comment joined with the
// comment-only lines below it, sections by indentation, '#' inside quotes not a comment, a blank
// line ending a comment; a line it cannot read is refused naming it.
TEST(ConfigReference, ParsesMeaningsFromComments) {
  const std::vector<mf::ConfigKeyDoc> docs = mf::parse_config_key_docs(
      "\n"
      "train:\n"
      "  seed: 1234                # the seed\n"
      "  amp:                      # mixed precision\n"
      "    dtype: bf16             # bf16 | fp16: the\n"
      "                            #   storage type\n"
      "    hysteresis: 2\n"
      "  tag: \"a # b\"              # quoted: '#' inside is text\n"
      "\n"
      "# a free comment, of no key\n"
      "data:\n"
      "  splits: []\n");
  const std::vector<std::pair<std::string, std::string>> want = {{"train", ""},
                                                                 {"train.seed", "the seed"},
                                                                 {"train.amp", "mixed precision"},
                                                                 {"train.amp.dtype", "bf16 | fp16: the storage type"},
                                                                 {"train.amp.hysteresis", ""},
                                                                 {"train.tag", "quoted: '#' inside is text"},
                                                                 {"data", ""},
                                                                 {"data.splits", ""}};
  ASSERT_EQ(docs.size(), want.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(docs[i].key, want[i].first);
    EXPECT_EQ(docs[i].meaning, want[i].second) << docs[i].key;
  }
  EXPECT_TRUE(docs[0].section && docs[2].section && docs[6].section);
  EXPECT_FALSE(docs[1].section || docs[3].section || docs[7].section);
  MFT_EXPECT_ERROR(mf::parse_config_key_docs("train:\n  - 1\n"), "line 2", "cannot read `- 1`");
}

// Every key the code reads (the schema) says what it means: a key added to the defaults document
// without a trailing comment fails here.
TEST(ConfigReference, EveryKeyHasAMeaning) {
  std::map<std::string, std::string> meaning;
  for (const mf::ConfigKeyDoc& d : mf::config_key_docs()) {
    if (!d.section) {
      EXPECT_TRUE(meaning.emplace(d.key, d.meaning).second) << d.key << " is in the document twice";
    }
  }
  std::string missing;
  for (const std::string& key : Config::keys()) {
    auto it = meaning.find(key);
    if (it == meaning.end() || it->second.empty()) missing += " " + key;
  }
  EXPECT_EQ(meaning.size(), Config::keys().size());
  EXPECT_TRUE(missing.empty()) << "keys without a meaning (add a trailing `# ...` comment on their line in "
                                  "src/meshflow/config/defaults.cpp):"
                               << missing;
}

// The key of a reference table row ("| `train.seed` | ..." -> "train.seed"), or "" for other lines.
std::string row_key(const std::string& line) {
  if (line.rfind("| `", 0) != 0) return "";
  const size_t end = line.find('`', 3);
  return end == std::string::npos ? "" : line.substr(3, end - 3);
}

std::map<std::string, std::string> rows_by_key(const std::string& markdown, std::vector<std::string>* twice) {
  std::map<std::string, std::string> rows;
  std::istringstream in(markdown);
  for (std::string line; std::getline(in, line);) {
    const std::string key = row_key(line);
    if (!key.empty() && !rows.emplace(key, line).second) twice->push_back(key);
  }
  return rows;
}

// The reference lists every key once, with its type, default and range.
TEST(ConfigReference, MarkdownListsEveryKeyOnce) {
  const std::string md = mf::config_reference_markdown();
  std::vector<std::string> twice;
  const std::map<std::string, std::string> rows = rows_by_key(md, &twice);
  EXPECT_TRUE(twice.empty()) << "rows listed twice: " << ::testing::PrintToString(twice);
  for (const std::string& key : Config::keys()) EXPECT_EQ(rows.count(key), 1u) << key;
  size_t commented_sections = 0;  // nested sections with a comment have a row "prefix.*" too
  for (const mf::ConfigKeyDoc& d : mf::config_key_docs())
    commented_sections += d.section && d.key.find('.') != std::string::npos && !d.meaning.empty();
  EXPECT_EQ(rows.size(), Config::keys().size() + commented_sections);
  EXPECT_EQ(md.find("# Configuration keys\n\nGenerated by `meshflow config reference --output "
                    "docs/guides/config-reference.md`"),
            0u);
  for (const char* section : {"\n## model\n", "\n## train\n", "\n## optim\n", "\n## data\n", "\n## tokenization\n"})
    EXPECT_NE(md.find(section), std::string::npos) << section;
  EXPECT_EQ(
      rows.at("train.zero_optimization.stage"),
      "| `train.zero_optimization.stage` | an integer | `1` | [1, 3] | sharded over data parallelism: 1 optimizer "
      "state, 2 + gradients, 3 + parameters |");
  EXPECT_NE(rows.at("optim.betas").find("| a list of numbers | `[0.9, 0.95]` | [0, 1) (each element) | adamw: "),
            std::string::npos);
  EXPECT_NE(rows.at("train.amp.dtype").find("| a string | `bf16` |  | bf16 \\| fp16 |"), std::string::npos);
  EXPECT_NE(rows.at("data.data_prefix").find("| `\"\"` |  | the tokenized dataset \\<prefix>.bin"), std::string::npos);
  EXPECT_NE(rows.at("model.rope_scaling.*").find("| | | | Llama family: rotary frequency scaling |"),
            std::string::npos);
}

// The committed reference is what the code makes of its schema today: a key added, removed or
// changed in defaults.cpp or ranges.cpp without regenerating it fails here, naming the keys.
TEST(ConfigReference, CommittedReferenceIsUpToDate) {
  const std::string path = repo_root() + "/" + mf::kConfigReferencePath;
  const std::string regenerate = std::string("regenerate it: `") + mf::kConfigReferenceCommand +
                                 "`, run in the source tree (the binary: build/meshflow)";
  ASSERT_TRUE(fs::exists(path)) << path << " is missing; " << regenerate;
  const std::string committed = mf::read_file(path), generated = mf::config_reference_markdown();
  if (committed == generated) return;
  std::vector<std::string> twice;
  const std::map<std::string, std::string> have = rows_by_key(committed, &twice), want = rows_by_key(generated, &twice);
  std::string missing, stale, changed;
  for (const auto& [key, row] : want) {
    auto it = have.find(key);
    if (it == have.end())
      missing += " " + key;
    else if (it->second != row)
      changed += " " + key;
  }
  for (const auto& [key, row] : have)
    if (want.count(key) == 0) stale += " " + key;
  std::string what;
  if (!missing.empty()) what += "\n  keys missing from it:" + missing;
  if (!stale.empty()) what += "\n  keys no longer in the code:" + stale;
  if (!changed.empty()) what += "\n  keys whose row differs:" + changed;
  if (what.empty()) what = "\n  its text outside the key rows differs";
  ADD_FAILURE() << mf::kConfigReferencePath
                << " is out of date with src/meshflow/config/defaults.cpp and ranges.cpp:" << what << "\n"
                << regenerate;
}

}  // namespace
