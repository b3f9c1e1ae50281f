// Trainer: resume is exact (2N straight == N + resume + N, bit for bit), a second run refuses an
// occupied output dir, checkpoints are pruned.
#include <csignal>
#include <filesystem>

#include "meshflow/models/gpt2/model.h"
#include "meshflow/random/philox.h"
#include "meshflow/train/trace_hook.h"
#include "meshflow/train/trainer.h"
#include "meshflow/core/atomic_file.h"
#include <nlohmann/json.hpp>
#include "testing.h"

namespace {
using namespace mft;
namespace fs = std::filesystem;

// Token batches that are a pure function of the position (so resume must restore it).
class SyntheticSource : public mf::train::BatchSource {
 public:
  SyntheticSource(int64_t vocab, int64_t seq) : vocab_(vocab), seq_(seq) {}
  mf::models::Batch next(int64_t b) override {
    std::vector<int64_t> ids, labels;
    for (int64_t i = 0; i < b; ++i) {
      std::vector<int64_t> row;
      for (int64_t t = 0; t <= seq_; ++t)
        row.push_back(static_cast<int64_t>(mf::philox_uniform(99, pos_, static_cast<uint64_t>(t)) * 0.999 * vocab_) % 7 + (t % 3));
      ids.insert(ids.end(), row.begin(), row.end() - 1);
      labels.insert(labels.end(), row.begin() + 1, row.end());
      ++pos_;
    }
    return {mf::from_vector(ids, {b, seq_}), mf::from_vector(labels, {b, seq_})};
  }
  uint64_t position() const override { return pos_; }
  void set_position(uint64_t p) override { pos_ = p; }

 private:
  int64_t vocab_, seq_;
  uint64_t pos_ = 0;
};

struct Recorder : mf::train::HookBase {
  std::vector<double>* losses;
  explicit Recorder(std::vector<double>* l) : losses(l) {}
  void after_step(mf::train::Trainer&, const mf::train::StepStats& s) override { losses->push_back(s.loss); }
};

std::shared_ptr<mf::models::Gpt2Model> tiny_model() {
  mf::models::Gpt2Config c;
  c.vocab_size = 32;
  c.max_seq_length = 16;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_attention_heads = 4;
  auto m = std::make_shared<mf::models::Gpt2Model>(c);
  m->init_weights(5);
  return m;
}

mf::runtime::TrainOptions options(const std::string& dir, int64_t iters, bool resume) {
  mf::runtime::TrainOptions o;
  o.output_dir = dir;
  o.train_iter = iters;
  o.micro_batch = 2;
  o.accumulation_steps = 2;
  o.seq_length = 16;
  o.eval_iter = 2;
  o.eval_micro_batch = 2;
  o.resume = resume;
  o.lr = 3e-3;
  o.scheduler.warmup_iters = 2;
  return o;
}

std::vector<double> run(const std::string& dir, int64_t exit_iter, bool resume, std::vector<float>* weights) {
  auto model = tiny_model();
  auto opts = options(dir, 8, resume);
  opts.exit_iter = exit_iter;
  mf::train::Trainer t(opts, model, std::make_unique<SyntheticSource>(32, 16),
                       [] { return std::make_unique<SyntheticSource>(32, 16); });
  std::vector<double> losses;
  t.add_hook(std::make_unique<Recorder>(&losses));
  t.train();
  if (weights)
    for (auto& [n, p] : model->named_parameters()) {
      auto v = p.to_vector<float>();
      weights->insert(weights->end(), v.begin(), v.end());
    }
  return losses;
}

TEST(Trainer, ResumeIsBitExact) {
  std::string base = testing::TempDir() + "/mf_resume_" + std::to_string(::getpid());
  fs::remove_all(base);
  std::vector<float> w_straight, w_resumed;
  // 8 iterations straight; or stopped after 4 (as if interrupted), then resumed.
  auto straight = run(base + "/a", 0, false, &w_straight);
  auto first = run(base + "/b", 4, false, nullptr);
  auto second = run(base + "/b", 0, true, &w_resumed);
  ASSERT_EQ(straight.size(), 8u);
  ASSERT_EQ(first.size() + second.size(), 8u);
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, straight);
  EXPECT_EQ(w_resumed, w_straight);
  EXPECT_LT(straight.back(), straight.front());
  fs::remove_all(base);
}

