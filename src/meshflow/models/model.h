// The model interface: what the trainer, checkpoints, `model.pretrained`, `meshflow convert` and
// the benchmarks know of a model. A model is an nn::Module built from its config section
// (models/registry.h) that runs its pipeline stage's forward, computes its loss, names its
// parameters as Hugging Face does with their logical (unsplit) shapes, says which parameters are
// tied across pipeline stages, and counts its FLOPs per token.
//
// A model is written once, as for one device, on global tensors (layers/layers.h, global/
// global_ops.h): its layers declare their parameters' SBPs and the global ops box what they need.
// The layout reaches it only through the base: the Place its layers live on and which of its
// layers this rank holds. Running a pipeline stage (which layers, random streams, recomputation,
// the ZeRO-3 use hooks) is the base's; gradient synchronisation and ZeRO are the parallel
// runtime's (parallel/grad_sync.h), the schedule the pipeline executor's
// (train/pipeline_executor.h).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/layers/lm_loss.h"
#include "meshflow/layers/place.h"
#include "meshflow/models/batch.h"
#include "meshflow/nn/init.h"
#include "meshflow/nn/module.h"
#include "meshflow/nn/param_use_hooks.h"

namespace mf::models {

using layers::GlobalTensor;

// Activation checkpointing granularity (train.activation_checkpoint.granularity). kFull recomputes
// whole blocks (and the loss head's logits); kSelective only each block's attention core, from
// q, k, v to the attention output (Megatron-LM's --recompute-granularity selective).
enum class CheckpointGranularity { kFull, kSelective };
// "full" or "selective"; throws naming the config key and the allowed values.
CheckpointGranularity parse_checkpoint_granularity(const std::string& name);

// The settings a run gives every model beside its model.* section, read from the config once
// (training_settings()): the parameter dtype (train.amp) and activation recomputation
// (train.activation_checkpoint).
struct TrainingSettings {
  // f32, or bf16/f16 with train.amp.enabled (train.amp.dtype).
  DType dtype = DType::kF32;
  bool recompute = false;
  CheckpointGranularity granularity = CheckpointGranularity::kFull;
  int64_t recompute_start_layer = 0;
  int64_t recompute_end_layer = -1;  // -1: every layer from the start
  // The dtype activations take on `device`: the parameter dtype where the device computes in it
  // natively, else the compute dtype (mixed precision, nn/mixed_precision.h).
  DType activation_dtype(Device device) const;
  // Throws "<model>: the parameter dtype must be ..." unless it is a floating dtype.
  void check(const std::string& model) const;
  // How layer `layer` (a whole-model index) of `num_layers` is recomputed; none when it is not.
  std::optional<CheckpointGranularity> recomputation(int64_t layer, int64_t num_layers) const {
    const int64_t end = recompute_end_layer < 0 ? num_layers : recompute_end_layer;
    if (!recompute || layer < recompute_start_layer || layer >= end) return std::nullopt;
    return granularity;
  }
  // The token loss head's options: chunks of `chunk_elements` logits, recomputed under full
  // recomputation in training, the logits rounded to the parameter dtype.
  layers::LmLossOptions loss_options(int64_t chunk_elements, bool training) const;
};
TrainingSettings training_settings(const Config& c);

// A pipeline stage's share of a layered model: layers [first_layer, end_layer); the first stage
// also runs the input embedding, the last the head. Interleaved pipelines: `later_chunks` holds
// the layers of this rank's chunks 1, 2, ... (chunk 0 is [first_layer, end_layer)).
struct PipelineStage {
  int64_t first_layer = 0;
  int64_t end_layer = -1;  // -1: every layer
  bool first = true, last = true;
  std::vector<std::pair<int64_t, int64_t>> later_chunks;
  int64_t num_chunks() const { return 1 + static_cast<int64_t>(later_chunks.size()); }
  bool whole() const { return first && last && later_chunks.empty(); }
  // Every chunk's [first, end) layers, chunk 0 first; throws unless they are increasing ranges
  // inside [0, num_layers).
  std::vector<std::pair<int64_t, int64_t>> chunk_layers(int64_t num_layers) const;
};

// Where a model is built in the parallel layout: the layers' placement (the named dimensions that
// split them, with sequence splitting) and its pipeline stage. The runtime makes it; the Model
// base builds this rank's layers on the Place and the others shape-only, and runs the stage.
struct ModelContext {
  layers::Place place;
  PipelineStage stage;
  // Non-zero: build the whole model shape-only, its layers split as over this many ranks
  // (layers::Place::kAnyRanks: every split they take, for the planner): no parameter is allocated,
  // and declared_parameters() lists the model's (the planner's and the weight checks' view).
  // 0: the model of this rank.
  int shape_only_ranks = 0;
  static ModelContext shape_only(int ranks = 1) {
    ModelContext c;
    c.shape_only_ranks = ranks;
    return c;
  }
};

// What batches a model trains on (models/batch.h). kCausalLM: input_ids and labels (B, T), the
// ids shifted by one; kMaskedLM: BERT's sentence pairs with masked tokens, token types, padding and
// next-sentence labels (or one segment without them); kSequenceClassification: padded texts and a
// class label per row; kSpanCorruption: T5's corrupted spans — the encoder reads the text with
// each noise span replaced by a sentinel, the decoder predicts the sentinels and the spans
// (input_ids, attention_mask (B, T_enc); decoder_input_ids, decoder_attention_mask, labels (B, T_dec));
// kImageClassification: pixel_values (B, 3, H, W) and a class label per row.
enum class BatchKind { kCausalLM, kMaskedLM, kSequenceClassification, kSpanCorruption, kImageClassification };

// (rows predicted right, rows) of class logits (B, n) (any device) against labels (B): the argmax
// accuracy an evaluation metric sums.
std::pair<double, double> argmax_accuracy(const Tensor& logits, const Tensor& labels);

// A layered model: an embedding (unit 0), num_layers layers (unit 1 + l) and a head (unit
// num_layers + 1). The model writes each as for one device, on global tensors, and builds the
// layers the base says this rank holds; the base runs them by pipeline stage and chunk, with the
// random streams, the recomputation and the parameter-use hooks (ZeRO-3).
class Model : public nn::Module {
 public:
  Model(ModelContext ctx, int64_t num_layers);

