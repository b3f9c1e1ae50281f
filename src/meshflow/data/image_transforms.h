// The transforms that turn an image into a model's pixel_values, as Hugging Face's
// ViTImageProcessor and torchvision's ImageNet recipe do them:
//
//   evaluation  resize to image_size x image_size (ViTImageProcessor's do_resize: straight to
//               (size, size), bilinear, the aspect ratio not kept), rescale by 1/255, normalise
//               (x - mean) / std per channel; or, with EvalResize::kShorterSideCrop, the shorter
//               side resized to image_size and the centre square cropped (torchvision's
//               Resize + CenterCrop) in place of the stretch;
//   training    RandomResizedCrop(image_size, scale, ratio) — torchvision's sampling: up to 10
//               tries of an area share in [scale] and a log-uniform aspect ratio in [ratio], the
//               box placed uniformly; after 10 misses, the centre crop of the whole image clamped
//               to the ratio range — then a horizontal flip with probability 1/2, then the same
//               rescale and normalisation. Either can be switched off (no random crop: the
//               evaluation resize).
//
// Resizing is image_decode.h's (PIL's antialiased bilinear). The output is f32, channels-first
// (C, H, W). One channel (num_channels 1) takes the luma of the RGB image first (PIL's "L").
//
// The random draws of a training sample are a pure function of (seed, epoch, index): Philox
// with the seed as key, the sample's index as the stream and (epoch, draw number) as the counter
// (AugmentRandom below) — so a sample is augmented the same whichever rank, thread or batch
// computes it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "meshflow/data/image_decode.h"

namespace mf {

// How evaluation brings an image to image_size x image_size (data.eval_resize).
enum class EvalResize {
  kStretch,          // "stretch": both sides to image_size, the aspect ratio not kept (ViTImageProcessor)
  kShorterSideCrop,  // "shorter_side_crop": the shorter side to image_size, then the centre square
};
// "stretch" or "shorter_side_crop"; anything else throws naming data.eval_resize.
EvalResize eval_resize_from_name(const std::string& name);

struct ImageTransformOptions {
  int64_t image_size = 224;  // the output's height and width
  int64_t channels = 3;      // 3: RGB; 1: luma
  std::vector<double> mean{0.5, 0.5, 0.5}, std{0.5, 0.5, 0.5};  // one per channel (google/vit-base-patch16-224's)
  bool random_resized_crop = true;  // training
  bool horizontal_flip = true;      // training
  double scale_min = 0.08, scale_max = 1.0;               // RandomResizedCrop's area share
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;    // and aspect ratio (width / height)
  bool antialias = true;  // resize with PIL's antialiasing when shrinking
  EvalResize eval_resize = EvalResize::kStretch;  // evaluation
};

// Throws mf::Error for options that make no sense (mean/std not one per channel, std <= 0, ...).
void check_transform_options(const ImageTransformOptions& o);

// The uniform draws of one sample's augmentation.
class AugmentRandom {
 public:
  AugmentRandom(uint64_t seed, uint64_t epoch, uint64_t index) : seed_(seed), epoch_(epoch), index_(index) {}
  // Draw k in [0, 1): 53 bits of Philox block (epoch * 2^32 + k) of stream `index` under `seed`.
  double uniform(uint32_t k) const;

 private:
  uint64_t seed_, epoch_, index_;
};

// The draws AugmentRandom's numbers are used for: try t of RandomResizedCrop takes 4 t (area),
// 4 t + 1 (ratio), 4 t + 2 (top), 4 t + 3 (left); the flip takes kFlipDraw.
constexpr uint32_t kFlipDraw = 40;

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// torchvision's RandomResizedCrop.get_params for an h x w image (see above); rounding is
// Python's round (halves to even).
CropBox random_resized_crop_box(int64_t h, int64_t w, const ImageTransformOptions& o, const AugmentRandom& r);
bool random_flip(const AugmentRandom& r);  // true with probability 1/2

// The image (RGB; gray when o.channels == 1, of o.image_size square) rescaled and normalised
// into out[c * S * S + y * S + x].
void normalize_into(const Image& sized, const ImageTransformOptions& o, float* out);
// Evaluation: resize to S x S (o.eval_resize), normalise. `out` holds channels * S * S floats.
void eval_transform(const Image& rgb, const ImageTransformOptions& o, float* out);
// Training: random resized crop, flip (as switched on), normalise; a pure function of
// (image, options, seed, epoch, index).
void train_transform(const Image& rgb, const ImageTransformOptions& o, uint64_t seed, uint64_t epoch, uint64_t index,
                     float* out);

}  // namespace mf