// ---- Stopping on a signal, and what a resume must keep.

// Raises `sig` in this process while step `step` ends (as a launcher's signal arriving mid-run).
struct RaiseAt : mf::train::HookBase {
  int64_t step;
  int sig;
  RaiseAt(int64_t s, int g) : step(s), sig(g) {}
  void after_step(mf::train::Trainer& t, const mf::train::StepStats&) override {
    if (t.iter() == step) std::raise(sig);
  }
};

std::unique_ptr<mf::train::Trainer> tiny_trainer(const mf::runtime::TrainOptions& o) {
  return std::make_unique<mf::train::Trainer>(o, tiny_model(), std::make_unique<SyntheticSource>(32, 16),
                                              [] { return std::make_unique<SyntheticSource>(32, 16); });
}

// SIGTERM (or SIGINT, SIGUSR1) mid-run: the step ends, its checkpoint is saved, one line says so,
// train() returns; the resume logs the uninterrupted run's losses.
TEST(Trainer, StopsOnASignalWithACheckpointOfTheStep) {
  const std::string base = testing::TempDir() + "/mf_stop_" + std::to_string(::getpid());
  fs::remove_all(base);
  const auto straight = run(base + "/a", 0, false, nullptr);
  for (int sig : {SIGTERM, SIGUSR1}) {
    const std::string dir = base + "/" + std::to_string(sig);
    std::vector<double> losses;
    auto t = tiny_trainer(options(dir, 8, false));
    t->add_hook(std::make_unique<Recorder>(&losses));
    t->add_hook(std::make_unique<RaiseAt>(3, sig));
    testing::internal::CaptureStderr();
    t->train();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(t->iter(), 3);
    EXPECT_EQ(t->stop_signal(), sig);
    EXPECT_EQ(err, "meshflow: received " + std::string(sig == SIGTERM ? "SIGTERM" : "SIGUSR1") +
                       " at step 3: saved checkpoint " + dir + "/checkpoints/iter_0000003, exiting\n");
    EXPECT_TRUE(fs::exists(dir + "/checkpoints/iter_0000003/metadata.json"));
    t.reset();  // releases the run's lock
    const auto rest = run(dir, 0, true, nullptr);
    losses.insert(losses.end(), rest.begin(), rest.end());
    EXPECT_EQ(losses, straight);
  }
  // The handlers are the previous ones again once train() returns.
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  fs::remove_all(base);
}

// A resume keeps the run's sequence length, global batch and seed (they decide which samples come
// next); a changed one is refused naming the key, the new value and the checkpoint's.
TEST(Trainer, ResumeRefusesAChangedSequenceLengthBatchOrSeed) {
  const std::string dir = testing::TempDir() + "/mf_resume_keys_" + std::to_string(::getpid());
  fs::remove_all(dir);
  run(dir, 2, false, nullptr);
  auto o = options(dir, 8, true);
  o.seed = 99;
  MFT_EXPECT_ERROR(tiny_trainer(o)->train(), "train.resume: train.seed 99 differs from 1234 in checkpoint",
                   "iter_0000002", "set train.seed=1234");
  o = options(dir, 8, true);
  o.micro_batch = 4;
  MFT_EXPECT_ERROR(tiny_trainer(o)->train(), "train.global_batch_size 8 (train_micro_batch_size 4 x "
                   "num_accumulation_steps 2 x data_parallel_size 1) differs from 4 in checkpoint",
                   "set train.global_batch_size=4");
  o = options(dir, 8, true);
  o.seq_length = 8;
  MFT_EXPECT_ERROR(tiny_trainer(o)->train(), "data.seq_length 8 differs from 16 in checkpoint", "set data.seq_length=16");
  // The same batch in other factors is the same run.
  o = options(dir, 3, true);
  o.micro_batch = 4;
  o.accumulation_steps = 1;
  auto t = tiny_trainer(o);
  t->train();
  EXPECT_EQ(t->iter(), 3);
  fs::remove_all(dir);
}

