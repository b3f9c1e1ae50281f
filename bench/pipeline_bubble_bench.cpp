// Pipeline bubble: the share of a step each stage spends waiting for its neighbours, measured,
// beside the theoretical (p - 1) / (m + p - 1) of GPipe and 1F1B (p stages, m micro-batches) and
// (p - 1) / (v m + p - 1) of interleaved 1F1B with v = 2 chunks per rank.
// The last step is also profiled (train.profile, train/trace_hook.h): the bubble the merged
// trace's forward/backward spans give (report/trace_summary.h) is printed beside the executor's
// waits of that same step.
// Run under mpirun, one rank per stage (`mpirun -np 2 meshflow_pipeline_bubble_bench`), with
// one core per rank so that stages do not slow each other down.
// Usage: meshflow_pipeline_bubble_bench [micro_batches layers_per_stage hidden heads seq micro_batch steps]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "meshflow/models/gpt2/model.h"
#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/report/trace_summary.h"
#include "meshflow/train/trace_hook.h"
#include "meshflow/train/synthetic_batches.h"
#include "meshflow/train/trainer.h"

namespace {

struct StepHook : mf::train::HookBase {
  double wait = 0, total = 0, last = 0;  // last: the last step's wait / total
  int steps = 0;
  void after_step(mf::train::Trainer& t, const mf::train::StepStats&) override {
    const auto& st = t.last_pipeline_stats();
    last = st.step_seconds > 0 ? st.wait_seconds / st.step_seconds : 0;
    if (++steps == 1) return;  // the first step warms the allocator
    wait += st.wait_seconds;
    total += st.step_seconds;
  }
};

// Every rank's value, on every rank.
std::vector<double> gather(mf::comm::Communicator& world, double mine) {
  mf::Tensor all = mf::zeros({world.size()}, mf::DType::kF64);
  all.data<double>()[world.rank()] = mine;
  world.all_reduce(all)->wait();
  return {all.data<double>(), all.data<double>() + world.size()};
}

}  // namespace

int main(int argc, char** argv) {
  mf::comm::MpiRuntime mpi(&argc, &argv);
  mf::comm::CommPtr world = mpi.world();
  const int p = world->size(), s = world->rank();
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  const int64_t m = arg(1, 8), per = arg(2, 2), T = arg(5, 256), mb = arg(6, 2), steps = arg(7, 3);
  mf::models::Gpt2Config c;
  c.num_layers = per * p;
  c.hidden_size = arg(3, 512);
  c.num_attention_heads = arg(4, 8);
  c.max_seq_length = T;
  c.vocab_size = 256;  // a light head, so the stages stay balanced (the theory assumes equal stages)
  if (s == 0)
    std::printf("GPT-2 pipeline: %d stages x %lld layers, hidden %lld, micro-batch %lld x %lld, %lld micro-batches\n", p,
                static_cast<long long>(per), static_cast<long long>(c.hidden_size), static_cast<long long>(mb),
                static_cast<long long>(T), static_cast<long long>(m));
  for (const char* schedule : {"gpipe", "1f1b", "interleaved_1f1b"}) {
    const bool il = std::string(schedule) == "interleaved_1f1b";
    const int64_t v = il ? 2 : 1, layers = per / v;  // interleaved: 2 chunks of per / 2 layers
    mf::models::PipelineStage stage{s * layers, (s + 1) * layers, s == 0, s == p - 1, {}};
    if (il) stage.later_chunks.push_back({(p + s) * layers, (p + s + 1) * layers});
    auto model = std::make_shared<mf::models::Gpt2Model>(c, mf::models::ModelContext{{}, stage});
    model->init_weights(1);
    mf::runtime::TrainOptions o;
    o.output_dir = (std::filesystem::temp_directory_path() / ("meshflow_bubble_" + std::to_string(getppid()) + "_" + schedule)).string();
    o.train_iter = steps;
    o.micro_batch = mb;
    o.accumulation_steps = m;
    o.seq_length = T;
    o.eval_enabled = false;
    o.checkpoint_period = 1000000;
    o.pipeline_schedule = schedule;
    o.profile.enabled = true;
    o.profile.start_step = steps;
    o.profile.num_steps = 1;
    mf::train::Trainer t(o, model, std::make_unique<mf::train::SyntheticBatchSource>(c.vocab_size, T),
                         [&] { return std::make_unique<mf::train::SyntheticBatchSource>(c.vocab_size, T); });
    t.set_parallel(nullptr, nullptr, world, world);
    auto hook = std::make_unique<StepHook>();
    StepHook* h = hook.get();
    t.add_hook(std::move(hook));
    t.add_hook(std::make_unique<mf::train::TraceHook>());
    t.train();
    const std::vector<double> last = gather(*world, h->last);
    double frac = h->total > 0 ? h->wait / h->total : 0;
    mf::Tensor all = mf::zeros({p}, mf::DType::kF64);
    all.data<double>()[s] = frac;
    world->all_reduce(all)->wait();
    if (s == 0) {
      std::printf("%-16s measured bubble per stage:", schedule);
      double mean = 0;
      for (int k = 0; k < p; ++k) {
        std::printf(" %.3f", all.data<double>()[k]);
        mean += all.data<double>()[k] / p;
      }
      std::printf(" (mean %.3f); theory (p-1)/(v m+p-1) = %.3f (v = %lld)\n", mean,
                  static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1), static_cast<long long>(v));
      const mf::report::PipelineBubble b = mf::report::pipeline_bubble(
          nlohmann::json::parse(mf::read_file((std::filesystem::path(o.output_dir) / "trace.json").string())));
      if (!b.steps.empty()) {
        const mf::report::StepBubble& st = b.steps.back();
        std::printf("%-16s profiled step %lld per stage, executor waits / trace (1 - forward+backward spans):", "",
                    static_cast<long long>(st.step));
        for (const mf::report::RankBubble& r : st.ranks)
          std::printf(" %.3f / %.3f", last[static_cast<size_t>(r.rank)], r.bubble);
        std::printf(" (trace mean %.3f)\n", st.mean);
      }
      std::filesystem::remove_all(o.output_dir);
    }
    world->barrier()->wait();
  }
  return 0;
}
