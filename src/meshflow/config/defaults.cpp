// The defaults document: every valid config key with its default, GPT-2-small-like values and
// LiBai's key names. It is the schema: a key's type is the type of its default — a plain
// integer is an int, a number with '.' or an exponent a float, true/false a bool, a sequence a
// list of numbers, anything else (or anything quoted) a string. Add a key here and it exists.
// Every key says what it means in a trailing `# ...` comment, continued on comment-only lines
// below it; a section's comment introduces its keys. reference.h makes the key reference of
// docs/guides/config-reference.md from them (tests/config_test.cpp: none is missing).
#include <yaml-cpp/yaml.h>

#include <unordered_map>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

namespace mf::config_detail {

const char* defaults_yaml() {
  return R"YAML(
model:
  name: gpt2                    # registry name (model zoo)
  num_layers: 12                # Transformer blocks (T5: the encoder's)
  hidden_size: 768              # the model width: the embeddings and every block's input and output
  num_attention_heads: 12       # attention heads per block (Llama family: the query heads)
  ffn_hidden_size: 0            # the MLP's hidden width; 0 = 4 * hidden_size
  max_seq_length: 1024          # the longest sequence (GPT-2, BERT family: the learned position embeddings')
  vocab_size: 50257             # the token embedding's rows; raised to the tokenizer's vocabulary size when smaller
  embedding_dropout_prob: 0.1   # dropout on the embeddings' output, in training
  attention_dropout_prob: 0.1   # dropout on the attention probabilities, in training
  output_dropout_prob: 0.1      # dropout on the attention's and the MLP's outputs, in training (BERT: and the pooler's)
  layernorm_epsilon: 1.0e-5      # LayerNorm eps (GPT-2); RMSNorm eps, rms_norm_eps (Llama family)
  initializer_range: 0.02       # std of the normal random initialisation of weights and embeddings (biases 0, norms 1)
  num_key_value_heads: 0        # Llama family: grouped-query attention's key/value heads; 0 = num_attention_heads
  head_dim: 0                   # Llama family, T5 (d_kv): a head's width; 0 = hidden_size / num_attention_heads
  rope_theta: 10000.0           # Llama family, GPT-NeoX (rotary_emb_base): the rotary embeddings' base
  rotary_pct: 0.25              # GPT-NeoX: the share of each head's features the rotary embeddings rotate
  use_parallel_residual: true   # GPT-NeoX: attention and MLP both read the block input, their outputs summed
                                #   (false: the MLP reads the post-attention residual, as GPT-2)
  rope_scaling:                 # Llama family: rotary frequency scaling
    type: ""                    #   "" = none; llama3 = Llama 3.1's (the four keys below)
    factor: 8.0                 #   llama3: how much the long wavelengths slow down (their frequencies divided by it)
    low_freq_factor: 1.0        #   llama3: wavelengths longer than original_max_position_embeddings /
                                #     low_freq_factor are slowed down by factor
    high_freq_factor: 4.0       #   llama3: wavelengths shorter than original_max_position_embeddings /
                                #     high_freq_factor are kept; those between interpolated
    original_max_position_embeddings: 8192 #   llama3: the context length the model was pretrained with
  tie_word_embeddings: false    # Llama family, GPT-NeoX, T5: the output projection is the token embedding (GPT-2: always;
                                #   T5 v1.0: true, the decoder's output scaled by hidden_size^-0.5 first)
  qkv_bias: false               # Llama family: biases on the q, k, v projections (Qwen2)
  task: pretraining             # BERT family: pretraining (masked LM, + next-sentence prediction with
                                #   add_binary_head) | classification (pooler + classifier over num_labels)
  num_tokentypes: 2             # BERT family: token types (segments); type_vocab_size (RoBERTa: 1)
  pad_token_id: 0               # BERT family, T5: the padding id (RoBERTa counts positions after it: 1; T5's decoder
                                #   starts with it)
  add_binary_head: true         # BERT: next-sentence prediction in pretraining (false: masked LM only; RoBERTa never)
  num_labels: 2                 # BERT family, classification; ViT: the classes
  num_decoder_layers: 0         # T5: the decoder's blocks; 0 = num_layers (the encoder's)
  feed_forward_proj: relu       # T5: relu (T5 v1.0) | gated-gelu (T5 v1.1, mT5: gelu (tanh form) of wi_0 x times wi_1 x)
  relative_attention_num_buckets: 32   # T5: buckets of relative distance per stack (half per direction in the encoder)
  relative_attention_max_distance: 128 # T5: distances from here on share the last bucket
  decoder_seq_length: 114       # T5: the decoder's length of a training sample (the targets: sentinels and spans, </s>);
                                #   the encoder's is data.seq_length (0 = max_seq_length)
  initializer_factor: 1.0       # T5: scales Hugging Face's T5 initialisation (initializer_range is not used)
  image_size: 224               # ViT: the images' side in pixels (the data pipeline resizes and crops to it)
  patch_size: 16                # ViT: the patches' side; (image_size / patch_size)^2 patches and a class token
  num_channels: 3               # ViT: colour channels of the images
  sliding_window: 0             # Llama family: 0 = full causal attention; W = each position attends to the W
                                #   latest positions, itself included (Mistral)
  pretrained: ""                # "" = random init; else weights to start from (any parallel layout, cast to the
                                #   model's dtype): a Hugging Face folder of the model (config.json + safetensors)
                                #   or file, or a meshflow checkpoint (a run's output_dir, a `meshflow convert`
                                #   output, an iter_N folder); tensor shapes must match the model.* sizes; the
                                #   structure keys a config leaves out (eps, rope_*) come from its config.json

train:
  output_dir: output/gpt2       # the run's folder: config.yaml, metrics.jsonl, checkpoints/ (one run per folder)
  train_iter: 10000             # training iterations (optimizer steps) of the whole run
  exit_iter: 0                  # > 0: checkpoint and stop after this iteration (resume continues)
  train_micro_batch_size: 8     # samples per micro-batch on each data-parallel rank
  global_batch_size: 0          # samples per iteration; 0 = micro * accumulation * data_parallel_size
  num_accumulation_steps: 0     # micro-batches per iteration; 0 = derive from global_batch_size (1 if both are 0)
  test_micro_batch_size: 8      # evaluation: samples per batch on each data-parallel rank
  log_period: 20                # iterations between log lines and metrics.jsonl records (the last is always logged)
  straggler_factor: 1.5         # a rank whose compute time (its step time less its waits in communication)
                                #   exceeds the median rank's by this factor is named in the log and in
                                #   metrics.jsonl's "stragglers", every log period; 0 = off
  seed: 1234                    # random seed: weight initialisation, data order, dropout
  resume: false                 # continue from the latest checkpoint in output_dir (none there: start at step 0)
  checkpointer:
    period: 1000                # iterations between checkpoints (the last iteration saves one too); 0 = only the last
    max_to_keep: 3              # newest checkpoints kept, older ones removed; 0 = keep all
  evaluation:
    enabled: true               # evaluate on the validation split every eval_period iterations and after the last
    eval_period: 1000           # iterations between evaluations; 0 = only after the last
    eval_iter: 20               # validation batches per evaluation
  amp:                          # mixed precision: bf16/fp16 parameters and activations, f32 master weights
    enabled: false              # bf16/fp16 parameters and activations (dtype below) over f32 master weights
    dtype: bf16                 # bf16 | fp16
    loss_scale: 0.0             # fp16: > 0 = this fixed loss scale; 0 = dynamic
    initial_loss_scale: 65536.0 # fp16 dynamic scaling: the first scale (2^16)
    min_loss_scale: 1.0         # fp16: the scale never backs off below this
    loss_scale_window: 1000     # fp16: steps without overflow before the scale doubles
    hysteresis: 2               # fp16: overflows tolerated before the scale halves
  activation_checkpoint:
    enabled: false              # recompute activations in the backward instead of keeping them (granularity below)
    granularity: full           # full: whole blocks (and the loss head's logits) | selective: the attention core
    start_layer: 0              # checkpointed blocks: [start_layer, end_layer) of the whole model
    end_layer: -1               # -1 = model.num_layers; the first N layers: end_layer=N
  zero_optimization:
    enabled: false              # ZeRO: shard training state over the data-parallel ranks (stage below)
    stage: 1                    # sharded over data parallelism: 1 optimizer state, 2 + gradients, 3 + parameters
  dist:
    device_type: cpu            # cpu | cuda: where tensors live (cuda: GPU = the local rank, from LOCAL_RANK,
                                #   OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID; NCCL between GPUs)
    data_parallel_size: 0       # ranks taking different samples; 0 = world size / (tensor x pipeline x context)
    tensor_parallel_size: 1     # ranks splitting each block's weights (Megatron's tensor parallelism)
    context_parallel_size: 1    # ranks splitting each sequence (its activations between layers S(seq) on cp); the
                                #   sequence a multiple of it. Not with generate/serve (decoding: 1)
    context_parallel_mode: ring # ring: keys/values passed around the cp ranks, causal chunks load-balanced |
                                #   all_to_all: the sequence traded for the heads around the attention core
                                #   (DeepSpeed-Ulysses; heads divisible by cp; tensor_parallel_size 1)
    pipeline_parallel_size: 1   # pipeline stages, each holding a run of consecutive layers
    sequence_parallel: false    # with tensor parallelism: the activations between layers split on the sequence
    pipeline_num_layers: 0      # LiBai's: the layers placed over the stages — always all of them here, so only
                                #   0 or model.num_layers is valid (any other value is an error, pipeline or not)
    custom_pipeline_stage_id: []  # the stage of every layer; [] = balanced (the head counts as layers)
    pipeline_schedule: 1f1b     # gpipe | 1f1b | interleaved_1f1b: the order of micro-batch forwards and backwards
    virtual_pipeline_size: 1    # interleaved_1f1b: model chunks per pipeline rank
    timeout: 300.0              # seconds (a float: 0.5 is valid) a collective may wait before the run fails
    heartbeat: true             # a watchdog per rank (comm/watchdog.h): beats in <output_dir>/.heartbeat every
                                #   min(1, timeout/10) s; a peer whose process is gone, or silent for timeout/2,
                                #   ends the run on every rank with one line naming it (ranks sharing output_dir)
    grad_bucket_mb: 25.0        # data parallel: gradients are all-reduced in buckets of this size
  scheduler:
    name: cosine                # cosine | linear | constant | multistep
    warmup_iter: 200            # iterations of linear warmup from lr * warmup_factor to lr
    warmup_factor: 0.001        # lr at iteration 0 = lr * warmup_factor
    alpha: 0.1                  # final lr = lr * alpha (cosine, linear)
    milestones: []              # multistep: iterations where lr *= gamma
    gamma: 0.1                  # multistep: the lr factor at each milestone
  profile:                      # a timeline of some steps: <output_dir>/trace.json (Chrome trace events, one
                                #   track per rank; open in ui.perfetto.dev or chrome://tracing; `meshflow report`
                                #   draws its pipeline timeline), and each rank's own in <output_dir>/trace/
    enabled: false              # record the timeline (train.profile) of num_steps steps from start_step
    start_step: 3               # the first profiled step (1-based; the first steps warm the allocator up)
    num_steps: 2                # profiled steps, each with its evaluation and checkpoint if it has one
  threads: 0                    # OpenMP threads of each process (omp_set_num_threads); 0 = OpenMP's default
                                #   (OMP_NUM_THREADS, else one per core)

optim:
  name: adamw                   # adamw | sgd
  lr: 6.0e-4                    # the peak learning rate (train.scheduler shapes it over the run)
  weight_decay: 0.1             # on matrices and embeddings, not biases and norms (adamw: decoupled; sgd: L2)
  betas: [0.9, 0.95]            # adamw: decay rates of the gradient's running mean and of its square's
  eps: 1.0e-8                   # adamw: added to the denominator's square root
  momentum: 0.9                 # sgd: the momentum of its update
  clip_grad_max_norm: 1.0       # gradients scaled down to this total norm when above it; <= 0 disables clipping
  clip_grad_norm_type: 2.0      # 2.0: the L2 norm of all gradients | .inf: their largest |element|

data:
  data_prefix: ""               # the tokenized dataset <prefix>.bin / <prefix>.idx (`meshflow preprocess`)
  splits: "949,50,1"            # train, valid, test weights
  seq_length: 0                 # tokens per training sample; 0 = model.max_seq_length
  masked_lm_prob: 0.15          # BERT family pretraining: the share of tokens predicted (80% [MASK], 10% random, 10% kept)
  short_seq_prob: 0.1           # BERT family and T5 pretraining: the probability of a shorter sample (Megatron's)
  whole_word_masking: true      # BERT family pretraining: mask whole words (WordPiece "##" pieces with their word)
  noise_density: 0.15           # T5 span corruption: the share of a sample's tokens that become noise spans
  mean_noise_span_length: 3.0   # T5 span corruption: the mean length of a noise span (one sentinel each)
  train_file: ""                # classification: jsonl with "text" and an integer "label" per line (fine-tuning)
  validation_file: ""           # classification: the held-out jsonl, scored with accuracy
  train_folder: ""              # image classification: root/<class>/<image>.png|jpg (classes sorted by name, the label
                                #   is the index), or a packed prefix P (P.bin + P.json, `meshflow preprocess --images`)
  validation_folder: ""         # image classification: the held-out images (folder or packed prefix), in order
  image_mean: [0.5, 0.5, 0.5]   # image classification: the per-channel mean of (x / 255 - mean) / std (ViT's;
                                #   ImageNet's [0.485, 0.456, 0.406])
  image_std: [0.5, 0.5, 0.5]    # image classification: the per-channel std (ViT's; ImageNet's [0.229, 0.224, 0.225])
  random_resized_crop: true     # image classification, training: torchvision's RandomResizedCrop (scale [0.08, 1],
                                #   ratio [3/4, 4/3]); false: resize to model.image_size as evaluation does
  horizontal_flip: true         # image classification, training: flip left-right with probability 0.5
  eval_resize: stretch          # image classification, evaluation: stretch = both sides to model.image_size, the
                                #   aspect ratio not kept (Hugging Face's ViTImageProcessor); shorter_side_crop = the
                                #   shorter side to model.image_size, then the centre square (torchvision's
                                #   Resize + CenterCrop; what a packed folder holds)
  decode_threads: 2             # image classification: background threads decoding and transforming images per
                                #   process (0 = on the training thread)

tokenization:
  tokenizer: gpt2_bpe           # gpt2_bpe | hf_bpe | sentencepiece | wordpiece | byte
  vocab_file: ""                # gpt2_bpe: encoder.json / vocab.json
  merges_file: ""               # gpt2_bpe: vocab.bpe / merges.txt
  tokenizer_file: ""            # hf_bpe: a Hugging Face tokenizer.json (Llama 3, Qwen2); sentencepiece: a tokenizer.model
                                #   (Llama 2, Mistral) or spiece.model (T5); wordpiece: a BERT vocab.txt; or the folder
                                #   holding it (sentencepiece: tokenizer.model, else spiece.model)
  extra_ids: 0                  # sentencepiece: T5's sentinel tokens <extra_id_0>..<extra_id_{N-1}> after the model's pieces
                                #   (HF's T5Tokenizer: <extra_id_k> is id pieces + N - 1 - k; T5 and mT5: 100); 0: none
  eod_token: ""                 # hf_bpe / sentencepiece / wordpiece: the end-of-document token's text; "": hf_bpe <|end_of_text|> or
                                #   <|endoftext|>, else tokenizer_config.json's eos_token; sentencepiece the model's </s>;
                                #   wordpiece [SEP]
  do_lower_case: true           # wordpiece: lower-case and strip accents (NFD, combining marks dropped) before
                                #   WordPiece, as BERT uncased; false for a cased vocabulary
  append_eod: true              # `meshflow preprocess`: append the end-of-document token to every document (Megatron's
                                #   --append-eod); its default, read from --config, overridden by --append-eod / --no-eod.
                                #   Training reads the dataset as it was written and does not use this key.

graph:
  auto_parallel:
    enabled: false              # LiBai's key: `meshflow train` takes the layout `meshflow plan` ranks first for the
                                #   world size (train.dist sizes, schedule, sequence parallel, ZeRO, micro-batch and
                                #   accumulation of the global batch, recomputation), logs it and writes it into the
                                #   run's config.yaml; a layout key set to other than its default is kept as a constraint
    memory_per_rank_gb: 0.0     # the memory a rank may use (GB); 0 = the hardware profile's (this machine: its
                                #   physical memory shared by the ranks)
    hardware: ""                # the time and memory model's machine: "" = this one (measured FMA peak), a file written
                                #   by `meshflow profile`, or a100-80gb | h100-80gb (published figures)
)YAML";
}