// train.resume=true on a folder that does not exist is refused (a misspelled path); on an empty
// one the run starts from step 0 and says so.
TEST(Trainer, ResumeOfAMissingOrEmptyFolder) {
  const std::string dir = testing::TempDir() + "/mf_resume_none_" + std::to_string(::getpid());
  fs::remove_all(dir);
  const std::string missing = "train.resume: train.output_dir '" + dir + "' does not exist: there is no run to resume";
  MFT_EXPECT_ERROR(tiny_trainer(options(dir, 2, true))->train(), missing.c_str());
  EXPECT_FALSE(fs::exists(dir));
  fs::create_directories(dir);
  auto t = tiny_trainer(options(dir, 2, true));
  testing::internal::CaptureStderr();
  t->train();
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "meshflow: train.resume: no checkpoint in " + dir + "/checkpoints: starting from step 0\n");
  EXPECT_EQ(t->iter(), 2);
  fs::remove_all(dir);
}

TEST(Trainer, RefusesOutputDirOfAnotherRunAndPrunes) {
  std::string dir = testing::TempDir() + "/mf_occupied_" + std::to_string(::getpid());
  fs::remove_all(dir);
  auto o = options(dir, 3, false);
  o.checkpoint_period = 1;
  o.max_to_keep = 2;
  o.config_yaml = "train:\n  train_iter: 3\n";
  {
    mf::train::Trainer t(o, tiny_model(), std::make_unique<SyntheticSource>(32, 16),
                         [] { return std::make_unique<SyntheticSource>(32, 16); });
    t.train();
  }
  int n = 0;
  for (auto& e : fs::directory_iterator(fs::path(dir) / "checkpoints")) n += e.is_directory();
  EXPECT_EQ(n, 2);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "config.yaml"));
  mf::train::Trainer again(o, tiny_model(), std::make_unique<SyntheticSource>(32, 16),
                           [] { return std::make_unique<SyntheticSource>(32, 16); });
  MFT_EXPECT_ERROR(again.train(), "already holds a run", "train.resume=true");
  fs::remove_all(dir);
}

}  // namespace

