// GPT-2 training throughput: tokens/s and MFU of full training steps (forward, backward,
// clipping, AdamW) on synthetic tokens (bench/train_steps.h). MFU uses 6 * params + 12 * layers *
// hidden * seq FLOPs per token. bench/gpt2_torch.py trains the same model and batch with PyTorch
// for comparison (scripts/bench_gpt2.sh runs both).
// Usage: meshflow_gpt2_train_bench [layers hidden heads seq micro_batch steps]
#include <cstdlib>

#include "meshflow/models/gpt2/model.h"
#include "train_steps.h"

int main(int argc, char** argv) {
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  mf::models::Gpt2Config c;
  c.num_layers = arg(1, 12);
  c.hidden_size = arg(2, 768);
  c.num_attention_heads = arg(3, 12);
  const int64_t T = arg(4, 256), B = arg(5, 4), steps = arg(6, 6);
  c.max_seq_length = 1024;
  mf::models::Gpt2Model model(c);
  model.init_weights(1);
  mfb::time_training_steps(model, c.vocab_size, B, T, steps);
  return 0;
}
