// The image pipeline: PNG/JPEG decoding (fixtures written here with libpng/libjpeg), bilinear
// resizing and crops against values worked out by hand, the transforms, the image folder and its
// packed form, the batch source (background decoding, data-parallel slices, positions) and the
// errors of bad input.
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "data_testing.h"
#include "meshflow/config/config.h"
#include "meshflow/data/image_decode.h"
#include "meshflow/data/image_folder.h"
#include "meshflow/data/image_transforms.h"
#include "meshflow/data/prefetch.h"
#include "meshflow/train/image_batches.h"

namespace {

namespace fs = std::filesystem;
using mf::Image;
using mft::TempDir;

// ---------------------------------------------------------------- fixture writers

// A PNG of any colour type and depth; `rows` holds the packed samples as PNG stores them
// (16-bit big-endian).
void write_png_raw(const std::string& path, int w, int h, int color_type, int depth, const std::vector<uint8_t>& data,
                   const std::vector<png_color>& palette = {}, bool interlace = false) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) FAIL() << "libpng failed writing " << path;
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, depth, color_type, interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  png_write_info(png, info);
  const size_t stride = data.size() / static_cast<size_t>(h);
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  for (int y = 0; y < h; ++y) rows[static_cast<size_t>(y)] = const_cast<uint8_t*>(data.data()) + y * stride;
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

// A CMYK JPEG (libjpeg writes Adobe's marker for CMYK, so readers take the values as inverted).
void write_cmyk_jpeg(const std::string& path, int w, int h, const std::vector<uint8_t>& cmyk) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = w;
  c.image_height = h;
  c.input_components = 4;
  c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(cmyk.data()) + c.next_scanline * w * 4;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

// The 3 x 2 RGB test image (rows top to bottom).
Image small_rgb() {
  Image img(2, 3, 3);
  const uint8_t v[18] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30, 128, 64, 32, 200, 201, 202};
  std::copy(v, v + 18, img.pixels.begin());
  return img;
}

Image gray_to_rgb(const std::vector<uint8_t>& g, int64_t h, int64_t w) {
  Image img(h, w, 3);
  for (size_t i = 0; i < g.size(); ++i)
    for (size_t c = 0; c < 3; ++c) img.pixels[i * 3 + c] = g[i];
  return img;
}

// A w x h RGB image whose pixels are a pure function of (seed, y, x).
Image pattern(int64_t h, int64_t w, int seed) {
  Image img(h, w, 3);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < 3; ++c) img.at(y, x, c) = static_cast<uint8_t>((seed * 37 + y * 11 + x * 5 + c * 80) % 256);
  return img;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mf::Error& e) {
    return e.what();
  }
  return "";
}

// ---------------------------------------------------------------- decoding

TEST(ImageDecode, PngColorTypesBecomeRgb) {
  TempDir dir;
  const Image want = small_rgb();
  // RGB, and RGBA with the alpha dropped (not composited), and interlaced.
  write_png_raw(dir.file("rgb.png"), 3, 2, PNG_COLOR_TYPE_RGB, 8, want.pixels);
  EXPECT_EQ(mf::decode_image_file(dir.file("rgb.png")), want);
  write_png_raw(dir.file("rgbi.png"), 3, 2, PNG_COLOR_TYPE_RGB, 8, want.pixels, {}, /*interlace=*/true);
  EXPECT_EQ(mf::decode_image_file(dir.file("rgbi.png")), want);
  std::vector<uint8_t> rgba;
  for (size_t i = 0; i < 6; ++i) {
    rgba.insert(rgba.end(), want.pixels.begin() + i * 3, want.pixels.begin() + i * 3 + 3);
    rgba.push_back(static_cast<uint8_t>(i * 40));
  }
  write_png_raw(dir.file("rgba.png"), 3, 2, PNG_COLOR_TYPE_RGBA, 8, rgba);
  EXPECT_EQ(mf::decode_image_file(dir.file("rgba.png")), want);
  // 16-bit RGB: the high byte.
  std::vector<uint8_t> rgb16;
  for (uint8_t v : want.pixels) {
    rgb16.push_back(v);
    rgb16.push_back(static_cast<uint8_t>(255 - v));
  }
  write_png_raw(dir.file("rgb16.png"), 3, 2, PNG_COLOR_TYPE_RGB, 16, rgb16);
  EXPECT_EQ(mf::decode_image_file(dir.file("rgb16.png")), want);
  // Palette.
  std::vector<png_color> pal;
  std::vector<uint8_t> idx;
  for (size_t i = 0; i < 6; ++i) {
    pal.push_back({want.pixels[i * 3], want.pixels[i * 3 + 1], want.pixels[i * 3 + 2]});
    idx.push_back(static_cast<uint8_t>(5 - i));
  }
  std::reverse(pal.begin(), pal.end());
  write_png_raw(dir.file("pal.png"), 3, 2, PNG_COLOR_TYPE_PALETTE, 8, idx, pal);
  EXPECT_EQ(mf::decode_image_file(dir.file("pal.png")), want);
  // Gray, gray + alpha, 16-bit gray, 1-bit gray: R = G = B.
  const std::vector<uint8_t> g = {0, 17, 34, 128, 250, 255};
  write_png_raw(dir.file("g.png"), 3, 2, PNG_COLOR_TYPE_GRAY, 8, g);
  EXPECT_EQ(mf::decode_image_file(dir.file("g.png")), gray_to_rgb(g, 2, 3));
  std::vector<uint8_t> ga, g16;
  for (uint8_t v : g) {
    ga.insert(ga.end(), {v, static_cast<uint8_t>(v / 2)});
    g16.insert(g16.end(), {v, 0x7f});
  }
  write_png_raw(dir.file("ga.png"), 3, 2, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga);
  EXPECT_EQ(mf::decode_image_file(dir.file("ga.png")), gray_to_rgb(g, 2, 3));
  write_png_raw(dir.file("g16.png"), 3, 2, PNG_COLOR_TYPE_GRAY, 16, g16);
  EXPECT_EQ(mf::decode_image_file(dir.file("g16.png")), gray_to_rgb(g, 2, 3));
  // 1-bit: bits 101 / 010 packed from the high bit of each row's byte.
  write_png_raw(dir.file("g1.png"), 3, 2, PNG_COLOR_TYPE_GRAY, 1, {0b10100000, 0b01000000});
  EXPECT_EQ(mf::decode_image_file(dir.file("g1.png")), gray_to_rgb({255, 0, 255, 0, 255, 0}, 2, 3));
  // The library's own writer round-trips.
  mf::write_png(want, dir.file("own.png"));
  EXPECT_EQ(mf::decode_image_file(dir.file("own.png")), want);
}

