#include "meshflow/models/model.h"

#include <algorithm>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/autograd/node.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/generator.h"

namespace mf::models {

DType TrainingSettings::activation_dtype(Device device) const {
  return native_half(device, dtype) ? dtype : compute_dtype(dtype);
}

void TrainingSettings::check(const std::string& model) const {
  MF_CHECK(is_floating(dtype), model, ": the parameter dtype must be f32, f64, bf16 or f16, got ", dtype_name(dtype));
}

CheckpointGranularity parse_checkpoint_granularity(const std::string& name) {
  if (name == "full") return CheckpointGranularity::kFull;
  if (name == "selective") return CheckpointGranularity::kSelective;
  MF_THROW("train.activation_checkpoint.granularity '", name, "' is not one of full, selective");
}

layers::LmLossOptions TrainingSettings::loss_options(int64_t chunk_elements, bool training) const {
  layers::LmLossOptions o;
  o.chunk_elements = chunk_elements;
  o.recompute = recompute && granularity == CheckpointGranularity::kFull && training;
  o.storage = dtype;
  return o;
}

TrainingSettings training_settings(const Config& c) {
  TrainingSettings s;
  if (c.get_bool("train.amp.enabled")) {
    const std::string d = c.get_string("train.amp.dtype");
    if (d == "bf16" || d == "bfloat16")
      s.dtype = DType::kBF16;
    else if (d == "fp16" || d == "f16" || d == "float16")
      s.dtype = DType::kF16;
    else
      MF_THROW("train.amp.dtype must be bf16 or fp16, got '", d, "'");
  }
  s.recompute = c.get_bool("train.activation_checkpoint.enabled");
  s.granularity = parse_checkpoint_granularity(c.get_string("train.activation_checkpoint.granularity"));
  s.recompute_start_layer = c.get_int("train.activation_checkpoint.start_layer");
  s.recompute_end_layer = c.get_int("train.activation_checkpoint.end_layer");
  return s;
}

std::vector<std::pair<int64_t, int64_t>> PipelineStage::chunk_layers(int64_t num_layers) const {
  std::vector<std::pair<int64_t, int64_t>> out = {{first_layer, end_layer < 0 ? num_layers : end_layer}};
  for (const auto& r : later_chunks) out.push_back(r);
  for (size_t k = 0; k < out.size(); ++k) {
    const auto [a, b] = out[k];
    MF_CHECK(a >= 0 && a <= b && b <= num_layers && (k == 0 || a >= out[k - 1].second), "model: pipeline stage chunk ", k,
             " layers [", a, ", ", b, ") outside [0, ", num_layers, ") or not after the previous chunk");
  }
  return out;
}

Model::Model(ModelContext ctx, int64_t num_layers)
    : ctx_(std::move(ctx)),
      num_layers_(num_layers),
      place_(ctx_.shape_only_ranks != 0 ? layers::Place::shape_only(ctx_.shape_only_ranks) : ctx_.place),
      elsewhere_(place_.elsewhere()),
      chunk_layers_(ctx_.stage.chunk_layers(num_layers)) {}

const layers::Place& Model::layer_placement(int64_t layer) const {
  for (const auto& [a, b] : chunk_layers_)
    if (layer >= a && layer < b) return place_;
  return elsewhere_;
}

const layers::Place& Model::layers_placement(int64_t first, int64_t end) const {
  for (int64_t l = first; l < end; ++l)
    if (layer_placement(l).held()) return place_;
  return elsewhere_;
}

std::vector<std::pair<std::string, Shape>> Model::parameter_shapes() const {
  std::vector<std::pair<std::string, Shape>> out;
  for (auto& [name, layout] : declared_parameters()) out.emplace_back(name, std::move(layout.logical));
  return out;
}

std::vector<nn::ParamPiece> Model::parameter_pieces() const { return nn::param_pieces(*this, place_.size(), place_.rank()); }

void Model::init_normal(uint64_t seed, const std::function<bool(const std::string&, const Shape&)>& is_norm,
                        const std::function<double(const std::string&, const Shape&)>& std_of) {
  NoGradGuard ng;
  std::unordered_map<std::string, std::pair<uint64_t, Shape>> index;  // name -> (parameter id, logical shape)
  for (const auto& [name, shape] : parameter_shapes()) index.emplace(name, std::make_pair(index.size(), shape));
  for (const nn::ParamPiece& p : parameter_pieces()) {
    const auto& [id, shape] = index.at(p.name);
    Tensor t = p.piece;
    if (p.name.ends_with("bias")) {
      fill_(t, 0.0);
    } else if (is_norm(p.name, shape)) {
      fill_(t, 1.0);
    } else {
      Generator g = nn::param_generator(seed, id);
      nn::normal_piece_(p, std_of(p.name, shape), g);
    }
  }
}

Tensor host_i64(const Tensor& t) { return contiguous(cast(to(t.detach(), cpu_device()), DType::kI64)); }

int64_t counted_labels(const Tensor& labels) {
  if (!labels.defined()) return 0;
  const Tensor l = host_i64(labels);
  const int64_t* p = l.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < l.numel(); ++i) n += p[i] != -100;
  return n;
}

