// Image-classification micro-batches with background decoding (see image_batches.h).
#include "meshflow/train/image_batches.h"

#include <algorithm>
#include <cstring>

#include "meshflow/data/shuffle.h"

#include <utility>

namespace mf::train {

ImageBatchSource::ImageBatchSource(const ImageDataset& data, const ImageBatchOptions& o, int64_t rank, int64_t world)
    : data_(data),
      o_(o),
      rank_(rank),
      world_(world),
      sampler_(o.train ? o.num_samples : data.size(), rank, world),
      sample_floats_(o.transform.channels * o.transform.image_size * o.transform.image_size) {
  check_transform_options(o.transform);
  MF_CHECK(!o.train || o.num_samples > 0, "image batches: training needs num_samples > 0, got ", o.num_samples);
  MF_CHECK(o.decode_threads >= 0, "data.decode_threads ", o.decode_threads, " must be >= 0");
}

ImageBatchSource::~ImageBatchSource() { prefetch_.reset(); }  // joins the decoding threads first

void ImageBatchSource::set_position(uint64_t pos) {
  prefetch_.reset();  // restarted at the new position by the next batch
  sampler_.set_state(pos);
}

std::shared_ptr<const std::vector<int64_t>> ImageBatchSource::order(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(order_mu_);
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  auto p = std::make_shared<const std::vector<int64_t>>(
      random_permutation(data_.size(), o_.seed, 1 + static_cast<uint64_t>(epoch)));
  if (orders_.size() >= 4) orders_.erase(orders_.begin());  // the oldest epoch
  orders_.emplace(epoch, p);
  return p;
}

int64_t ImageBatchSource::epoch_of(int64_t i) const {
  MF_CHECK(i >= 0 && i < size(), "image batches: sample ", i, " outside [0, ", size(), ")");
  return o_.train ? i / data_.size() : 0;
}

int64_t ImageBatchSource::image_of(int64_t i) const {
  const int64_t e = epoch_of(i), n = data_.size();
  return o_.train ? (*order(e))[static_cast<size_t>(i % n)] : i % n;
}

int64_t ImageBatchSource::sample_into(int64_t i, float* out) const {
  const int64_t img = image_of(i);
  const Image rgb = data_.image(img);
  if (o_.train)
    train_transform(rgb, o_.transform, o_.seed, static_cast<uint64_t>(epoch_of(i)), static_cast<uint64_t>(img), out);
  else
    eval_transform(rgb, o_.transform, out);
  return data_.label(img);
}

ImageBatchSource::Sample ImageBatchSource::make_sample(int64_t k) const {
  // The Sampler's arithmetic: micro-batch b of this rank starts at start + b * mb * world + rank * mb.
  const auto mb = static_cast<uint64_t>(mb_), b = static_cast<uint64_t>(k) / mb, r = static_cast<uint64_t>(k) % mb;
  const uint64_t pos = start_ + b * mb * static_cast<uint64_t>(world_) + static_cast<uint64_t>(rank_) * mb + r;
  Sample s;
  s.index = static_cast<int64_t>(pos % static_cast<uint64_t>(size()));
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      s.pixels = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  s.pixels.resize(static_cast<size_t>(sample_floats_));
  s.label = sample_into(s.index, s.pixels.data());
  return s;
}

models::Batch ImageBatchSource::next(int64_t micro_batch) {
  MF_CHECK(micro_batch > 0, "image batches: micro_batch ", micro_batch, " must be positive");
  const uint64_t here = sampler_.state();
  const int64_t consumed = prefetch_ ? prefetch_->consumed() : 0;
  const uint64_t expected = start_ + static_cast<uint64_t>(consumed / std::max<int64_t>(mb_, 1)) *
                                         static_cast<uint64_t>(mb_ * world_);
  if (!prefetch_ || micro_batch != mb_ || here != expected) {
    prefetch_.reset();
    start_ = here;
    mb_ = micro_batch;
    prefetch_ = std::make_unique<OrderedPrefetcher<Sample>>([this](int64_t k) { return make_sample(k); },
                                                            o_.decode_threads, 2 * micro_batch);
  }
  const std::vector<int64_t> idx = sampler_.next_batch(micro_batch);
  const int64_t C = o_.transform.channels, S = o_.transform.image_size;
  models::Batch out;
  out.pixel_values = empty({micro_batch, C, S, S}, DType::kF32);
  out.labels = empty({micro_batch}, DType::kI64);
  float* px = out.pixel_values.data<float>();
  for (int64_t b = 0; b < micro_batch; ++b) {
    Sample s = prefetch_->next();
    MF_CHECK(s.index == idx[static_cast<size_t>(b)], "image batches: prefetched sample ", s.index, " where the sampler gives ",
             idx[static_cast<size_t>(b)]);
    std::memcpy(px + b * sample_floats_, s.pixels.data(), static_cast<size_t>(sample_floats_) * sizeof(float));
    out.labels.data<int64_t>()[b] = s.label;
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (static_cast<int64_t>(pool_.size()) < 2 * micro_batch + o_.decode_threads) pool_.push_back(std::move(s.pixels));
  }
  return out;
}

ImageSources image_sources(const Config& c, uint64_t seed, int64_t train_samples, int64_t valid_samples,
                           int64_t dp_rank, int64_t dp) {
  ImageBatchOptions io;
  io.transform.image_size = c.get_int("model.image_size");
  io.transform.channels = c.get_int("model.num_channels");
  io.transform.mean = c.get_float_list("data.image_mean");
  io.transform.std = c.get_float_list("data.image_std");
  io.transform.random_resized_crop = c.get_bool("data.random_resized_crop");
  io.transform.horizontal_flip = c.get_bool("data.horizontal_flip");
  io.transform.eval_resize = eval_resize_from_name(c.get_string("data.eval_resize"));
  io.decode_threads = static_cast<int>(c.get_int("data.decode_threads"));
  check_transform_options(io.transform);
  ImageSources r;
  if (train_samples > 0)
    r.train_data = open_image_dataset(c.get_string("data.train_folder"), io.transform.image_size, "data.train_folder");
  if (valid_samples > 0) {
    // Evaluation sizes each decoded image itself (data.eval_resize): a folder's images as they are.
    r.valid_data = open_image_dataset(c.get_string("data.validation_folder"), 0, "data.validation_folder");
  }
  const int64_t labels = c.get_int("model.num_labels");
  for (const auto& [d, key] : {std::pair{r.train_data, "data.train_folder"}, std::pair{r.valid_data, "data.validation_folder"}}) {
    if (!d) continue;
    MF_CHECK(d->num_classes() >= 2, key, " ", c.get_string(key), " holds ", d->num_classes(),
             " class folder(s): classification needs two or more (ROOT/<class>/<image>)");
    MF_CHECK(d->num_classes() == labels, key, " ", c.get_string(key), " holds ", d->num_classes(),
             " classes and model.num_labels is ", labels, ": set model.num_labels=", d->num_classes());
  }
  MF_CHECK(!r.valid_data || io.transform.eval_resize != EvalResize::kStretch ||
               dynamic_cast<const PackedImages*>(r.valid_data.get()) == nullptr,
           "data.validation_folder ", c.get_string("data.validation_folder"), " is packed: its images are already "
           "centre squares, and data.eval_resize=stretch (Hugging Face's ViTImageProcessor) resizes whole images; "
           "point it at the image folder, or set data.eval_resize=shorter_side_crop");
  if (r.train_data && r.valid_data)
    MF_CHECK(r.train_data->classes() == r.valid_data->classes(), "data.train_folder and data.validation_folder name "
             "different classes (a label is the index of its class among the sorted class names, so both must hold the "
             "same class folders)");
  if (r.train_data) {
    ImageBatchOptions t = io;
    t.train = true;
    t.seed = seed;
    t.num_samples = train_samples;
    r.train = std::make_unique<ImageBatchSource>(*r.train_data, t, dp_rank, dp);
  }
  if (r.valid_data) {
    ImageBatchOptions v = io;
    v.train = false;
    r.valid = [data = r.valid_data, v, dp_rank, dp] { return std::make_unique<ImageBatchSource>(*data, v, dp_rank, dp); };
  }
  const auto describe = [](const std::shared_ptr<ImageDataset>& d) {
    return d ? detail::cat(d->size(), " (", d->kind(), ")") : std::string("none");
  };
  if (r.train_data || r.valid_data) {
    const ImageDataset& any = r.train_data ? *r.train_data : *r.valid_data;
    r.note = detail::cat("image classification: ", any.num_classes(), " classes, ", describe(r.train_data),
                         " training images, ", describe(r.valid_data), " held out (in order); pixel_values ",
                         io.transform.channels, "x", io.transform.image_size, "x", io.transform.image_size, ", ",
                         io.decode_threads, " decode threads");
  }
  return r;
}


RunSources image_classification_data(const RecipeInputs& in) {
  ImageSources img = image_sources(in.config, in.options.seed, in.train_samples, in.valid_samples, in.dp_rank, in.dp);
  RunSources r;
  r.train = std::move(img.train);
  r.valid = std::move(img.valid);
  r.note = img.note;
  r.keep = std::make_shared<std::pair<std::shared_ptr<ImageDataset>, std::shared_ptr<ImageDataset>>>(img.train_data,
                                                                                                    img.valid_data);
  return r;
}

}  // namespace mf::train