TEST(ImageDecode, JpegRgbGrayCmyk) {
  TempDir dir;
  // Flat 16 x 16 blocks decode to their colour (up to JPEG's rounding), whatever the extension.
  Image rgb(16, 16, 3);
  for (int64_t i = 0; i < 16 * 16; ++i) {
    rgb.pixels[static_cast<size_t>(i * 3)] = 200;
    rgb.pixels[static_cast<size_t>(i * 3 + 1)] = 100;
    rgb.pixels[static_cast<size_t>(i * 3 + 2)] = 50;
  }
  mf::write_jpeg(rgb, dir.file("flat.jpeg"), 100);
  fs::copy_file(dir.file("flat.jpeg"), dir.file("named_wrong.png"));
  for (const char* f : {"flat.jpeg", "named_wrong.png"}) {
    const Image got = mf::decode_image_file(dir.file(f));
    ASSERT_EQ(got.height, 16);
    ASSERT_EQ(got.width, 16);
    for (size_t i = 0; i < got.pixels.size(); ++i) EXPECT_NEAR(got.pixels[i], rgb.pixels[i], 2) << f << " byte " << i;
  }
  Image gray(8, 8, 1);
  std::fill(gray.pixels.begin(), gray.pixels.end(), 77);
  mf::write_jpeg(gray, dir.file("gray.jpg"), 100);
  const Image g = mf::decode_image_file(dir.file("gray.jpg"));
  ASSERT_EQ(g.channels, 3);
  for (uint8_t v : g.pixels) EXPECT_NEAR(v, 77, 1);
  // CMYK with Adobe's marker: stored values s are 255 - C, so R = s_c * s_k / 255.
  std::vector<uint8_t> cmyk;
  for (int i = 0; i < 8 * 8; ++i) cmyk.insert(cmyk.end(), {255, 128, 0, 200});
  write_cmyk_jpeg(dir.file("cmyk.jpg"), 8, 8, cmyk);
  const Image c = mf::decode_image_file(dir.file("cmyk.jpg"));
  ASSERT_EQ(c.height, 8);
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_NEAR(c.pixels[static_cast<size_t>(i * 3)], 255 * 200 / 255, 2);
    EXPECT_NEAR(c.pixels[static_cast<size_t>(i * 3 + 1)], 128 * 200 / 255, 2);
    EXPECT_NEAR(c.pixels[static_cast<size_t>(i * 3 + 2)], 0, 2);
  }
}