Tensor key_padding_mask(const Batch& batch) { return key_padding_mask(batch.attention_mask); }

Tensor key_padding_mask(const Tensor& attention_mask) {
  if (!attention_mask.defined()) return Tensor();
  const Tensor m = host_i64(attention_mask);
  Tensor out = empty(m.shape(), DType::kBool);
  const int64_t* p = m.data<int64_t>();
  bool* q = out.data<bool>();
  for (int64_t i = 0; i < m.numel(); ++i) q[i] = p[i] == 0;
  return out;
}

const std::vector<int64_t>& DecodeState::row_offsets() const {
  if (offsets_past_ != past || offsets_.size() != row_start.size()) {
    offsets_ = row_start;
    for (int64_t& x : offsets_) x += past;
    offsets_past_ = past;
  }
  return offsets_;
}

Tensor DecodeState::positions(int64_t new_tokens) const {
  const int64_t B = static_cast<int64_t>(row_start.size());
  Tensor out = empty({B, new_tokens}, DType::kI64);
  int64_t* p = out.data<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < new_tokens; ++t) p[b * new_tokens + t] = std::max<int64_t>(0, row_start[static_cast<size_t>(b)] + past + t);
  return out;
}

layers::LayerDecode DecodeState::layer(int64_t layer) const {
  MF_CHECK(caches && layer >= 0 && layer < static_cast<int64_t>(caches->size()), "decode: no cache for layer ", layer);
  return layers::LayerDecode{&(*caches)[static_cast<size_t>(layer)], past, capacity, &row_offsets()};
}

std::pair<double, double> argmax_accuracy(const Tensor& logits_any, const Tensor& labels_any) {
  const Tensor logits = contiguous(cast(to(logits_any.detach(), cpu_device()), DType::kF64));
  const Tensor labels = host_i64(labels_any);
  const int64_t B = logits.shape(0), n = logits.shape(1);
  const double* l = logits.data<double>();
  double correct = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t best = 0;
    for (int64_t k = 1; k < n; ++k)
      if (l[b * n + k] > l[b * n + best]) best = k;
    correct += best == labels.data<int64_t>()[b];
  }
  return {correct, static_cast<double>(B)};
}

Tensor Model::seed_share(const Tensor& loss, int ranks) {
  if (ranks == 1 || !any_requires_grad({loss})) return loss;
  // The loss is B over the ranks splitting the layers, and the gradient of a B tensor is the
  // partial sum of theirs (global/boxing.h; the runtime sums B parameters' gradients over them):
  // each rank's seed is 1/ranks of the loss's gradient. The value is the loss itself.
  Tensor out = loss.detach();
  record("seed_share", {loss}, {out}, [ranks](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {scale(g[0], 1.0 / static_cast<double>(ranks))};
  });
  return out;
}

GlobalTensor Model::step_share(const GlobalTensor& mean, double local, double total) {
  MF_CHECK(total > 0 || local == 0, "model: a loss term over ", local, " items of a step totalling ", total);
  if (local == total) return mean;
  GlobalTensor r = mean;
  r.local = scale(mean.local, total > 0 ? local / total : 0.0);
  return r;
}

Tensor Model::stage_forward(const Tensor& input, uint64_t stream0, int64_t seq_len, int64_t chunk) const {
  Batch b;
  if (stage().first && chunk == 0) b.input_ids = input;
  return stage_forward(b, input, stream0, seq_len, chunk);
}

