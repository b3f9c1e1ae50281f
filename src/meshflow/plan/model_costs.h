// What the planner knows of a model before any weight exists: its parameters by part (embedding,
// each layer, head) and how tensor parallelism splits them, its sizes, the activations a layer
// keeps for backward and its FLOPs — from the model.* keys alone (the model built shape-only:
// models::ModelContext::shape_only), so a plan for a 1T-parameter model costs no memory.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/plan/hardware.h"
#include "meshflow/models/registry.h"

namespace mf::plan {

// Elements of parameters: `split` divide over the tensor-parallel ranks (Megatron's column and
// row splits, the vocabulary of the embedding), `replicated` do not (norms, row biases, positions).
// Counted in double: exact below 2^53, and a model past int64 (hidden 10^9: 1.2e19 per GPT-2
// layer) still gets its true, positive size.
struct ParamElements {
  double split = 0, replicated = 0;
  int64_t tensors = 0;  // parameter tensors (ZeRO-1/2 gather each one after the step)
  double on_rank(int64_t tp) const { return std::ceil(split / static_cast<double>(tp)) + replicated; }
  double total() const { return split + replicated; }
};

using models::LayerActivations;

struct ModelCosts {
  std::string name;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 0;
  bool tied = false;  // the output projection is the input embedding: a pipeline's last stage holds a copy
  int64_t param_bytes = 4;  // per parameter element (2 with train.amp: bf16/f16)
  bool amp = false;         // f32 master weights in the optimizer
  double grad_bucket_mb = 25;  // train.dist.grad_bucket_mb: the data-parallel reduction's bucket
  // Bytes per activation element: 4 (the CPU computes bf16/f16 models in f32), the parameter
  // dtype's where half kernels run natively (HardwareProfile::native_half).
  int64_t act_bytes = 4;
  // An unfused attention's scores (HardwareProfile::attention_score_bytes): bytes per score moved
  // in forward, and kept for backward; 0 for a fused attention.
  double score_bytes = 0, score_kept_bytes = 0;
  // What the runtime the profile describes makes of the model: its activations' dtype, its attention.
  void set_runtime(const HardwareProfile& h) {
    act_bytes = h.native_half && amp ? param_bytes : 4;
    score_bytes = h.attention_score_bytes;
    score_kept_bytes = h.attention_score_kept_bytes;
  }
  std::vector<ParamElements> layer_params;  // by layer
  ParamElements embedding, head;            // the first stage's and the last stage's own parts
  ParamElements tied_copy;                  // what the last stage holds of the embedding (tied)
  std::vector<LayerActivations> layer_acts;  // by layer
  // The share of the tokens whose logits the head computes (ModelSpec::head_token_share: BERT's
  // masked positions), and the forward FLOPs per token: one layer (its GEMMs and attention at
  // seq) and the head's logits (over every token: the share applied).
  double head_token_share = 1.0;
  double layer_flops = 0, head_flops = 0;
  double total_params() const;
  // Training FLOPs per token of the whole model (forward + backward: 3 x forward).
  double train_flops_per_token() const { return 3 * (layers * layer_flops + head_flops); }
};

// From a resolved run config (model.*, data.seq_length, train.amp). Throws for a model without
// an activation-memory formula (ModelSpec::layer_activations).
ModelCosts model_costs(const Config& c);

}  // namespace mf::plan
