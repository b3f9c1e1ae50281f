// Evaluation and training transforms of images (see image_transforms.h).
#include "meshflow/data/image_transforms.h"

#include <algorithm>
#include <cmath>

#include "meshflow/core/error.h"
#include "meshflow/random/philox.h"

namespace mf {

void check_transform_options(const ImageTransformOptions& o) {
  MF_CHECK(o.image_size > 0, "image transforms: image_size ", o.image_size, " must be positive");
  MF_CHECK(o.channels == 1 || o.channels == 3, "image transforms: ", o.channels,
           " channels (model.num_channels): 3 (RGB) or 1 (gray)");
  MF_CHECK(static_cast<int64_t>(o.mean.size()) == o.channels && static_cast<int64_t>(o.std.size()) == o.channels,
           "image transforms: data.image_mean and data.image_std need one value per channel (", o.channels, "), got ",
           o.mean.size(), " and ", o.std.size());
  for (double s : o.std) MF_CHECK(s > 0, "image transforms: data.image_std values must be positive, got ", s);
  MF_CHECK(o.scale_min > 0 && o.scale_min <= o.scale_max && o.scale_max <= 1.0,
           "image transforms: RandomResizedCrop scale [", o.scale_min, ", ", o.scale_max, "] must lie in (0, 1]");
  MF_CHECK(o.ratio_min > 0 && o.ratio_min <= o.ratio_max, "image transforms: RandomResizedCrop ratio [", o.ratio_min,
           ", ", o.ratio_max, "] must be positive and ordered");
}

double AugmentRandom::uniform(uint32_t k) const {
  const Philox4x32 b = philox_block(seed_, index_, (epoch_ << 32) | k);
  const uint64_t bits = ((static_cast<uint64_t>(b.v[0]) << 32) | b.v[1]) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);  // 2^-53
}

CropBox random_resized_crop_box(int64_t h, int64_t w, const ImageTransformOptions& o, const AugmentRandom& r) {
  const double area = static_cast<double>(h) * static_cast<double>(w);
  const double log_lo = std::log(o.ratio_min), log_hi = std::log(o.ratio_max);
  for (uint32_t t = 0; t < 10; ++t) {
    const double target = area * (o.scale_min + (o.scale_max - o.scale_min) * r.uniform(4 * t));
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * r.uniform(4 * t + 1));
    const auto cw = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto ch = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      // torch.randint(0, h - ch + 1): uniform over the places that fit.
      const auto top = static_cast<int64_t>(r.uniform(4 * t + 2) * static_cast<double>(h - ch + 1));
      const auto left = static_cast<int64_t>(r.uniform(4 * t + 3) * static_cast<double>(w - cw + 1));
      return {std::min(top, h - ch), std::min(left, w - cw), ch, cw};
    }
  }
  // Fallback: the whole image, clamped to the ratio range, centred.
  const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
  int64_t cw = w, ch = h;
  if (in_ratio < o.ratio_min) {
    ch = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / o.ratio_min));
  } else if (in_ratio > o.ratio_max) {
    cw = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * o.ratio_max));
  }
  ch = std::clamp<int64_t>(ch, 1, h);
  cw = std::clamp<int64_t>(cw, 1, w);
  return {(h - ch) / 2, (w - cw) / 2, ch, cw};
}

bool random_flip(const AugmentRandom& r) { return r.uniform(kFlipDraw) < 0.5; }

void normalize_into(const Image& sized, const ImageTransformOptions& o, float* out) {
  const int64_t S = o.image_size;
  MF_CHECK(sized.height == S && sized.width == S && sized.channels == o.channels, "image transforms: a ",
           sized.height, "x", sized.width, "x", sized.channels, " image where ", S, "x", S, "x", o.channels,
           " is expected");
  const int64_t plane = S * S;
  for (int64_t c = 0; c < o.channels; ++c) {
    const auto mean = static_cast<float>(o.mean[static_cast<size_t>(c)]);
    const auto std = static_cast<float>(o.std[static_cast<size_t>(c)]);
    const uint8_t* src = sized.pixels.data() + c;
    float* dst = out + c * plane;
    for (int64_t i = 0; i < plane; ++i)
      dst[i] = (static_cast<float>(src[i * o.channels]) * (1.0f / 255.0f) - mean) / std;
  }
}

namespace {
// The luma image for one channel; else the image itself (no copy).
const Image& channels_for(const Image& rgb, const ImageTransformOptions& o, Image& keep) {
  MF_CHECK(rgb.channels == 3, "image transforms: the input must be RGB, got ", rgb.channels, " channels");
  if (o.channels == 3) return rgb;
  keep = to_gray(rgb);
  return keep;
}
}  // namespace

EvalResize eval_resize_from_name(const std::string& name) {
  if (name == "stretch") return EvalResize::kStretch;
  if (name == "shorter_side_crop") return EvalResize::kShorterSideCrop;
  MF_THROW("data.eval_resize '", name, "' is not one of stretch (Hugging Face's ViTImageProcessor: both sides to "
           "model.image_size) and shorter_side_crop (the shorter side to model.image_size, then the centre square)");
}

void eval_transform(const Image& rgb, const ImageTransformOptions& o, float* out) {
  Image gray;
  if (o.eval_resize == EvalResize::kShorterSideCrop) {  // the square of RGB first, as packing makes it
    const Image square = resize_shorter_center_crop(rgb, o.image_size, o.antialias);
    normalize_into(channels_for(square, o, gray), o, out);
    return;
  }
  const Image& in = channels_for(rgb, o, gray);
  normalize_into(resize_bilinear(in, o.image_size, o.image_size, o.antialias), o, out);
}

void train_transform(const Image& rgb, const ImageTransformOptions& o, uint64_t seed, uint64_t epoch, uint64_t index,
                     float* out) {
  Image gray;
  const Image& in = channels_for(rgb, o, gray);
  const AugmentRandom r(seed, epoch, index);
  Image sized;
  if (o.random_resized_crop) {
    const CropBox b = random_resized_crop_box(in.height, in.width, o, r);
    sized = resize_bilinear(crop(in, b.top, b.left, b.height, b.width), o.image_size, o.image_size, o.antialias);
  } else {
    sized = resize_bilinear(in, o.image_size, o.image_size, o.antialias);
  }
  if (o.horizontal_flip && random_flip(r)) sized = flip_horizontal(sized);
  normalize_into(sized, o, out);
}

}  // namespace mf