Tensor Model::stage_forward(const Batch& batch, const Tensor& input, uint64_t stream0, int64_t seq_len,
                            int64_t chunk) const {
  const PipelineStage& st = stage();
  MF_CHECK(chunk >= 0 && chunk < st.num_chunks(), "model: chunk ", chunk, " of a stage with ", st.num_chunks());
  Generator& gen = default_generator();
  auto use_stream = [&](uint64_t k) {  // evaluation draws nothing and leaves the generator alone
    if (training()) gen.set_state({gen.seed(), stream0 + k});
  };
  GlobalTensor x;
  if (st.first && chunk == 0) {
    const Tensor& ids = batch.input_ids;
    if (ids.defined() || !batch.pixel_values.defined())
      MF_CHECK(ids.defined() && ids.ndim() == 2 && ids.shape(1) == seq_len, "model: input ids must be (batch, ", seq_len,
               "), got ", ids.defined() ? ids.str() : std::string("none"));
    enter(0);
    use_stream(0);
    x = global::box(embed(place_.wrap(ids.defined() ? ids : batch.pixel_values), batch), place_.hidden_sbp());
    x.local = leave(0, x.local);
  } else {
    x = place_.wrap(input, place_.hidden_sbp(), hidden_shape(input.shape(0), seq_len));
  }
  const auto [layer0, layer_end] = chunk_layers_[static_cast<size_t>(chunk)];
  for (int64_t layer = layer0; layer < layer_end; ++layer) {
    use_stream(1 + streams_per_layer() * static_cast<uint64_t>(layer));
    enter(1 + layer);
    const std::optional<CheckpointGranularity> how =
        training() && grad_enabled() ? recomputation(layer) : std::nullopt;
    // A layer's output between layers has the hidden SBP (a no-op for a layer that keeps it).
    if (how == CheckpointGranularity::kFull)
      x = global::checkpoint([this, layer, batch](const std::vector<GlobalTensor>& in) {
            return std::vector<GlobalTensor>{global::box(run_layer(layer, in[0], batch, false), place_.hidden_sbp())};
          }, {x})[0];
    else
      x = global::box(run_layer(layer, x, batch, how.has_value()), place_.hidden_sbp());
    x.local = leave(1 + layer, x.local);
  }
  use_stream(1 + streams_per_layer() * static_cast<uint64_t>(num_layers_));  // the head's streams
  if (!(st.last && chunk + 1 == st.num_chunks())) return x.local;
  enter(head_unit());  // left in head_loss(), after the head
  return global::box(final_norm(x), place_.broadcast()).local;
}

Tensor Model::head_loss(const Tensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  MF_CHECK(stage().last, "model: the loss is computed on the last pipeline stage");
  MF_CHECK(hidden.ndim() == 3 && batch.labels.defined() && batch.labels.shape(0) == hidden.shape(0), "model: labels ",
           batch.labels.defined() ? batch.labels.str() : std::string("none"), " must label the rows of the hidden state ",
           hidden.str());
  // The head takes each rank's own tokens where the sequence is split (a slice of the B state).
  const GlobalTensor h = global::box(place_.wrap(hidden), place_.head_sbp());
  return leave(head_unit(), seed_share(head(h, batch, totals).local, place_.ranks()));
}

Tensor Model::head_loss(const Tensor& hidden, const Tensor& labels) const {
  MF_CHECK(labels.shape() == Shape({hidden.shape(0), hidden.shape(1)}), "model: labels ", labels.str(),
           " must be (batch, seq) of the hidden state ", hidden.str());
  const Batch b(Tensor(), labels);
  return head_loss(hidden, b, loss_counts(b));
}

std::vector<std::pair<double, double>> Model::head_metrics(const Tensor& hidden, const Batch& batch) const {
  MF_CHECK(stage().last, "model: metrics are computed on the last pipeline stage");
  return metrics(place_.wrap(hidden), batch);
}

GlobalTensor Model::output_logits(const GlobalTensor&) const {
  MF_THROW("model: ", describe(), " does not generate text (no causal language-model head)");
}

Tensor Model::head_logits(const Tensor& hidden, bool whole, int64_t* vocab_offset) const {
  MF_CHECK(stage().last, "model: logits are computed on the last pipeline stage");
  MF_CHECK(hidden.ndim() == 3, "model: the final hidden state ", hidden.str(), " must be (batch, seq, hidden)");
  GlobalTensor logits = output_logits(place_.wrap(hidden));  // (B, T, V)
  if (whole) logits = global::box(logits, place_.broadcast());
  if (vocab_offset) {
    const LogicalSlice sl = global::local_slice(logits.logical_shape, *logits.nd_sbp, logits.placement->mesh_shape(),
                                                global::coordinate_in(*logits.placement, place_.world_rank(), "head_logits"));
    *vocab_offset = sl.whole() ? 0 : sl.start.at(2);
  }
  return leave(head_unit(), logits.local);
}

