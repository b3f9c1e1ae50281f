// Tensor-parallel memory: per-rank bytes of the weights and of the activations a training
// forward keeps for backward, with and without sequence parallelism, against one process.
// Run under mpirun (`mpirun -np 2 meshflow_tp_memory_bench`); every rank is one tp rank.
// Megatron-LM's estimate per layer (bytes, 16-bit; ours are f32 but the ratios hold):
// s·b·h·(34 + 5·a·s/h) on one device, (10 + 24/t + 5·a·s/(h·t)) with t-way tensor parallelism and
// (34/t + 5·a·s/(h·t)) with sequence parallelism added.
// Usage: meshflow_tp_memory_bench [layers hidden heads seq micro_batch]
#include <cstdio>
#include <cstdlib>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/philox.h"
#include "meshflow/tensor/allocator.h"

namespace {

struct Measured {
  double weights_mb = 0, activations_mb = 0, peak_mb = 0;
};

Measured measure(const mf::models::Gpt2Config& c, const mf::layers::Place& tp, const mf::Tensor& x,
                 const mf::Tensor& y) {
  auto& alloc = mf::allocator_for(mf::cpu_device());
  const int64_t base = alloc.stats().current_bytes;
  Measured m;
  mf::models::Gpt2Model model(c, {tp, {}});
  model.init_weights(1);
  const int64_t with_weights = alloc.stats().current_bytes;
  m.weights_mb = static_cast<double>(with_weights - base) / 1e6;
  alloc.reset_peak();
  mf::Tensor loss = model.loss(x, y);
  m.activations_mb = static_cast<double>(alloc.stats().current_bytes - with_weights) / 1e6;
  loss.backward();  // the loss head seeds each tp rank with 1/tp of the gradient
  m.peak_mb = static_cast<double>(alloc.stats().peak_bytes - with_weights) / 1e6;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  mf::comm::MpiRuntime mpi(&argc, &argv);
  mf::comm::CommPtr world = mpi.world();
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  mf::models::Gpt2Config c;
  c.num_layers = arg(1, 4);
  c.hidden_size = arg(2, 768);
  c.num_attention_heads = arg(3, 12);
  const int64_t T = arg(4, 512), B = arg(5, 2);
  c.max_seq_length = T;
  std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>(mf::philox_uniform(1, 0, i) * c.vocab_size);
    labels[i] = static_cast<int64_t>(mf::philox_uniform(1, 1, i) * c.vocab_size);
  }
  mf::Tensor x = mf::from_vector(ids, {B, T}), y = mf::from_vector(labels, {B, T});
  const int t = world->size();
  Measured one;
  if (world->rank() == 0) one = measure(c, {}, x, y);  // the same model on one process
  world->barrier()->wait();
  Measured plain = measure(c, mf::layers::Place({{"tp", world}}, world, false), x, y);
  Measured sp = measure(c, mf::layers::Place({{"tp", world}}, world, true), x, y);
  if (world->rank() == 0) {
    const double a = static_cast<double>(c.num_attention_heads), s = static_cast<double>(T),
                 h = static_cast<double>(c.hidden_size);
    const double m1 = 34 + 5 * a * s / h, mt = 10 + 24.0 / t + 5 * a * s / (h * t), msp = 34.0 / t + 5 * a * s / (h * t);
    std::printf("GPT-2 %lld layers, hidden %lld, %lld heads, micro-batch %lld x %lld, vocabulary %lld; tp = %d\n",
                static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
                static_cast<long long>(c.num_attention_heads), static_cast<long long>(B), static_cast<long long>(T),
                static_cast<long long>(c.vocab_size), t);
    std::printf("%-28s %12s %22s %22s\n", "rank 0", "weights MB", "activations kept MB", "fwd+bwd peak extra MB");
    std::printf("%-28s %12.1f %22.1f %22.1f\n", "one process", one.weights_mb, one.activations_mb, one.peak_mb);
    std::printf("%-28s %12.1f %22.1f %22.1f\n", "tensor parallel", plain.weights_mb, plain.activations_mb, plain.peak_mb);
    std::printf("%-28s %12.1f %22.1f %22.1f\n", "tensor + sequence parallel", sp.weights_mb, sp.activations_mb, sp.peak_mb);
    std::printf("activations vs one process: tp %.3f, tp+sp %.3f (Megatron's per-layer estimate: %.3f, %.3f); "
                "weights: %.3f (1/tp = %.3f)\n",
                plain.activations_mb / one.activations_mb, sp.activations_mb / one.activations_mb, mt / m1, msp / m1,
                plain.weights_mb / one.weights_mb, 1.0 / t);
  }
  return 0;
}
