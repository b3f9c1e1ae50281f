// Images for vision models: decoding PNG (libpng) and JPEG (libjpeg-turbo) files into 8-bit RGB,
// and the geometric operations the transforms are made of (crop, flip, resize).
//
// Decoding follows what PIL's `Image.open(f).convert("RGB")` gives (Hugging Face's image
// processors and torchvision's ImageFolder load images that way):
//   PNG   gray, gray + alpha, RGB, RGBA, palette, 1/2/4/8/16-bit -> RGB; alpha (and a tRNS
//         transparency) is dropped, not composited; 16-bit samples keep their high byte (PIL's
//         for RGB; PIL clips 16-bit gray to 255 instead, which we do not copy); gamma chunks are
//         ignored.
//   JPEG  gray and YCbCr (RGB) through libjpeg's own conversion (ISLOW DCT, fancy upsampling:
//         libjpeg's defaults, as PIL's); CMYK and YCCK -> RGB as PIL converts CMYK,
//         R = (255 - C)(255 - K) / 255, with Adobe's inverted CMYK undone first.
// The format is recognised by its signature, not by the file name. Every failure throws
// mf::Error naming the file.
//
// Resizing is PIL's BILINEAR resampling (Image.resize, what ViTImageProcessor and torchvision's
// Resize on PIL images call): separable, a triangle filter on pixel centres, and when shrinking
// the filter is widened by the scale factor (antialiasing: every input pixel contributes), the
// weights of each output pixel renormalised where the window meets the border; the horizontal
// pass first, each pass in PIL's fixed point (22 fraction bits) rounded to 8 bits — the same bytes
// as Pillow 9.4 (checked on random images shrunk and enlarged, square and not). With
// antialias = false the filter keeps its width (plain bilinear interpolation, the same as
// antialias when enlarging).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mf {

// An 8-bit image, rows top to bottom, pixels interleaved (HWC): pixel (y, x) channel c is
// pixels[(y * width + x) * channels + c]. Decoded images have 3 channels (RGB).
struct Image {
  int64_t height = 0, width = 0, channels = 3;
  std::vector<uint8_t> pixels;

  Image() = default;
  Image(int64_t h, int64_t w, int64_t c = 3)
      : height(h), width(w), channels(c), pixels(static_cast<size_t>(h * w * c), 0) {}
  uint8_t& at(int64_t y, int64_t x, int64_t c) { return pixels[static_cast<size_t>((y * width + x) * channels + c)]; }
  uint8_t at(int64_t y, int64_t x, int64_t c) const {
    return pixels[static_cast<size_t>((y * width + x) * channels + c)];
  }
  bool operator==(const Image&) const = default;
};

// Reads and decodes a PNG or JPEG file into RGB.
Image decode_image_file(const std::string& path);
// Decodes PNG or JPEG bytes; `name` (the file) is what errors mention.
Image decode_image(const uint8_t* data, size_t size, const std::string& name);
// True when the bytes start with a PNG or a JPEG signature.
bool is_png(const uint8_t* data, size_t size);
bool is_jpeg(const uint8_t* data, size_t size);

// Writes an RGB (3 channels) or gray (1 channel) image (tools, tests, benchmarks; not atomic).
void write_png(const Image& img, const std::string& path);
void write_jpeg(const Image& img, const std::string& path, int quality = 90);

// The box [top, top + h) x [left, left + w), which must lie inside the image.
Image crop(const Image& img, int64_t top, int64_t left, int64_t h, int64_t w);
// Mirrored left-right.
Image flip_horizontal(const Image& img);
// Bilinear resampling to out_h x out_w (see above); returns a copy when the size is unchanged.
Image resize_bilinear(const Image& img, int64_t out_h, int64_t out_w, bool antialias = true);
// The shorter side resized to `size` (the longer one in proportion, rounded down as
// torchvision's Resize(int) computes it: int(size * long / short)), then the centre size x size
// square cropped (torchvision's CenterCrop: top = round((h - size) / 2)).
Image resize_shorter_center_crop(const Image& img, int64_t size, bool antialias = true);
// RGB -> one channel of luma, PIL's convert("L"): ITU-R 601-2, (19595 R + 38470 G + 7471 B + 2^15) >> 16.
Image to_gray(const Image& img);

}  // namespace mf