Shape Model::activation_shape(int64_t rows, int64_t seq_len) const {
  const Shape logical = hidden_shape(rows, seq_len);
  const global::Placement* pl = place_.placement(cpu_device());
  return global::local_shape(logical, *place_.hidden_sbp(), pl->mesh_shape(),
                             global::coordinate_in(*pl, place_.world_rank(), "activation_shape"));
}

Tensor Model::run_whole(const Tensor& ids, const std::function<GlobalTensor(const GlobalTensor&)>& fn) const {
  Batch b;
  b.input_ids = ids;
  return run_whole(b, fn);
}

Tensor Model::run_whole(const Batch& batch, const std::function<GlobalTensor(const GlobalTensor&)>& fn) const {
  MF_CHECK(stage().whole(), "model: the whole-model forward needs every layer (this is a pipeline stage)");
  const Tensor& ids = batch.input_ids;
  MF_CHECK((ids.defined() && ids.ndim() == 2) || batch.pixel_values.defined(), "model: input ids must be (batch, seq)");
  const Tensor h = stage_forward(batch, Tensor(), default_generator().state().next_stream, sequence_length(batch));  // (B, T, C) B
  return leave(head_unit(), fn(place_.wrap(h)).local);
}

Tensor Model::loss(const Batch& batch) const {
  MF_CHECK(stage().whole(), "model: the whole-model loss needs every layer (this is a pipeline stage)");
  const Tensor& ids = batch.input_ids;
  MF_CHECK(((ids.defined() && ids.ndim() == 2) || batch.pixel_values.defined()) && batch.labels.defined() &&
               batch.labels.shape(0) == batch.rows(),
           "model: input_ids ", ids.defined() ? ids.str() : std::string("none"), " must be (batch, seq) with labels for its rows");
  const Tensor h = stage_forward(batch, Tensor(), default_generator().state().next_stream, sequence_length(batch));
  return head_loss(h, batch, loss_counts(batch));
}

std::vector<nn::ParamUnit> Model::layered_units(const std::vector<std::string>& embedding_prefixes,
                                                const std::string& layer_prefix,
                                                const std::vector<std::string>& head_prefixes) const {
  return layered_units(
      embedding_prefixes,
      [&layer_prefix](int64_t l) { return std::vector<std::string>{layer_prefix + std::to_string(l) + "."}; },
      head_prefixes);
}

std::vector<nn::ParamUnit> Model::layered_units(const std::vector<std::string>& embedding_prefixes,
                                                const std::function<std::vector<std::string>(int64_t)>& layer_prefixes,
                                                const std::vector<std::string>& head_prefixes) const {
  // Indices into named_parameters(); a shape-only model (ModelContext::shape_only) holds none:
  // into parameter_shapes(), every declared parameter.
  std::vector<std::string> names;
  if (ctx_.shape_only_ranks != 0)
    for (const auto& [name, shape] : parameter_shapes()) names.push_back(name);
  else
    for (const auto& [name, t] : named_parameters()) names.push_back(name);
  auto with_prefix = [&](const std::vector<std::string>& prefixes) {
    std::vector<size_t> r;
    for (size_t k = 0; k < names.size(); ++k)
      for (const std::string& pre : prefixes)
        if (names[k].compare(0, pre.size(), pre) == 0) {
          r.push_back(k);
          break;
        }
    return r;
  };
  std::vector<nn::ParamUnit> units;
  if (stage().first) units.push_back({0, 0, with_prefix(embedding_prefixes)});
  for (size_t k = 0; k < chunk_layers_.size(); ++k)
    for (int64_t l = chunk_layers_[k].first; l < chunk_layers_[k].second; ++l)
      units.push_back({1 + l, static_cast<int64_t>(k), with_prefix(layer_prefixes(l)),
                       recomputation(l) == CheckpointGranularity::kFull});
  if (stage().last) units.push_back({head_unit(), stage().num_chunks() - 1, with_prefix(head_prefixes)});
  return units;
}

int64_t Model::num_logical_parameters() const {
  int64_t n = 0;
  for (const auto& [name, shape] : parameter_shapes()) n += shape_numel(shape);
  return n;
}

}  // namespace mf::models