  // ---- forward, by pipeline stage (the executor's)
  // `batch`: the micro-batch (the first stage's chunk 0 embeds its input_ids, or its pixel_values
  // for an image model; layers may read its attention mask). `input`: the previous virtual stage's output (unused on the first).
  // Returns the activation for the next virtual stage (this rank's piece), or on the last one the
  // input of head_loss(). Random streams: it draws streams [stream0, stream0 + streams_per_forward())
  // of the default generator at fixed places — stream 0 for the embedding, 1 + streams_per_layer()
  // * l onwards for layer l, then the head's — so a stage draws what the whole model draws there,
  // and leaves the generator at the head's first stream (stream0 + streams_per_forward() when the
  // head draws none); in eval mode it draws none.
  // seq_len: the logical sequence length T. chunk: which of this rank's chunks.
  Tensor stage_forward(const Batch& batch, const Tensor& input, uint64_t stream0, int64_t seq_len,
                       int64_t chunk = 0) const;
  // The same for a batch of ids alone: `input` is the ids (B, T) on the first stage's chunk 0.
  Tensor stage_forward(const Tensor& input, uint64_t stream0, int64_t seq_len, int64_t chunk = 0) const;
  // ---- the loss
  // A model's loss is a sum of terms, each a mean over its items (a language model: one term over
  // the counted labels; BERT: the masked tokens and the rows of its next-sentence task).
  // loss_counts(batch): each term's items in `batch`. The trainer sums them over a step's
  // micro-batches and data-parallel ranks; head_loss() divides each term's sum over the batch by
  // that total (`totals`), so the micro-batch losses of a step add up to the loss of the whole
  // global batch, whatever the layout and the micro-batching.
  virtual std::vector<double> loss_counts(const Batch& batch) const { return {static_cast<double>(counted_labels(batch.labels))}; }
  // Last stage: this micro-batch's share of the step's loss.
  Tensor head_loss(const Tensor& hidden, const Batch& batch, const std::vector<double>& totals) const;
  // The mean loss of the final activation against labels (B, T) (-100: ignored).
  Tensor head_loss(const Tensor& hidden, const Tensor& labels) const;
  uint64_t streams_per_forward() const {
    return 1 + streams_per_layer() * static_cast<uint64_t>(num_layers_) + head_streams();
  }
  // The whole model's loss (one stage holding every layer): the batch's own means.
  Tensor loss(const Batch& batch) const;
  Tensor loss(const Tensor& ids, const Tensor& labels) const { return loss(Batch(ids, labels)); }
  // ---- evaluation metrics beside the loss (e.g. "accuracy"), the same names on every rank
  virtual std::vector<std::string> eval_metric_names() const { return {}; }
  // The logical sequence length T of `batch`'s activations: its input_ids' length (an image model:
  // its patches and class token).
  virtual int64_t sequence_length(const Batch& batch) const { return batch.input_ids.shape(1); }
  // Last stage, evaluation: each metric's (sum, count) over `batch` (the metric is sum / count
  // over every batch and rank), in eval_metric_names() order.
  std::vector<std::pair<double, double>> head_metrics(const Tensor& hidden, const Batch& batch) const;

