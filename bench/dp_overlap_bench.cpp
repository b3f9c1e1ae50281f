// Data-parallel overlap: how much of the gradient all-reduce hides behind backward.
// Run under mpirun (e.g. `mpirun -np 2 meshflow_dp_overlap_bench`): each rank trains GPT-2 on
// its own synthetic micro-batch; the GradReducer reduces buckets (launched from grad-ready hooks)
// while backward runs. Per step it prints a timeline (seconds since backward started): the
// backward end, every bucket's launch and observed completion, and the exposed communication
// (bucket reduction still running after backward returned) as a share of the step. A second
// pass arms the reducer only after backward (no overlap) to show what the reduction costs
// when it is not hidden.
// Usage: meshflow_dp_overlap_bench [layers hidden heads seq micro_batch steps bucket_mb]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/parallel/grad_reducer.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/random/philox.h"

namespace {

struct PassResult {
  double step_s = 0, backward_s = 0, exposed_s = 0;  // summed over the measured steps
};

double elapsed(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  mf::comm::MpiRuntime mpi(&argc, &argv);
  mf::comm::CommPtr world = mpi.world();
  const int rank = world->rank(), n = world->size();
  auto arg = [&](int i, double def) { return argc > i ? std::atof(argv[i]) : def; };
  mf::models::Gpt2Config c;
  c.num_layers = static_cast<int64_t>(arg(1, 12));
  c.hidden_size = static_cast<int64_t>(arg(2, 768));
  c.num_attention_heads = static_cast<int64_t>(arg(3, 12));
  const int64_t T = static_cast<int64_t>(arg(4, 256)), B = static_cast<int64_t>(arg(5, 1));
  const int steps = static_cast<int>(arg(6, 3));
  const double bucket_mb = arg(7, 25);
  c.max_seq_length = 1024;
  mf::models::Gpt2Model model(c);
  model.init_weights(1);
  mf::optim::AdamW opt(mf::optim::default_param_groups(model, 0.1), 6e-4, 0.9, 0.95, 1e-8);
  mf::parallel::GradReducer reducer(model.parameters(), world, static_cast<int64_t>(bucket_mb * (1 << 20)));
  std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {  // each rank its own rows
    ids[i] = static_cast<int64_t>(mf::philox_uniform(1, static_cast<uint64_t>(2 * rank), i) * c.vocab_size);
    labels[i] = static_cast<int64_t>(mf::philox_uniform(1, static_cast<uint64_t>(2 * rank + 1), i) * c.vocab_size);
  }
  mf::Tensor x = mf::from_vector(ids, {B, T}), y = mf::from_vector(labels, {B, T});
  if (rank == 0)
    std::printf("GPT-2 data parallel: %d ranks x %d threads; %lld layers, hidden %lld, %.1fM params (%.1f MB of f32 "
                "gradients); micro-batch %lld x %lld per rank; %d buckets of >= %.0f MB\n",
                n, omp_get_max_threads(), static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
                model.num_parameters() / 1e6, reducer.total_grad_bytes() / 1e6, static_cast<long long>(B),
                static_cast<long long>(T), reducer.num_buckets(), bucket_mb);

  auto run = [&](bool overlap, const char* name) {
    PassResult sum;
    for (int s = 0; s < steps; ++s) {
      world->barrier()->wait();
      auto t0 = std::chrono::steady_clock::now();
      opt.zero_grad();
      mf::Tensor loss = model.loss(x, y);
      const double fwd_s = elapsed(t0);
      if (overlap) reducer.prepare();
      loss.backward();
      const double bwd_end = elapsed(t0);
      if (!overlap) reducer.prepare();  // every bucket launches in finish(), after backward
      reducer.finish();
      const double exposed_s = elapsed(t0) - bwd_end;  // reduction still running after backward returned
      opt.step();
      const double step_s = elapsed(t0), bwd_s = bwd_end - fwd_s;
      const mf::parallel::ReduceTimeline& tl = reducer.last_timeline();
      if (rank == 0) {
        std::printf("[%s] step %d: forward %.3f s, backward %.3f s, step %.3f s; exposed communication %.4f s = %.2f%% "
                    "of the step\n",
                    name, s, fwd_s, bwd_s, step_s, exposed_s, 100 * exposed_s / step_s);
        std::printf("  timeline (s since backward start): backward ends %.3f; buckets (MB: launch -> done):", tl.backward_s);
        for (size_t b = 0; b < tl.buckets.size(); ++b)
          std::printf(" #%zu %.1f: %.3f->%.3f%s", b, tl.buckets[b].nbytes / 1e6, tl.buckets[b].launch_s,
                      tl.buckets[b].done_s, tl.buckets[b].done_s < tl.backward_s ? " (hidden)" : "");
        std::printf("\n");
      }
      if (s > 0 || steps == 1) {  // the first step warms the allocator's cache
        sum.step_s += step_s;
        sum.backward_s += bwd_s;
        sum.exposed_s += exposed_s;
      }
    }
    return sum;
  };
  PassResult ov = run(true, "overlap");
  PassResult seq = run(false, "after backward");
  if (rank == 0)
    std::printf("exposed communication: overlapped %.4f s/step = %.2f%% of the step; not overlapped %.4f s/step = "
                "%.2f%%; %.0f%% of the reduction time hidden behind backward\n",
                ov.exposed_s / std::max(1, steps - 1), 100 * ov.exposed_s / ov.step_s,
                seq.exposed_s / std::max(1, steps - 1), 100 * seq.exposed_s / seq.step_s,
                seq.exposed_s > 0 ? 100 * (1 - ov.exposed_s / seq.exposed_s) : 0.0);
  return 0;
}