TEST(ImageDecode, BadFilesNameTheFile) {
  TempDir dir;
  mft::write_text(dir.file("text.png"), "this is not an image");
  EXPECT_NE(error_of([&] { mf::decode_image_file(dir.file("text.png")); }).find(dir.file("text.png") + ": not a PNG or JPEG"),
            std::string::npos);
  mft::write_text(dir.file("empty.jpg"), "");
  EXPECT_NE(error_of([&] { mf::decode_image_file(dir.file("empty.jpg")); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([&] { mf::decode_image_file(dir.file("missing.png")); }).find(dir.file("missing.png")),
            std::string::npos);
  // Truncated PNG and JPEG.
  mf::write_png(pattern(32, 32, 1), dir.file("full.png"));
  mf::write_jpeg(pattern(32, 32, 1), dir.file("full.jpg"));
  for (const char* name : {"full.png", "full.jpg"}) {
    const std::string bytes = mft::slurp(dir.file(name));
    const std::string cut = dir.file(std::string("cut_") + name);
    mft::write_text(cut, bytes.substr(0, bytes.size() / 2));
    const std::string e = error_of([&] { mf::decode_image_file(cut); });
    EXPECT_NE(e.find("image " + cut + ": cannot decode"), std::string::npos) << e;
  }
  // A corrupt PNG header (its CRC no longer matches).
  std::string bytes = mft::slurp(dir.file("full.png"));
  bytes[20] = static_cast<char>(bytes[20] ^ 0x55);
  mft::write_text(dir.file("crc.png"), bytes);
  EXPECT_NE(error_of([&] { mf::decode_image_file(dir.file("crc.png")); }).find("cannot decode PNG"), std::string::npos);
}

// ---------------------------------------------------------------- geometry

// A gray image given row-major, as RGB with equal channels.
Image gray_image(int64_t h, int64_t w, const std::vector<int>& v) {
  Image img(h, w, 3);
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t c = 0; c < 3; ++c) img.pixels[i * 3 + c] = static_cast<uint8_t>(v[i]);
  return img;
}

std::vector<int> channel0(const Image& img) {
  std::vector<int> v;
  for (size_t i = 0; i < img.pixels.size(); i += static_cast<size_t>(img.channels)) v.push_back(img.pixels[i]);
  return v;
}

TEST(ImageResize, FourByFourByHand) {
  // Columns 10, 20, 30, 40. Shrinking 4 -> 2 with antialiasing: the triangle widened to 2 pixels
  // each side of centres 1 and 3 weighs columns (0.75, 0.75, 0.25) / 1.75 and (0.25, 0.75, 0.75) / 1.75:
  // (7.5 + 15 + 7.5) / 1.75 = 17.14 -> 17 and (5 + 22.5 + 30) / 1.75 = 32.86 -> 33.
  const Image cols = gray_image(4, 4, {10, 20, 30, 40, 10, 20, 30, 40, 10, 20, 30, 40, 10, 20, 30, 40});
  EXPECT_EQ(channel0(mf::resize_bilinear(cols, 2, 2)), (std::vector<int>{17, 33, 17, 33}));
  // Without antialiasing: plain bilinear at centres 1 and 3: the means of pairs.
  EXPECT_EQ(channel0(mf::resize_bilinear(cols, 2, 2, false)), (std::vector<int>{15, 35, 15, 35}));
  // A column 0, 0, 0, 70 shrunk to 2 rows: the vertical pass alone, (0, 70 * 0.75 / 1.75 = 30).
  const Image rows = gray_image(4, 1, {0, 0, 0, 70});
  EXPECT_EQ(channel0(mf::resize_bilinear(rows, 2, 1)), (std::vector<int>{0, 30}));
  // Enlarging 2 -> 4: output centres at input 0.25, 0.75, 1.25, 1.75, the window clipped at the
  // border: a, 3/4 a + 1/4 b, 1/4 a + 3/4 b, b; halves round up (62.5 -> 63).
  const Image two = gray_image(2, 2, {0, 200, 100, 100});
  EXPECT_EQ(channel0(mf::resize_bilinear(two, 4, 4)),
            (std::vector<int>{0, 50, 150, 200,      // row 0
                              25, 63, 138, 175,     // 3/4 row 0 + 1/4 row 1
                              75, 88, 113, 125,     // 1/4 row 0 + 3/4 row 1
                              100, 100, 100, 100}));
}

TEST(ImageResize, ShorterSideAndCentreCrop) {
  // 2 x 4 at size 2: no resize, the centre columns 1 and 2 (offset round(2 / 2) = 1).
  const Image wide = gray_image(2, 4, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(channel0(mf::resize_shorter_center_crop(wide, 2)), (std::vector<int>{2, 3, 6, 7}));
  // 5 x 2 (tall) at 2: rows round(3 / 2) = 2 (halves to even) .. 3.
  const Image tall = gray_image(5, 2, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5});
  EXPECT_EQ(channel0(mf::resize_shorter_center_crop(tall, 2)), (std::vector<int>{3, 3, 4, 4}));
  // 4 x 6 at 2: resized to 2 x 3 (torchvision: int(2 * 6 / 4) = 3), then columns 0..1 (round(0.5) = 0).
  const Image r = mf::resize_shorter_center_crop(pattern(4, 6, 3), 2);
  EXPECT_EQ(r, mf::crop(mf::resize_bilinear(pattern(4, 6, 3), 2, 3), 0, 0, 2, 2));
  // A shrink by 150 x 300 (windows of hundreds of taps): a flat image stays flat.
  Image flat(300, 600, 3);
  std::fill(flat.pixels.begin(), flat.pixels.end(), 77);
  const Image tiny = mf::resize_bilinear(flat, 2, 2);
  for (uint8_t v : tiny.pixels) EXPECT_EQ(v, 77);
  // Crop and flip.
  EXPECT_EQ(channel0(mf::crop(wide, 1, 1, 1, 3)), (std::vector<int>{6, 7, 8}));
  EXPECT_EQ(channel0(mf::flip_horizontal(wide)), (std::vector<int>{4, 3, 2, 1, 8, 7, 6, 5}));
  EXPECT_NE(error_of([&] { mf::crop(wide, 1, 2, 2, 2); }).find("outside the 2x4 image"), std::string::npos);
}

// ---------------------------------------------------------------- transforms

TEST(ImageTransforms, NormaliseChannelsFirst) {
  mf::ImageTransformOptions o;
  o.image_size = 2;
  Image img(2, 2, 3);
  img.pixels = {0, 255, 51, 255, 0, 51, 51, 51, 51, 102, 102, 102};
  std::vector<float> out(12);
  mf::normalize_into(img, o, out.data());
  // (v / 255 - 0.5) / 0.5, channel planes R, G, B each 2 x 2.
  const std::vector<float> want = {-1, 1, -0.6f, -0.2f, 1, -1, -0.6f, -0.2f, -0.6f, -0.6f, -0.6f, -0.2f};
  for (size_t i = 0; i < 12; ++i) EXPECT_NEAR(out[i], want[i], 1e-6) << i;
  o.mean = {0.485, 0.456, 0.406};
  o.std = {0.229, 0.224, 0.225};
  mf::normalize_into(img, o, out.data());
  EXPECT_NEAR(out[0], (0.0 - 0.485) / 0.229, 1e-5);
  EXPECT_NEAR(out[4], (1.0 - 0.456) / 0.224, 1e-5);
  EXPECT_NEAR(out[8], (0.2 - 0.406) / 0.225, 1e-5);
  // Evaluation: the hand-resized 4 x 4 -> 2 x 2 of FourByFourByHand, normalised.
  const Image cols = gray_image(4, 4, {10, 20, 30, 40, 10, 20, 30, 40, 10, 20, 30, 40, 10, 20, 30, 40});
  o.mean = {0.5, 0.5, 0.5};
  o.std = {0.5, 0.5, 0.5};
  mf::eval_transform(cols, o, out.data());
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(out[static_cast<size_t>(c * 4)], (17 / 255.0 - 0.5) / 0.5, 1e-6);
    EXPECT_NEAR(out[static_cast<size_t>(c * 4 + 1)], (33 / 255.0 - 0.5) / 0.5, 1e-6);
  }
  // One channel: PIL's luma of (255, 0, 0) is 76.
  o.channels = 1;
  o.mean = {0.0};
  o.std = {1.0};
  Image red(2, 2, 3);
  for (int i = 0; i < 4; ++i) red.pixels[static_cast<size_t>(i * 3)] = 255;
  mf::eval_transform(red, o, out.data());
  EXPECT_NEAR(out[0], 76 / 255.0, 1e-6);
  o.mean = {0.5, 0.5};
  EXPECT_NE(error_of([&] { mf::check_transform_options(o); }).find("one value per channel"), std::string::npos);
}