namespace {

// train.profile: the profiled steps' timeline holds every micro-batch's forward and backward inside
// the pipeline schedule inside its step, the global ops with their shapes, the backward ops and
// the phases; the other steps record nothing.
TEST(Trainer, ProfileWritesTheTimelineOfTheChosenSteps) {
  const std::string dir = testing::TempDir() + "/mf_profile_" + std::to_string(::getpid());
  fs::remove_all(dir);
  auto model = tiny_model();
  auto opts = options(dir, 5, false);
  opts.profile.enabled = true;
  opts.profile.start_step = 2;
  opts.profile.num_steps = 2;
  opts.eval_period = 3;
  mf::train::Trainer t(opts, model, std::make_unique<SyntheticSource>(32, 16),
                       [] { return std::make_unique<SyntheticSource>(32, 16); });
  t.add_hook(std::make_unique<mf::train::TraceHook>());
  t.train();
  const nlohmann::json j = nlohmann::json::parse(mf::read_file((fs::path(dir) / "trace.json").string()));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "trace" / "rank_00000.json"));
  EXPECT_EQ(j["otherData"]["start_step"], 2);
  EXPECT_EQ(j["otherData"]["num_steps"], 2);
  EXPECT_EQ(j["otherData"]["micro_batches"], 2);
  std::map<std::string, std::vector<nlohmann::json>> by_cat;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") by_cat[e["cat"]].push_back(e);
  ASSERT_EQ(by_cat["step"].size(), 2u);
  EXPECT_EQ(by_cat["step"][0]["args"]["step"], 2);
  EXPECT_EQ(by_cat["step"][1]["args"]["step"], 3);
  EXPECT_EQ(by_cat["schedule"].size(), 2u);
  EXPECT_EQ(by_cat["forward"].size(), 4u);  // 2 steps x 2 micro-batches
  EXPECT_EQ(by_cat["backward"].size(), 4u);
  EXPECT_EQ(by_cat["optimizer"].size(), 2u);
  EXPECT_EQ(by_cat["eval"].size(), 1u);  // step 3's evaluation
  EXPECT_GE(by_cat["eval_forward"].size(), 2u);
  auto inside = [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["ts"].get<double>() >= b["ts"].get<double>() &&
           a["ts"].get<double>() + a["dur"].get<double>() <= b["ts"].get<double>() + b["dur"].get<double>();
  };
  for (const auto& f : by_cat["forward"]) {
    const int step = f["ts"].get<double>() < by_cat["step"][1]["ts"].get<double>() ? 0 : 1;
    EXPECT_TRUE(inside(f, by_cat["schedule"][static_cast<size_t>(step)]));
    EXPECT_TRUE(inside(by_cat["schedule"][static_cast<size_t>(step)], by_cat["step"][static_cast<size_t>(step)]));
  }
  bool matmul = false, backward_op = false;
  for (const auto& e : by_cat["op"])
    if (e["name"].get<std::string>().rfind("affine", 0) == 0 && e["args"]["shapes"].get<std::string>().find("(2, 16, 16)") != std::string::npos) matmul = true;
  for (const auto& e : by_cat["op_backward"])
    if (e["name"].get<std::string>().find(" backward") != std::string::npos) backward_op = true;
  EXPECT_TRUE(matmul);
  EXPECT_TRUE(backward_op);
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- the MFU denominator

// /proc/cpuinfo of a 2-core AVX-512 virtual machine (the lines that matter).
const char* kCpuinfo2Cores =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2694.854\n"
    "flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq\n\n"
    "processor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2694.854\n"
    "flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq\n\n";

TEST(PeakFlops, NominalPeakFromTheCpuDescription) {
  const mf::runtime::CpuSpec c = mf::runtime::parse_cpu_spec(kCpuinfo2Cores, 0);
  EXPECT_EQ(c.cores, 2);
  EXPECT_EQ(c.model, "AMD EPYC");
  EXPECT_DOUBLE_EQ(c.max_ghz, 2.694854);
  EXPECT_STREQ(c.isa, "AVX-512");
  EXPECT_EQ(c.f32_lanes, 16);
  EXPECT_TRUE(c.fma);
  EXPECT_DOUBLE_EQ(mf::runtime::nominal_flops_per_cycle(c), 64);  // 16 lanes x 2 (FMA) x 2 units
  EXPECT_DOUBLE_EQ(mf::runtime::nominal_peak_flops(c, 2), 2 * 2.694854e9 * 64);
  EXPECT_DOUBLE_EQ(mf::runtime::nominal_peak_flops(c, 8), 2 * 2.694854e9 * 64);  // a thread per core counts
  EXPECT_DOUBLE_EQ(mf::runtime::nominal_peak_flops(c, 1), 2.694854e9 * 64);
  // cpufreq's maximum wins over the current clock; a model name's "@ x GHz" over "cpu MHz".
  EXPECT_DOUBLE_EQ(mf::runtime::parse_cpu_spec(kCpuinfo2Cores, 3.7e6).max_ghz, 3.7);
  const mf::runtime::CpuSpec xeon = mf::runtime::parse_cpu_spec(
      "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz\ncpu MHz\t\t: 1000.0\n"
      "flags\t\t: sse avx fma avx2\n", 0);
  EXPECT_DOUBLE_EQ(xeon.max_ghz, 2.4);
  EXPECT_STREQ(xeon.isa, "AVX2");
  EXPECT_DOUBLE_EQ(mf::runtime::nominal_flops_per_cycle(xeon), 32);
  // Nothing known: no nominal peak (the measurement is then the peak).
  EXPECT_EQ(mf::runtime::nominal_peak_flops(mf::runtime::parse_cpu_spec("", 0), 4), 0.0);
}