namespace {

bool is_int_text(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i >= s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

void build(const YAML::Node& node, const std::string& prefix, std::vector<SchemaEntry>& out) {
  for (const auto& item : node) {
    std::string key = prefix + item.first.as<std::string>();
    const YAML::Node& v = item.second;
    if (v.IsMap()) {
      build(v, key + ".", out);
    } else if (v.IsSequence()) {
      out.push_back({key, ConfigType::kFloatList, parse_value(key, ConfigType::kFloatList, YAML::Dump(v), "defaults")});
    } else {
      MF_CHECK(v.IsScalar(), "defaults document: ", key, " has no default");
      const std::string& s = v.Scalar();
      ConfigType t;
      if (v.Tag() == "!") t = ConfigType::kString;  // quoted
      else if (is_int_text(s)) t = ConfigType::kInt;
      else if (s == "true" || s == "false") t = ConfigType::kBool;
      else if (s.find_first_not_of("0123456789+-.eE") == std::string::npos) t = ConfigType::kFloat;
      else t = ConfigType::kString;
      out.push_back({key, t, parse_value(key, t, s, "defaults")});
    }
  }
}

struct Schema {
  std::vector<SchemaEntry> entries;
  std::unordered_map<std::string, size_t> index;
  Schema() {
    build(YAML::Load(defaults_yaml()), "", entries);
    for (size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].key, i);
  }
};

const Schema& the_schema() {
  static const Schema s;
  return s;
}

}  // namespace

const std::vector<SchemaEntry>& schema() { return the_schema().entries; }

const SchemaEntry* find_entry(const std::string& key) {
  const Schema& s = the_schema();
  auto it = s.index.find(key);
  return it == s.index.end() ? nullptr : &s.entries[it->second];
}

}  // namespace mf::config_detail