TEST(ImageTransforms, RandomResizedCropIsTorchvisionsSampling) {
  mf::ImageTransformOptions o;
  int flips = 0, fallbacks = 0;
  for (uint64_t index = 0; index < 2000; ++index) {
    const mf::AugmentRandom r(7, 3, index);
    const mf::CropBox b = mf::random_resized_crop_box(60, 80, o, r);
    // The first try that fits, worked out from the same draws.
    mf::CropBox want;
    bool found = false;
    for (uint32_t t = 0; t < 10 && !found; ++t) {
      const double area = 4800.0 * (0.08 + 0.92 * r.uniform(4 * t));
      const double ratio = std::exp(std::log(0.75) + (std::log(4.0 / 3.0) - std::log(0.75)) * r.uniform(4 * t + 1));
      const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(area * ratio)));
      const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(area / ratio)));
      if (w < 1 || w > 80 || h < 1 || h > 60) continue;
      want = {static_cast<int64_t>(std::floor(r.uniform(4 * t + 2) * static_cast<double>(61 - h))),
              static_cast<int64_t>(std::floor(r.uniform(4 * t + 3) * static_cast<double>(81 - w))), h, w};
      found = true;
    }
    if (!found) {
      ++fallbacks;
      want = {0, 0, 60, 80};  // 80 / 60 is within [3/4, 4/3]: the whole image
    }
    ASSERT_EQ(b, want) << "sample " << index;
    EXPECT_GE(b.height * b.width, static_cast<int64_t>(0.07 * 4800));
    flips += mf::random_flip(r) ? 1 : 0;
    // A pure function of (seed, epoch, index).
    EXPECT_EQ(mf::random_resized_crop_box(60, 80, o, mf::AugmentRandom(7, 3, index)), b);
  }
  EXPECT_NEAR(flips / 2000.0, 0.5, 0.05);
  EXPECT_LT(fallbacks, 20);
  // Another epoch or seed draws other boxes.
  int same = 0;
  for (uint64_t index = 0; index < 100; ++index)
    same += mf::random_resized_crop_box(60, 80, o, mf::AugmentRandom(7, 4, index)) ==
            mf::random_resized_crop_box(60, 80, o, mf::AugmentRandom(7, 3, index));
  EXPECT_LT(same, 5);
  // 1 x 100: no try fits, the fallback clamps the ratio to 4/3: a centred 1 x 1.
  EXPECT_EQ(mf::random_resized_crop_box(1, 100, o, mf::AugmentRandom(1, 0, 0)), (mf::CropBox{0, 49, 1, 1}));
  // 100 x 1: ratio 3/4 -> height round(1 / 0.75) = 1.
  EXPECT_EQ(mf::random_resized_crop_box(100, 1, o, mf::AugmentRandom(1, 0, 0)), (mf::CropBox{49, 0, 1, 1}));
}