// The quickstart on a busy machine printed MFU 251%: its peak was one FMA measurement taken while
// other processes held the cores (30 GFLOP/s of 2 cores whose nominal peak is 345), and its steps
// did 75 GFLOP/s. The peak is now the nominal one, which load cannot lower.
TEST(PeakFlops, AMeasurementUnderLoadDoesNotMakeMfuExceed100Percent) {
  const mf::runtime::CpuSpec c = mf::runtime::parse_cpu_spec(kCpuinfo2Cores, 0);
  const double measured_under_load = 30e9, achieved = 75e9;
  const mf::runtime::PeakFlops p = mf::runtime::choose_cpu_peak(c, 2, measured_under_load);
  EXPECT_DOUBLE_EQ(p.flops, 2 * 2.694854e9 * 64);
  EXPECT_NE(p.source.find("nominal: 2 cores x 2.69 GHz x 64 f32 FLOPs/cycle (AVX-512 FMA, 2 units); measured 30.0 GFLOP/s"),
            std::string::npos) << p.source;
  mf::runtime::PeakTracker peak(p);
  EXPECT_EQ(peak.observe(achieved, [] { return 30e9; }), "");  // below the peak: nothing to raise
  EXPECT_LE(peak.mfu(achieved), 1.0);
  EXPECT_NEAR(peak.mfu(achieved), 75.0 / 344.94, 1e-3);
  // A measurement above the nominal peak (a clock boosted past the one known) is the peak.
  const mf::runtime::PeakFlops fast = mf::runtime::choose_cpu_peak(c, 2, 400e9);
  EXPECT_DOUBLE_EQ(fast.flops, 400e9);
  EXPECT_NE(fast.source.find("measured FMA rate, above the nominal 344.9 GFLOP/s"), std::string::npos) << fast.source;
}

// A step faster than the peak in use proves that peak wrong: it is raised (to a fresh measurement,
// else to the step's own rate) and the log says so; MFU stays at most 100%.
TEST(PeakFlops, AStepAboveThePeakRaisesIt) {
  mf::runtime::PeakTracker peak({100e9, "measured FMA rate"});
  int measured = 0;
  const std::string note = peak.observe(150e9, [&] {
    ++measured;
    return 180e9;
  });
  EXPECT_EQ(measured, 1);
  EXPECT_DOUBLE_EQ(peak.flops(), 180e9);
  EXPECT_NE(note.find("peak raised from 100.0 to 180.0 GFLOP/s: a step did 150.0 GFLOP/s"), std::string::npos) << note;
  EXPECT_NE(peak.source().find("re-measured"), std::string::npos);
  EXPECT_LE(peak.mfu(150e9), 1.0);
  // The fresh measurement reads lower still (the machine is busy): the step's rate is the peak.
  const std::string again = peak.observe(200e9, [] { return 50e9; });
  EXPECT_DOUBLE_EQ(peak.flops(), 200e9);
  EXPECT_NE(again.find("a fresh measurement read 50.0 GFLOP/s"), std::string::npos) << again;
  EXPECT_LE(peak.mfu(200e9), 1.0);
  // An unknown peak (a GPU not in the table) is not made up from a rate: MFU stays 0.
  mf::runtime::PeakTracker unknown({0, "unknown"});
  EXPECT_EQ(unknown.observe(1e12, nullptr), "");
  EXPECT_EQ(unknown.mfu(1e12), 0.0);
}

}  // namespace
