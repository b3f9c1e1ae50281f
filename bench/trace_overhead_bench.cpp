// What train.profile costs a step: one run in which every other step (from step 3) is recorded
// (core/trace.h, with the memory counter sampled as train::TraceHook does) and the others are
// not, so that the machine's drift falls on both alike. Prints the mean and median step time of
// each kind, their ratio, and the events recorded per step. Writing the trace after the window
// (to_json, the files, the merge on rank 0) is not part of any step and not counted.
// P ranks run P pipeline stages (1F1B), so collectives and their waits are recorded too.
// Usage: [mpirun -np P] meshflow_trace_overhead_bench [steps layers hidden heads seq micro_batch micro_batches vocab]
//   defaults: 40 steps of a GPT-2 like configs/gpt2/tiny.yaml (4 layers, 128 hidden, 4 heads,
//   128 tokens, micro-batch 8, 1 micro-batch, 50257 words).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <unistd.h>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/core/trace.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/train/synthetic_batches.h"
#include "meshflow/train/trainer.h"

namespace {

int64_t allocated_bytes() { return mf::allocator_for(mf::cpu_device()).stats().current_bytes; }

struct Alternate : mf::train::HookBase {
  std::vector<double> on, off;
  size_t events = 0;
  bool tracing = false;
  void before_step(mf::train::Trainer& t) override {
    const int64_t step = t.iter() + 1;
    if (step < 3) return;  // the first steps warm the allocator
    mf::parallel::barrier(t.groups().everyone());  // every rank records the same steps
    if (step % 2 == 1) {
      mf::trace::start();
      tracing = true;
    }
  }
  void after_step(mf::train::Trainer& t, const mf::train::StepStats& s) override {
    if (tracing) {
      events += mf::trace::stop().size();
      tracing = false;
      on.push_back(s.step_seconds);
    } else if (t.iter() >= 3) {
      off.push_back(s.step_seconds);
    }
  }
};

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  mf::comm::MpiRuntime mpi(&argc, &argv);
  mf::comm::CommPtr world = mpi.world();
  const int p = world->size(), s = world->rank();
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  const int64_t steps = arg(1, 40), T = arg(5, 128), mb = arg(6, 8), m = arg(7, 1);
  mf::models::Gpt2Config c;
  c.num_layers = arg(2, 4);
  c.hidden_size = arg(3, 128);
  c.num_attention_heads = arg(4, 4);
  c.ffn_hidden_size = 4 * c.hidden_size;
  c.max_seq_length = T;
  c.vocab_size = arg(8, 50257);
  const int64_t per = c.num_layers / p;
  mf::models::PipelineStage stage{s * per, s == p - 1 ? c.num_layers : (s + 1) * per, s == 0, s == p - 1, {}};
  auto model = std::make_shared<mf::models::Gpt2Model>(c, mf::models::ModelContext{{}, stage});
  model->init_weights(1);
  mf::runtime::TrainOptions o;
  o.output_dir = (std::filesystem::temp_directory_path() / ("meshflow_trace_overhead_" + std::to_string(getppid()))).string();
  o.train_iter = steps;
  o.micro_batch = mb;
  o.accumulation_steps = m;
  o.seq_length = T;
  o.eval_enabled = false;
  o.checkpoint_period = 1000000;
  mf::train::Trainer t(o, model, std::make_unique<mf::train::SyntheticBatchSource>(c.vocab_size, T),
                       [&] { return std::make_unique<mf::train::SyntheticBatchSource>(c.vocab_size, T); });
  if (p > 1) t.set_parallel(nullptr, nullptr, world, world);
  auto hook = std::make_unique<Alternate>();
  Alternate* h = hook.get();
  t.add_hook(std::move(hook));
  mf::trace::set_memory_probe(&allocated_bytes);
  t.train();
  if (s == 0) {
    std::printf("GPT-2 %lld layers, hidden %lld, vocab %lld, micro-batch %lld x %lld, %lld micro-batches, %d stage(s); "
                "steps 3..%lld, every other one recorded\n",
                static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
                static_cast<long long>(c.vocab_size), static_cast<long long>(mb), static_cast<long long>(T),
                static_cast<long long>(m), p, static_cast<long long>(steps));
    std::printf("step time  not recorded: mean %.4f s, median %.4f s (%zu steps)\n", mean(h->off), median(h->off), h->off.size());
    std::printf("step time      recorded: mean %.4f s, median %.4f s (%zu steps), %.0f events per step (rank 0)\n",
                mean(h->on), median(h->on), h->on.size(), static_cast<double>(h->events) / static_cast<double>(h->on.size()));
    std::printf("profiling overhead: %+.2f%% (means), %+.2f%% (medians)\n", 100 * (mean(h->on) / mean(h->off) - 1),
                100 * (median(h->on) / median(h->off) - 1));
  }
  world->barrier()->wait();
  if (s == 0) std::filesystem::remove_all(o.output_dir);
  return 0;
}
