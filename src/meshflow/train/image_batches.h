// Micro-batches for image classification (ViT) through a Sampler: pixel_values (B, C, S, S) f32,
// normalised, and labels (B) i64 class ids (the index of the image's class folder).
//
// Sample order: training (num_samples > 0) draws that many samples over as many epochs as needed,
// epoch e in its own seeded shuffled order (random_permutation(images, seed, 1 + e), as
// ClassificationDataset orders its examples), so sample i shows image order_e[i % n] of epoch
// e = i / n, augmented by train_transform with the random stream of (seed, e, image index).
// Evaluation (num_samples 0) shows the images in order (the first ones again after the last when
// more are asked for), through eval_transform. Every sample is thus a pure function of (data,
// options, i): each data-parallel rank takes its slice of the global micro-batch through the
// Sampler and the batches are the same under every layout. The sampler position is the state.
//
// Decoding and transforms run on `decode_threads` background threads (an OrderedPrefetcher,
// data/prefetch.h) that work up to two micro-batches ahead of the trainer; the batches are
// identical to decoding on the calling thread (decode_threads 0). An image that fails to decode
// throws from next() with the file named.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "meshflow/config/config.h"

#include "meshflow/data/image_folder.h"
#include "meshflow/data/image_transforms.h"
#include "meshflow/data/prefetch.h"
#include "meshflow/data/sampler.h"
#include "meshflow/train/data_recipe.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

struct ImageBatchOptions {
  ImageTransformOptions transform;
  bool train = true;         // augment (as transform says) and shuffle per epoch; false: evaluation
  uint64_t seed = 1234;
  int64_t num_samples = 0;   // training: the run's samples (> 0); evaluation: 0 = the images once
  int decode_threads = 2;    // background threads; 0 = decode inside next()
};

class ImageBatchSource final : public BatchSource {
 public:
  // `data` must outlive the source.
  ImageBatchSource(const ImageDataset& data, const ImageBatchOptions& o, int64_t rank = 0, int64_t world = 1);
  ~ImageBatchSource() override;
  // pixel_values (B, C, S, S) f32; labels (B) i64.
  models::Batch next(int64_t micro_batch) override;
  uint64_t position() const override { return sampler_.state(); }
  void set_position(uint64_t pos) override;

  int64_t size() const { return sampler_.total_samples(); }  // samples
  // The image sample i shows, and its epoch (0 in evaluation).
  int64_t image_of(int64_t i) const;
  int64_t epoch_of(int64_t i) const;
  // Sample i's pixels (C * S * S floats, channels first) into out; returns its label. Pure;
  // thread-safe.
  int64_t sample_into(int64_t i, float* out) const;

 private:
  struct Sample {
    int64_t index = 0, label = 0;
    std::vector<float> pixels;
  };
  Sample make_sample(int64_t k) const;  // the k-th sample of this rank since the prefetcher's start
  std::shared_ptr<const std::vector<int64_t>> order(int64_t epoch) const;

  const ImageDataset& data_;
  ImageBatchOptions o_;
  int64_t rank_, world_;
  Sampler sampler_;
  int64_t sample_floats_;
  mutable std::mutex order_mu_;
  mutable std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> orders_;  // a few recent epochs
  // Pixel buffers of samples already copied into a batch, reused (fresh large blocks page-fault).
  mutable std::mutex pool_mu_;
  mutable std::vector<std::vector<float>> pool_;
  // The prefetcher's stream: this rank's samples from position start_ in micro-batches of mb_.
  uint64_t start_ = 0;
  int64_t mb_ = 0;
  // Last: its threads read the members above, so it is destroyed (joined) first.
  std::unique_ptr<OrderedPrefetcher<Sample>> prefetch_;
};

// The sources of a run of an image classifier, from the config: data.train_folder (training, if
// train_samples > 0) and data.validation_folder (if valid_samples > 0), each an image folder or
// a packed prefix (open_image_dataset; training: a folder's images made model.image_size squares,
// as packing does; evaluation: a folder's images whole, sized by data.eval_resize, which refuses a
// packed set under stretch); the transforms from model.image_size, model.num_channels,
// data.image_mean, data.image_std, data.eval_resize,
// data.random_resized_crop, data.horizontal_flip; data.decode_threads. Checks that each holds
// model.num_labels classes and that both name the same classes. `note` is one line for the log.
struct ImageSources {
  std::shared_ptr<ImageDataset> train_data, valid_data;  // the sources read them: keep them alive
  std::unique_ptr<BatchSource> train;
  std::function<std::unique_ptr<BatchSource>()> valid;
  std::string note;
};
ImageSources image_sources(const Config& c, uint64_t seed, int64_t train_samples, int64_t valid_samples,
                           int64_t dp_rank = 0, int64_t dp = 1);

// The image_classification recipe (data_recipe.h): image_sources() as a run's sources.
RunSources image_classification_data(const RecipeInputs& in);

}  // namespace mf::train
