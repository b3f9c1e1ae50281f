// BERT pretraining throughput: tokens/s and MFU of full training steps (forward, backward,
// clipping, AdamW) of masked LM + next-sentence prediction on a synthetic batch (bench/
// train_steps.h), f32, no dropout. The default is BERT-base: 12 layers, 768 hidden, 12 heads, MLP
// 3072, the 30522-token WordPiece vocabulary; sequences of 128 with token types (the second half
// segment B), the odd rows' last quarter padding, 15% of the real positions predicted. The
// masked-LM head runs on the predicted positions only. MFU uses BertModel::flops_per_token (6 *
// the encoder's and heads' parameters, the masked-LM head's at the 15% it computes, + 12 * layers *
// hidden * seq). bench/bert_torch.py trains the same model and batch with PyTorch
// (scripts/bench_train.sh bert runs both).
// Usage: meshflow_bert_train_bench [layers hidden heads ffn seq micro_batch steps]
#include <cstdlib>

#include "meshflow/models/bert/model.h"
#include "train_steps.h"

int main(int argc, char** argv) {
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  mf::models::BertConfig c;
  c.num_layers = arg(1, 12);
  c.hidden_size = arg(2, 768);
  c.num_attention_heads = arg(3, 12);
  c.ffn_hidden_size = arg(4, 3072);
  const int64_t T = arg(5, 128), B = arg(6, 8), steps = arg(7, 6);
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob = 0.0;
  mf::models::BertModel model(c);
  model.init_weights(1);
  // The batch: the layout bench/bert_torch.py builds (values drawn by Philox from their position).
  std::vector<int64_t> ids(static_cast<size_t>(B * T)), types(ids.size()), mask(ids.size()), labels(ids.size(), -100),
      nsp(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    nsp[static_cast<size_t>(b)] = b % 2;
    for (int64_t t = 0; t < T; ++t) {
      const size_t i = static_cast<size_t>(b * T + t);
      const bool real = b % 2 == 0 || t < T - T / 4;
      ids[i] = real ? 1000 + static_cast<int64_t>(mf::philox_uniform(1, 0, i) * 29000.0) : 0;
      types[i] = real && t >= T / 2 ? 1 : 0;
      mask[i] = real ? 1 : 0;
      if (real && t > 0 && mf::philox_uniform(1, 1, i) < 0.15)
        labels[i] = 1000 + static_cast<int64_t>(mf::philox_uniform(1, 2, i) * 29000.0);
    }
  }
  mf::models::Batch batch(mf::from_vector(ids, {B, T}), mf::from_vector(labels, {B, T}));
  batch.token_type_ids = mf::from_vector(types, {B, T});
  batch.attention_mask = mf::from_vector(mask, {B, T});
  batch.next_sentence_label = mf::from_vector(nsp, {B});
  mfb::time_training_steps(model, batch, steps);
  return 0;
}