  // ---- generation (infer/engine.h): a causal language model's logits, its layers reading and
  // filling a key/value cache when the batch carries a DecodeState
  virtual bool generates() const { return false; }
  // Last stage: the logits (B, T, V) of the final hidden state (stage_forward()'s output on the
  // last stage). whole: the whole vocabulary on every rank; else this rank's piece (split on the
  // vocabulary over the ranks splitting the layers) and *vocab_offset its first id.
  Tensor head_logits(const Tensor& hidden, bool whole, int64_t* vocab_offset = nullptr) const;
  // The longest sequence the model reads (its position table, or model.max_seq_length).
  virtual int64_t max_sequence_length() const { return 0; }
  // The logits' vocabulary size.
  virtual int64_t vocab_size() const { return 0; }

  // ---- the messages between pipeline stages
  // This rank's piece of the activation a stage sends (B = rows, logical sequence seq_len).
  Shape activation_shape(int64_t rows, int64_t seq_len) const;
  // Its dtype on `device`.
  virtual DType activation_dtype(Device device) const = 0;

  // ---- parameters
  virtual DType param_dtype() const = 0;
  // The whole model's parameters (every stage's), Hugging Face names and logical shapes, in
  // model order: what a weights file for this model must hold (the model is built whole on every
  // rank, the parts other ranks hold shape-only: nn::Module::declared_parameters()).
  std::vector<std::pair<std::string, Shape>> parameter_shapes() const;
  // Parameters a stage other than the first holds a copy of (a tied output embedding on the last
  // stage): the trainer keeps the copies' gradients summed and checkpoints the first stage's.
  virtual std::vector<std::string> tied_parameters() const { return {}; }
  // The units of this stage's forward, in order, with the parameters each uses (ZeRO-3 gathers
  // and releases by unit), and the hooks called around each unit (null: none).
  virtual std::vector<nn::ParamUnit> parameter_units() const = 0;
  void set_param_use_hooks(nn::ParamUseHooks* hooks) { hooks_ = hooks; }
  // Elements of the whole model's logical parameters.
  int64_t num_logical_parameters() const;

  // ---- description
  // FLOPs per token of a training step (forward + backward) of the whole model.
  virtual double flops_per_token(int64_t seq_len) const = 0;
  virtual BatchKind batch_kind() const { return BatchKind::kCausalLM; }
  // Its model.* keys as a run config writes them (name included); what a converted checkpoint's
  // config.yaml holds.
  virtual Config model_config() const = 0;
  // One line: "GPT-2: layers 4, hidden 32, ...".
  virtual std::string describe() const = 0;

  const PipelineStage& stage() const { return ctx_.stage; }
  int64_t num_layers() const { return num_layers_; }
  // Where this rank's layers live (the runtime's view: gradient synchronisation, checkpoints and
  // decoding read the ranks splitting the weights, place().comm(layers::Place::kWeights)).
  const layers::Place& place() const { return place_; }

 protected:
  // ---- what a model writes, as for one device
  // ids (B, T) of `batch` (an image model: its pixel_values (B, channels, H, W)) -> the first
  // layer's input (B, T, C).
  virtual GlobalTensor embed(const GlobalTensor& ids, const Batch& batch) const = 0;
  // Layer `layer` (held by this rank): (B, T, C) -> (B, T, C) of `batch`. recompute_inside:
  // recompute the layer's own choice of parts (selective recomputation) in backward.
  virtual GlobalTensor run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch,
                                 bool recompute_inside) const = 0;
  // The head's part before the loss (the final norm): (B, T, C) -> (B, T, C).
  virtual GlobalTensor final_norm(const GlobalTensor& x) const = 0;
  // The loss of the final hidden state (B, T, C) B on `batch` (local tensors, anywhere): each
  // term's sum over the batch divided by its entry of `totals` (see loss_counts()).
  virtual GlobalTensor head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const = 0;
  // Evaluation metrics of the final hidden state (B, T, C) B (see head_metrics()).
  virtual std::vector<std::pair<double, double>> metrics(const GlobalTensor& hidden, const Batch& batch) const {
    (void)hidden;
    (void)batch;
    return {};
  }
  // The output projection of the final hidden state (B, T, C) (after final_norm) -> logits
  // (B, T, V): what a model that generates() writes.
  virtual GlobalTensor output_logits(const GlobalTensor& hidden) const;
  virtual uint64_t streams_per_layer() const = 0;
  // Random streams the head draws (its dropout), after the layers'.
  virtual uint64_t head_streams() const { return 0; }
  // The loss, B over `ranks` ranks, whose backward seeds each rank with 1/ranks of the gradient
  // (the partial-sum convention of B tensors' gradients).
  static Tensor seed_share(const Tensor& loss, int ranks);
  // A term's mean over this batch (`local` items) as its share of the step's (`total` items).
  static GlobalTensor step_share(const GlobalTensor& mean, double local, double total);
  // The logical activation between layers: (rows, seq_len, C).
  virtual Shape hidden_shape(int64_t rows, int64_t seq_len) const = 0;
  // How layer `layer` is recomputed in a training step; nullopt: it is not.
  virtual std::optional<CheckpointGranularity> recomputation(int64_t layer) const = 0;