TEST(ImageTransforms, TrainTransformIsCropResizeFlip) {
  mf::ImageTransformOptions o;
  o.image_size = 8;
  const Image img = pattern(20, 30, 5);
  std::vector<float> out(3 * 64), want(3 * 64);
  bool saw_flip = false, saw_plain = false;
  for (uint64_t index = 0; index < 16; ++index) {
    mf::train_transform(img, o, 11, 2, index, out.data());
    const mf::AugmentRandom r(11, 2, index);
    const mf::CropBox b = mf::random_resized_crop_box(20, 30, o, r);
    Image sized = mf::resize_bilinear(mf::crop(img, b.top, b.left, b.height, b.width), 8, 8);
    if (mf::random_flip(r)) {
      sized = mf::flip_horizontal(sized);
      saw_flip = true;
    } else {
      saw_plain = true;
    }
    mf::normalize_into(sized, o, want.data());
    ASSERT_EQ(out, want) << index;
  }
  EXPECT_TRUE(saw_flip && saw_plain);
  // Both off: the evaluation transform.
  o.random_resized_crop = false;
  o.horizontal_flip = false;
  mf::train_transform(img, o, 11, 2, 0, out.data());
  mf::eval_transform(img, o, want.data());
  EXPECT_EQ(out, want);
}

// ---------------------------------------------------------------- folders

// root/<class>/<files>: PNG and JPEG images of distinct patterns, and files that are not images.
struct Folder {
  TempDir dir;
  std::string root() const { return dir.file("imgs"); }
  void add(const std::string& cls, const std::string& name, int seed, int64_t h = 12, int64_t w = 9) {
    fs::create_directories(fs::path(root()) / cls);
    const std::string path = (fs::path(root()) / cls / name).string();
    const bool jpg = name.find(".jp") != std::string::npos || name.find(".JP") != std::string::npos;
    if (jpg) mf::write_jpeg(pattern(h, w, seed), path, 95);
    else mf::write_png(pattern(h, w, seed), path);
  }
};

// Four classes, eleven images.
void fill(Folder& f) {
  f.add("cat", "2.png", 1);
  f.add("cat", "10.png", 2, 7, 15);
  f.add("cat", "1.jpg", 3);
  f.add("ant", "x.JPEG", 4, 16, 16);
  f.add("ant", "a.png", 5);
  f.add("dog10", "b.png", 6);
  f.add("dog2", "c.jpg", 7, 30, 10);
  f.add("dog2", "d.png", 8);
  f.add("dog2", "e.png", 9);
  f.add("dog2", "f.png", 10);
  f.add("dog2", "g.png", 11);
  mft::write_text(f.root() + "/cat/notes.txt", "not an image");
  mft::write_text(f.root() + "/cat/.hidden.png", "skipped");
  fs::create_directories(f.root() + "/cat/sub");
  mft::write_text(f.root() + "/README", "a file beside the classes");
  fs::create_directories(f.root() + "/.cache");
}

TEST(ImageFolder, ClassesAndImagesSortedByName) {
  Folder f;
  fill(f);
  const mf::ImageFolder d(f.root());
  EXPECT_EQ(d.classes(), (std::vector<std::string>{"ant", "cat", "dog10", "dog2"}));
  EXPECT_EQ(d.files(), (std::vector<std::string>{"ant/a.png", "ant/x.JPEG", "cat/1.jpg", "cat/10.png", "cat/2.png",
                                                 "dog10/b.png", "dog2/c.jpg", "dog2/d.png", "dog2/e.png", "dog2/f.png",
                                                 "dog2/g.png"}));
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < d.size(); ++i) labels.push_back(d.label(i));
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 0, 1, 1, 1, 2, 3, 3, 3, 3, 3}));
  EXPECT_EQ(d.class_counts(), (std::vector<int64_t>{2, 3, 1, 5}));
  // As decoded; and canonical squares at an image size.
  EXPECT_EQ(d.image(3), mf::decode_image_file(f.root() + "/cat/10.png"));
  EXPECT_EQ(d.image(3).width, 15);
  const mf::ImageFolder sq(f.root(), 6);
  EXPECT_EQ(sq.image(3), mf::resize_shorter_center_crop(mf::decode_image_file(f.root() + "/cat/10.png"), 6));
}

