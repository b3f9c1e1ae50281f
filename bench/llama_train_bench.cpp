// Llama training throughput: tokens/s and MFU of full training steps (forward, backward,
// clipping, AdamW) on synthetic tokens (bench/train_steps.h), f32. The default is a 125M Llama:
// 12 layers, 768 hidden, 12 heads over 4 key/value heads, SwiGLU 2048, Llama 2's 32000-token
// vocabulary, untied head. MFU uses 6 * (parameters but the input embedding) + 12 * layers *
// heads * head_dim * seq FLOPs per token. bench/llama_torch.py trains the same model and batch
// with PyTorch (scripts/bench_train.sh llama runs both).
// Usage: meshflow_llama_train_bench [layers hidden heads kv_heads ffn seq micro_batch steps]
#include <cstdlib>

#include "meshflow/models/llama/model.h"
#include "train_steps.h"

int main(int argc, char** argv) {
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  mf::models::LlamaConfig c;
  c.num_layers = arg(1, 12);
  c.hidden_size = arg(2, 768);
  c.num_attention_heads = arg(3, 12);
  c.num_key_value_heads = arg(4, 4);
  c.ffn_hidden_size = arg(5, 2048);
  const int64_t T = arg(6, 256), B = arg(7, 4), steps = arg(8, 6);
  c.vocab_size = 32000;
  c.max_seq_length = 4096;
  c.layernorm_epsilon = 1e-5;
  mf::models::LlamaModel model(c);
  model.init_weights(1);
  mfb::time_training_steps(model, c.vocab_size, B, T, steps);
  return 0;
}