  // ---- where each part lives (LiBai's layer placement): the model builds every part on its
  // placement; a part another rank holds (another pipeline stage's) is shape-only there.
  const layers::Place& embedding_placement() const { return stage().first ? place_ : elsewhere_; }
  const layers::Place& head_placement() const { return stage().last ? place_ : elsewhere_; }
  const layers::Place& layer_placement(int64_t layer) const;
  // A parameter the embedding and the head both use (a tied vocabulary table): the first and the
  // last stage each hold it.
  const layers::Place& shared_placement() const { return stage().first || stage().last ? place_ : elsewhere_; }
  // A parameter layers [first, end) all use (T5's relative position bias table): every rank
  // holding one of them holds it.
  const layers::Place& layers_placement(int64_t first, int64_t end) const;
  // Every chunk's [first, end) layers, chunk 0 first.
  const std::vector<std::pair<int64_t, int64_t>>& chunk_layers() const { return chunk_layers_; }
  // Every parameter as the piece of its logical tensor this rank holds (nn/init.h).
  std::vector<nn::ParamPiece> parameter_pieces() const;
  // Hugging Face's initialisation of the pieces this rank holds: biases 0, norm weights
  // (is_norm(name, logical shape)) 1, every other parameter N(0, std_of(name, logical shape)).
  // Parameter i (of parameter_shapes()'s order) draws from a generator of its own, whatever rank
  // holds it.
  void init_normal(uint64_t seed, const std::function<bool(const std::string&, const Shape&)>& is_norm,
                   const std::function<double(const std::string&, const Shape&)>& std_of);

  // The units (parameter_units()) of a layered model: each holds the parameters whose names start
  // with one of its prefixes.
  std::vector<nn::ParamUnit> layered_units(const std::vector<std::string>& embedding_prefixes,
                                           const std::string& layer_prefix,
                                           const std::vector<std::string>& head_prefixes) const;
  // The same with each layer's prefixes given by `layer_prefixes(layer)` (a parameter several
  // layers use, in each of their units).
  std::vector<nn::ParamUnit> layered_units(const std::vector<std::string>& embedding_prefixes,
                                           const std::function<std::vector<std::string>(int64_t)>& layer_prefixes,
                                           const std::vector<std::string>& head_prefixes) const;
  void enter(int64_t unit) const {
    if (hooks_) hooks_->enter(unit);
  }
  Tensor leave(int64_t unit, const Tensor& out) const { return hooks_ ? hooks_->leave(unit, out) : out; }
  int64_t head_unit() const { return num_layers_ + 1; }
  // The whole model (every layer on this rank): fn applied to the final hidden state (B, T, C) B
  // of ids (B, T), with the head's parameters in use; returns this rank's piece of fn's result.
  Tensor run_whole(const Tensor& ids, const std::function<GlobalTensor(const GlobalTensor&)>& fn) const;
  Tensor run_whole(const Batch& batch, const std::function<GlobalTensor(const GlobalTensor&)>& fn) const;

 private:
  ModelContext ctx_;
  int64_t num_layers_;
  layers::Place place_, elsewhere_;  // this rank's; the same ranks shape-only
  std::vector<std::pair<int64_t, int64_t>> chunk_layers_;
  nn::ParamUseHooks* hooks_ = nullptr;
};

// Its model.* keys and one line describing it, for a model's config struct C: the
// model_config(C) and describe(C) declared beside C (argument-dependent lookup), which a class
// deriving from Model cannot call by name (its own members hide them).
template <class C>
Config model_keys_of(const C& c) {
  return model_config(c);
}
template <class C>
std::string description_of(const C& c) {
  return describe(c);
}

// A Model of config struct C (BERT, T5, ViT): the config, and what follows from it alone — its
// model.* keys, its description and its dtypes (C::settings).
template <class C>
class ConfiguredModel : public Model {
 public:
  DType activation_dtype(Device device) const override { return c_.settings.activation_dtype(device); }
  DType param_dtype() const override { return c_.settings.dtype; }
  Config model_config() const override { return model_keys_of(c_); }
  std::string describe() const override { return description_of(c_); }
  const C& config() const { return c_; }

 protected:
  std::optional<CheckpointGranularity> recomputation(int64_t layer) const override {
    return c_.settings.recomputation(layer, num_layers());
  }
  ConfiguredModel(const C& c, const ModelContext& ctx, int64_t num_layers) : Model(ctx, num_layers), c_(c) {}

  C c_;
};

}  // namespace mf::models
