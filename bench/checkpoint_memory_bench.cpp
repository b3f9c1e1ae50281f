// Activation checkpointing: the activation peak of one training forward + backward of GPT-2
// without recomputation, with full blocks recomputed and with only the attention core
// recomputed (selective), and the time each takes. The activation peak is the allocator's peak
// minus the parameters and their gradients (allocated before the step, as in training), so it
// counts what the step itself holds: kept activations, the logits, transient gradients. A
// warm-up step first, so that no mode's time includes first-touch page faults.
// Usage: meshflow_checkpoint_memory_bench [layers hidden heads seq micro_batch]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "meshflow/models/gpt2/model.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/philox.h"
#include "meshflow/tensor/allocator.h"

namespace {

struct Measured {
  double kept_mb = 0, peak_mb = 0, seconds = 0, loss = 0;
};

Measured measure(mf::models::Gpt2Config c, bool enabled, mf::models::CheckpointGranularity g, const mf::Tensor& x,
                 const mf::Tensor& y) {
  c.activation_checkpointing = enabled;
  c.checkpoint_granularity = g;
  auto& alloc = mf::allocator_for(mf::cpu_device());
  mf::models::Gpt2Model model(c);
  model.init_weights(1);
  model.train();
  for (auto& [name, p] : model.named_parameters()) p.set_grad(mf::zeros(p.shape(), p.dtype()));
  mf::manual_seed(7);
  const int64_t base = alloc.stats().current_bytes;  // parameters + gradients (+ the batch)
  alloc.reset_peak();
  auto t0 = std::chrono::steady_clock::now();
  Measured m;
  mf::Tensor loss = model.loss(x, y);
  m.kept_mb = static_cast<double>(alloc.stats().current_bytes - base) / 1e6;
  m.loss = loss.item();
  loss.backward();
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.peak_mb = static_cast<double>(alloc.stats().peak_bytes - base) / 1e6;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  mf::models::Gpt2Config c;  // GPT-2 small by default
  c.num_layers = arg(1, 12);
  c.hidden_size = arg(2, 768);
  c.num_attention_heads = arg(3, 12);
  const int64_t T = arg(4, 1024), B = arg(5, 1);
  c.max_seq_length = T;
  std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>(mf::philox_uniform(1, 0, i) * c.vocab_size);
    labels[i] = static_cast<int64_t>(mf::philox_uniform(1, 1, i) * c.vocab_size);
  }
  mf::Tensor x = mf::from_vector(ids, {B, T}), y = mf::from_vector(labels, {B, T});
  std::printf("GPT-2 %lld layers, hidden %lld, %lld heads, vocabulary %lld, micro-batch %lld x %lld, f32, dropout 0.1\n",
              static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.vocab_size),
              static_cast<long long>(B), static_cast<long long>(T));
  std::printf("%-12s %22s %22s %10s %12s\n", "recompute", "kept after forward MB", "activation peak MB", "seconds", "loss");
  using G = mf::models::CheckpointGranularity;
  measure(c, false, G::kFull, x, y);  // warm-up: the allocator's cache holds the step's blocks after it
  const Measured none = measure(c, false, G::kFull, x, y);
  std::printf("%-12s %22.1f %22.1f %10.2f %12.6f\n", "none", none.kept_mb, none.peak_mb, none.seconds, none.loss);
  const Measured full = measure(c, true, G::kFull, x, y);
  std::printf("%-12s %22.1f %22.1f %10.2f %12.6f\n", "full", full.kept_mb, full.peak_mb, full.seconds, full.loss);
  const Measured sel = measure(c, true, G::kSelective, x, y);
  std::printf("%-12s %22.1f %22.1f %10.2f %12.6f\n", "selective", sel.kept_mb, sel.peak_mb, sel.seconds, sel.loss);
  std::printf("activation peak, none / full: %.2fx, none / selective: %.2fx; time full / none: %.2f, selective / none: "
              "%.2f; losses identical: %s\n",
              none.peak_mb / full.peak_mb, none.peak_mb / sel.peak_mb, full.seconds / none.seconds,
              sel.seconds / none.seconds, none.loss == full.loss && none.loss == sel.loss ? "yes" : "no");
  return 0;
}