TEST(ImageFolder, PackedEqualsFolder) {
  Folder f;
  fill(f);
  const std::string prefix = f.dir.file("packed");
  const mf::PackImagesResult r = mf::pack_image_folder(f.root(), prefix, 6, 2);
  EXPECT_EQ(r.images, 11);
  EXPECT_EQ(r.classes, 4);
  EXPECT_EQ(r.bytes, 11 * 6 * 6 * 3);
  // One thread or none writes the same bytes.
  mf::pack_image_folder(f.root(), f.dir.file("seq"), 6, 0);
  EXPECT_EQ(mft::slurp(prefix + ".bin"), mft::slurp(f.dir.file("seq") + ".bin"));
  const mf::PackedImages p(prefix);
  const mf::ImageFolder d(f.root(), 6);
  ASSERT_EQ(p.size(), d.size());
  EXPECT_EQ(p.classes(), d.classes());
  EXPECT_EQ(p.image_size(), 6);
  for (int64_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(p.label(i), d.label(i));
    EXPECT_EQ(p.image(i), d.image(i)) << d.files()[static_cast<size_t>(i)];
  }
  EXPECT_NE(p.describe(4).find("cat/2.png"), std::string::npos);
  // open_image_dataset tells them apart; P.bin and P.json name the packed set too.
  EXPECT_EQ(mf::open_image_dataset(f.root(), 6)->kind(), "image folder");
  for (const std::string& name : {prefix, prefix + ".bin", prefix + ".json"}) {
    auto any = mf::open_image_dataset(name, 0);
    EXPECT_EQ(any->kind(), "packed images");
    EXPECT_EQ(any->image(10), d.image(10));
  }
  // No temporaries left beside the outputs.
  for (const auto& e : fs::directory_iterator(f.dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(ImageFolder, BadInput) {
  TempDir dir;
  EXPECT_NE(error_of([&] { mf::ImageFolder d(dir.file("nope")); }).find(dir.file("nope") + ": no such folder"),
            std::string::npos);
  EXPECT_NE(error_of([&] { mf::open_image_dataset(dir.file("nope"), 8, "data.train_folder"); })
                .find("data.train_folder " + dir.file("nope") + ": neither an image folder"),
            std::string::npos);
  fs::create_directories(dir.file("empty"));
  EXPECT_NE(error_of([&] { mf::ImageFolder d(dir.file("empty")); }).find("holds no class folder"), std::string::npos);
  fs::create_directories(dir.file("noimg/a"));
  mft::write_text(dir.file("noimg/a/x.txt"), "text");
  EXPECT_NE(error_of([&] { mf::ImageFolder d(dir.file("noimg")); }).find("class folder a holds no .png"), std::string::npos);
  // A corrupt image fails packing, naming it, and writes nothing.
  Folder f;
  fill(f);
  mft::write_text(f.root() + "/dog2/e.png", "corrupt");
  const std::string e = error_of([&] { mf::pack_image_folder(f.root(), f.dir.file("out"), 6, 2); });
  EXPECT_NE(e.find(f.root() + "/dog2/e.png: not a PNG or JPEG"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(f.dir.file("out.bin")));
  EXPECT_FALSE(fs::exists(f.dir.file("out.json")));
  // A packed .bin that does not match its index.
  Folder g;
  g.add("a", "1.png", 1);
  g.add("b", "1.png", 2);
  mf::pack_image_folder(g.root(), g.dir.file("p"), 4, 0);
  std::string bin = mft::slurp(g.dir.file("p.bin"));
  mft::write_text(g.dir.file("p.bin"), bin.substr(0, bin.size() - 1));
  EXPECT_NE(error_of([&] { mf::PackedImages p(g.dir.file("p")); }).find("bytes where 2 images of 4x4 RGB take 96"),
            std::string::npos);
}

// ---------------------------------------------------------------- prefetching

TEST(ImagePrefetch, OrderedWhateverTheThreadsAndErrorsInOrder) {
  for (int threads : {0, 1, 3, 8}) {
    mf::OrderedPrefetcher<int64_t> p(
        [](int64_t k) -> int64_t {
          if (k == 37) throw mf::Error("item 37 failed");
          return k * k;
        },
        threads, 5);
    for (int64_t k = 0; k < 37; ++k) ASSERT_EQ(p.next(), k * k) << threads;
    EXPECT_NE(error_of([&] { p.next(); }).find("item 37 failed"), std::string::npos);
    EXPECT_EQ(p.next(), 38 * 38);
  }
  // Destroyed with work in flight: joins.
  mf::OrderedPrefetcher<int64_t> q([](int64_t k) { return k; }, 4, 64);
  EXPECT_EQ(q.next(), 0);
}

// ---------------------------------------------------------------- batches

mf::train::ImageBatchOptions batch_options(bool train, int threads, int64_t samples) {
  mf::train::ImageBatchOptions o;
  o.transform.image_size = 5;
  o.train = train;
  o.seed = 99;
  o.num_samples = samples;
  o.decode_threads = threads;
  return o;
}

std::vector<float> floats(const mf::Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}
std::vector<int64_t> longs(const mf::Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

TEST(ImageBatches, ShapesLabelsAndEpochOrder) {
  Folder f;
  fill(f);
  const mf::ImageFolder d(f.root(), 6);
  mf::train::ImageBatchSource src(d, batch_options(true, 2, 33), 0, 1);
  const mf::models::Batch b = src.next(4);
  EXPECT_EQ(b.pixel_values.shape(), (mf::Shape{4, 3, 5, 5}));
  EXPECT_EQ(b.pixel_values.dtype(), mf::DType::kF32);
  EXPECT_EQ(b.labels.shape(), (mf::Shape{4}));
  EXPECT_EQ(b.labels.dtype(), mf::DType::kI64);
  EXPECT_EQ(b.rows(), 4);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(longs(b.labels)[static_cast<size_t>(i)], d.label(src.image_of(i)));
  // Each epoch shows every image once, in its own order; the augmentation differs by epoch.
  for (int64_t e = 0; e < 3; ++e) {
    std::set<int64_t> seen;
    for (int64_t i = e * 11; i < (e + 1) * 11; ++i) {
      seen.insert(src.image_of(i));
      EXPECT_EQ(src.epoch_of(i), e);
    }
    EXPECT_EQ(seen.size(), 11u);
  }
  std::vector<int64_t> e0, e1;
  for (int64_t i = 0; i < 11; ++i) {
    e0.push_back(src.image_of(i));
    e1.push_back(src.image_of(11 + i));
  }
  EXPECT_NE(e0, e1);
  // The pixels are train_transform of (seed, epoch, image).
  std::vector<float> want(75), got(75);
  const int64_t i = 13;
  src.sample_into(i, got.data());
  mf::train_transform(d.image(src.image_of(i)), batch_options(true, 0, 1).transform, 99, 1,
                      static_cast<uint64_t>(src.image_of(i)), want.data());
  EXPECT_EQ(got, want);
}

TEST(ImageBatches, SameBatchesForAnyThreadCountLayoutAndResume) {
  Folder f;
  fill(f);
  const mf::ImageFolder folder(f.root(), 6);
  mf::pack_image_folder(f.root(), f.dir.file("p"), 6, 2);
  const mf::PackedImages packed(f.dir.file("p"));
  // One rank, micro-batch 6, no background threads: the reference (3 epochs' worth, wrapping).
  mf::train::ImageBatchSource ref(folder, batch_options(true, 0, 40), 0, 1);
  std::vector<std::vector<float>> px;
  std::vector<std::vector<int64_t>> lab;
  for (int step = 0; step < 8; ++step) {
    const auto b = ref.next(6);
    px.push_back(floats(b.pixel_values));
    lab.push_back(longs(b.labels));
  }
  // 1 and 3 threads, folder or packed: identical.
  for (const mf::ImageDataset* d : {static_cast<const mf::ImageDataset*>(&folder), static_cast<const mf::ImageDataset*>(&packed)})
    for (int threads : {1, 3}) {
      mf::train::ImageBatchSource s(*d, batch_options(true, threads, 40), 0, 1);
      for (int step = 0; step < 8; ++step) {
        const auto b = s.next(6);
        ASSERT_EQ(floats(b.pixel_values), px[static_cast<size_t>(step)]) << d->kind() << " threads " << threads;
        ASSERT_EQ(longs(b.labels), lab[static_cast<size_t>(step)]);
      }
    }
  // Two data-parallel ranks of micro-batch 3: their slices concatenate to the one-rank batch.
  mf::train::ImageBatchSource r0(folder, batch_options(true, 2, 40), 0, 2), r1(folder, batch_options(true, 1, 40), 1, 2);
  for (int step = 0; step < 8; ++step) {
    std::vector<float> p = floats(r0.next(3).pixel_values), q = floats(r1.next(3).pixel_values);
    p.insert(p.end(), q.begin(), q.end());
    ASSERT_EQ(p, px[static_cast<size_t>(step)]) << step;
  }
  EXPECT_EQ(r0.position(), 48u);
  // Resume from a position: the batches continue.
  mf::train::ImageBatchSource resumed(folder, batch_options(true, 2, 40), 0, 1);
  resumed.next(6);  // a batch of another position first: the prefetcher restarts
  resumed.set_position(30);
  for (int step = 5; step < 8; ++step) ASSERT_EQ(floats(resumed.next(6).pixel_values), px[static_cast<size_t>(step)]);
  // Evaluation: the images in order, through eval_transform, wrapping after the last.
  mf::train::ImageBatchSource ev(folder, batch_options(false, 2, 0), 0, 1);
  EXPECT_EQ(ev.size(), 11);
  std::vector<float> want(75);
  for (int step = 0; step < 3; ++step) {
    const auto b = ev.next(4);
    const std::vector<float> got = floats(b.pixel_values);
    for (int64_t k = 0; k < 4; ++k) {
      const int64_t img = (step * 4 + k) % 11;
      mf::eval_transform(folder.image(img), batch_options(false, 0, 0).transform, want.data());
      ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + k * 75)) << img;
      EXPECT_EQ(longs(b.labels)[static_cast<size_t>(k)], folder.label(img));
    }
  }
}

TEST(ImageBatches, DecodeErrorNamesTheFile) {
  Folder f;
  fill(f);
  mft::write_text(f.root() + "/dog2/e.png", "corrupt");
  const mf::ImageFolder d(f.root(), 6);
  for (int threads : {0, 2}) {
    mf::train::ImageBatchSource ev(d, batch_options(false, threads, 0), 0, 1);
    EXPECT_NO_THROW(ev.next(8));  // images 0..7
    const std::string e = error_of([&] { ev.next(2); });  // 8 is dog2/e.png
    EXPECT_NE(e.find(f.root() + "/dog2/e.png: not a PNG or JPEG"), std::string::npos) << e;
  }
}

TEST(ImageBatches, SourcesFromConfig) {
  Folder f;
  fill(f);
  mf::pack_image_folder(f.root(), f.dir.file("valid"), 16, 0);
  mf::Config c;
  c.set("data.train_folder", f.root());
  c.set("data.validation_folder", f.dir.file("valid"));
  c.set("model.image_size", "16");
  c.set("data.decode_threads", "1");
  // The class count must be model.num_labels.
  EXPECT_NE(error_of([&] { mf::train::image_sources(c, 1, 8, 8); })
                .find("data.train_folder " + f.root() + " holds 4 classes and model.num_labels is 2: set model.num_labels=4"),
            std::string::npos);
  c.set("model.num_labels", "4");
  // A packed set holds centre squares: evaluation's stretch (the default) cannot be made of them.
  EXPECT_NE(error_of([&] { mf::train::image_sources(c, 1, 8, 8); })
                .find("data.validation_folder " + f.dir.file("valid") + " is packed: its images are already centre "
                      "squares, and data.eval_resize=stretch"),
            std::string::npos);
  c.set("data.eval_resize", "shorter_side_crop");
  mf::train::ImageSources s = mf::train::image_sources(c, 1, 8, 8);
  EXPECT_EQ(s.train_data->kind(), "image folder");
  EXPECT_EQ(s.valid_data->kind(), "packed images");
  EXPECT_NE(s.note.find("4 classes, 11 (image folder) training images, 11 (packed images) held out"), std::string::npos)
      << s.note;
  EXPECT_EQ(s.train->next(2).pixel_values.shape(), (mf::Shape{2, 3, 16, 16}));
  // The validation source of a folder packed at the model's size: the folder's batches.
  auto v = s.valid();
  mf::train::ImageBatchOptions o = batch_options(false, 0, 0);
  o.transform.image_size = 16;
  o.transform.eval_resize = mf::EvalResize::kShorterSideCrop;
  const mf::ImageFolder folder(f.root(), 16);
  mf::train::ImageBatchSource direct(folder, o, 0, 1);
  EXPECT_EQ(floats(v->next(5).pixel_values), floats(direct.next(5).pixel_values));
  // Wrong mean/std length; a missing folder.
  c.set("data.image_mean", "[0.5]");
  EXPECT_NE(error_of([&] { mf::train::image_sources(c, 1, 8, 8); }).find("one value per channel (3)"), std::string::npos);
  c.set("data.image_mean", "[0.5, 0.5, 0.5]");
  c.set("data.validation_folder", f.dir.file("missing"));
  EXPECT_NE(error_of([&] { mf::train::image_sources(c, 1, 8, 8); }).find("data.validation_folder " + f.dir.file("missing")),
            std::string::npos);
  EXPECT_NO_THROW(mf::train::image_sources(c, 1, 8, 0));  // no evaluation: not opened
}

// Evaluation follows Hugging Face's ViTImageProcessor: a non-square image is stretched to
// image_size x image_size (PIL's BILINEAR), not cut to its centre square. The expected values are
// PIL's resampling worked out here: shrinking 4 -> 2 columns widens the triangle filter by the scale
// 2 (support 2), so output column 0 (centre 1.0 in input pixels) weighs columns 0, 1, 2 by
// tri(0.25), tri(0.25), tri(0.75) = 0.75, 0.75, 0.25 and output column 1 (centre 3.0) weighs columns
// 1, 2, 3 by 0.25, 0.75, 0.75, each sum renormalised (1.75); the 2 rows keep their size (identity).
// data.eval_resize=shorter_side_crop keeps torchvision's Resize + CenterCrop: columns 1 and 2.
TEST(ImageBatches, EvaluationStretchesAsViTImageProcessor) {
  TempDir dir;
  const std::string root = dir.file("valid");
  const uint8_t rows[2][4] = {{0, 70, 140, 210}, {20, 90, 160, 230}};
  for (const char* cls : {"a", "b"}) {
    fs::create_directories(fs::path(root) / cls);
    Image img(2, 4);  // 2 high, 4 wide
    for (int64_t y = 0; y < 2; ++y)
      for (int64_t x = 0; x < 4; ++x)
        for (int64_t ch = 0; ch < 3; ++ch) img.at(y, x, ch) = static_cast<uint8_t>(rows[y][x] + 5 * ch);
    mf::write_png(img, (fs::path(root) / cls / "i.png").string());
  }
  auto pil_bilinear_4_to_2 = [](const uint8_t* r, int64_t out_x) {
    const double center = (static_cast<double>(out_x) + 0.5) * 2.0, support = 2.0;
    double sum = 0, weights = 0;
    for (int64_t x = 0; x < 4; ++x) {
      const double d = std::abs((static_cast<double>(x) + 0.5 - center) / 2.0);
      const double w = d < 1.0 ? 1.0 - d : 0.0;
      if (static_cast<double>(x) + 0.5 < center - support || static_cast<double>(x) + 0.5 > center + support) continue;
      sum += w * r[x];
      weights += w;
    }
    return std::lround(sum / weights);
  };
  EXPECT_EQ(pil_bilinear_4_to_2(rows[0], 0), 50);  // (0.75 * 0 + 0.75 * 70 + 0.25 * 140) / 1.75
  EXPECT_EQ(pil_bilinear_4_to_2(rows[0], 1), 160);
  mf::Config c;
  c.set("model.image_size", "2");
  c.set("model.num_labels", "2");
  c.set("data.validation_folder", root);
  c.set("data.decode_threads", "0");
  for (const char* mode : {"stretch", "shorter_side_crop"}) {
    SCOPED_TRACE(mode);
    c.set("data.eval_resize", mode);
    mf::train::ImageSources s = mf::train::image_sources(c, 1, 0, 2);
    const mf::models::Batch b = s.valid()->next(1);
    ASSERT_EQ(b.pixel_values.shape(), (mf::Shape{1, 3, 2, 2}));
    const float* px = b.pixel_values.data<float>();
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < 2; ++y)
        for (int64_t x = 0; x < 2; ++x) {
          uint8_t shifted[4];
          for (int64_t k = 0; k < 4; ++k) shifted[k] = static_cast<uint8_t>(rows[y][k] + 5 * ch);
          const long v = std::string(mode) == "stretch" ? pil_bilinear_4_to_2(shifted, x) : shifted[1 + x];
          EXPECT_FLOAT_EQ(px[(ch * 2 + y) * 2 + x], (static_cast<float>(v) / 255.0f - 0.5f) / 0.5f)
              << "channel " << ch << " (" << y << ", " << x << ")";
        }
  }
  c.set("data.eval_resize", "squash");
  EXPECT_NE(error_of([&] { mf::train::image_sources(c, 1, 0, 2); }).find("data.eval_resize 'squash' is not one of stretch"),
            std::string::npos);
}

}  // namespace
