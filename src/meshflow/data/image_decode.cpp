// PNG and JPEG decoding into RGB, PIL's bilinear resampling, crops (see image_decode.h).
//
// libpng and libjpeg report errors by longjmp: each decoder below runs the library inside one
// C-style function whose locals are plain pointers set before setjmp, and writes into buffers
// owned by its caller, so no C++ object is skipped by a longjmp; the message is kept and thrown as
// mf::Error once the library's state is destroyed.
#include "meshflow/data/image_decode.h"

#include <jpeglib.h>
// jerror.h after jpeglib.h: the message codes (JWRN_JPEG_EOF)
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"

namespace mf {

namespace {

constexpr int64_t kMaxSide = 1 << 16;  // refuse absurd headers before allocating

// ---------------------------------------------------------------- PNG

struct PngReadState {
  const uint8_t* data;
  size_t size, pos;
  char message[256];
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* st = static_cast<PngReadState*>(png_get_error_ptr(png));
  std::snprintf(st->message, sizeof st->message, "%s", msg);
  png_longjmp(png, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}

void png_read_fn(png_structp png, png_bytep out, png_size_t n) {
  auto* st = static_cast<PngReadState*>(png_get_io_ptr(png));
  if (n > st->size - st->pos) png_error(png, "the file ends early (truncated PNG)");
  std::memcpy(out, st->data + st->pos, n);
  st->pos += n;
}

// Reads the header into *w, *h (phase 1) or the RGB rows into `rows` (phase 2, given the header
// of phase 1). Returns false with st->message set on a libpng error.
bool png_run(PngReadState* st, png_uint_32* w, png_uint_32* h, png_bytep* rows) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, png_error_fn, png_warning_fn);
  if (png == nullptr) {
    std::snprintf(st->message, sizeof st->message, "out of memory creating the PNG reader");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(st->message, sizeof st->message, "out of memory creating the PNG reader");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, st, png_read_fn);
  png_read_info(png, info);
  *w = png_get_image_width(png, info);
  *h = png_get_image_height(png, info);
  if (rows != nullptr) {
    const int color = png_get_color_type(png, info);
    const int depth = png_get_bit_depth(png, info);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);
    if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != 3 || png_get_rowbytes(png, info) != static_cast<png_size_t>(*w) * 3)
      png_error(png, "unsupported PNG pixel layout");
    png_read_image(png, rows);
    png_read_end(png, nullptr);
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Image decode_png(const uint8_t* data, size_t size, const std::string& name) {
  PngReadState st{data, size, 0, {0}};
  png_uint_32 w = 0, h = 0;
  MF_CHECK(png_run(&st, &w, &h, nullptr), "image ", name, ": cannot decode PNG: ", st.message);
  MF_CHECK(w > 0 && h > 0 && w <= kMaxSide && h <= kMaxSide, "image ", name, ": PNG size ", w, "x", h,
           " outside 1..", kMaxSide);
  Image img(h, w, 3);
  std::vector<png_bytep> rows(h);
  for (png_uint_32 y = 0; y < h; ++y) rows[y] = img.pixels.data() + static_cast<size_t>(y) * w * 3;
  st.pos = 0;
  MF_CHECK(png_run(&st, &w, &h, rows.data()), "image ", name, ": cannot decode PNG: ", st.message);
  return img;
}

// ---------------------------------------------------------------- JPEG

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;  // libjpeg only warns when the data ends early (and pads with gray); PIL refuses it
};

void jpeg_error_exit_fn(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}
void jpeg_output_message_fn(j_common_ptr) {}  // warnings (corrupt-data recoveries) stay silent
void jpeg_emit_message_fn(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) reinterpret_cast<JpegError*>(cinfo->err)->truncated = true;
}

struct JpegHeader {
  JDIMENSION width = 0, height = 0;
  int components = 0;
  bool cmyk = false, adobe = false;
};

// Phase 1 (out == nullptr): the header into *hdr. Phase 2: the pixels, RGB or CMYK (hdr->cmyk),
// into `out` (width * height * 3 or 4 bytes). Returns false with err->message set.
bool jpeg_run(const uint8_t* data, size_t size, JpegError* err, JpegHeader* hdr, uint8_t* out) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = jpeg_error_exit_fn;
  err->mgr.output_message = jpeg_output_message_fn;
  err->mgr.emit_message = jpeg_emit_message_fn;
  err->truncated = false;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  hdr->cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  hdr->adobe = cinfo.saw_Adobe_marker;
  cinfo.out_color_space = hdr->cmyk ? JCS_CMYK : JCS_RGB;
  if (out == nullptr) {
    jpeg_calc_output_dimensions(&cinfo);
    hdr->width = cinfo.output_width;
    hdr->height = cinfo.output_height;
    hdr->components = cinfo.output_components;
    jpeg_destroy_decompress(&cinfo);
    return true;
  }
  jpeg_start_decompress(&cinfo);
  const size_t stride = static_cast<size_t>(cinfo.output_width) * static_cast<size_t>(cinfo.output_components);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out + static_cast<size_t>(cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (err->truncated) {
    std::snprintf(err->message, sizeof err->message, "the file ends early (truncated JPEG)");
    return false;
  }
  return true;
}

Image decode_jpeg(const uint8_t* data, size_t size, const std::string& name) {
  JpegError err{};
  JpegHeader hdr;
  MF_CHECK(jpeg_run(data, size, &err, &hdr, nullptr), "image ", name, ": cannot decode JPEG: ", err.message);
  MF_CHECK(hdr.width > 0 && hdr.height > 0 && hdr.width <= kMaxSide && hdr.height <= kMaxSide, "image ", name,
           ": JPEG size ", hdr.width, "x", hdr.height, " outside 1..", kMaxSide);
  MF_CHECK(hdr.components == (hdr.cmyk ? 4 : 3), "image ", name, ": JPEG with ", hdr.components,
           " output components is not supported");
  if (!hdr.cmyk) {
    Image img(hdr.height, hdr.width, 3);
    MF_CHECK(jpeg_run(data, size, &err, &hdr, img.pixels.data()), "image ", name, ": cannot decode JPEG: ", err.message);
    return img;
  }
  std::vector<uint8_t> cmyk(static_cast<size_t>(hdr.width) * hdr.height * 4);
  MF_CHECK(jpeg_run(data, size, &err, &hdr, cmyk.data()), "image ", name, ": cannot decode JPEG: ", err.message);
  Image img(hdr.height, hdr.width, 3);
  const size_t n = static_cast<size_t>(hdr.width) * hdr.height;
  for (size_t i = 0; i < n; ++i) {
    // (255 - C)(255 - K) / 255 with C, K as written; Adobe's files store 255 - C and 255 - K.
    const unsigned k = hdr.adobe ? cmyk[i * 4 + 3] : 255u - cmyk[i * 4 + 3];
    for (size_t c = 0; c < 3; ++c) {
      const unsigned v = hdr.adobe ? cmyk[i * 4 + c] : 255u - cmyk[i * 4 + c];
      img.pixels[i * 3 + c] = static_cast<uint8_t>((v * k + 127) / 255);
    }
  }
  return img;
}

// ---------------------------------------------------------------- resampling

// One axis of PIL's bilinear resampling: output i reads inputs [first[i], first[i] + count[i])
// with weights w[i * taps ...], in PIL's fixed point (kPrecisionBits fraction bits).
constexpr int kPrecisionBits = 32 - 8 - 2;

struct Taps {
  int64_t taps = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> w;
};

Taps bilinear_taps(int64_t in, int64_t out, bool antialias) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double filterscale = antialias ? std::max(scale, 1.0) : 1.0;
  const double support = 1.0 * filterscale;  // the triangle's half-width, in input pixels
  const double ss = 1.0 / filterscale;
  Taps t;
  t.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<size_t>(out));
  t.count.resize(static_cast<size_t>(out));
  t.w.assign(static_cast<size_t>(out * t.taps), 0);
  std::vector<double> ws(static_cast<size_t>(t.taps));
  for (int64_t i = 0; i < out; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(center - support + 0.5));
    const int64_t hi = std::min<int64_t>(in, static_cast<int64_t>(center + support + 0.5));
    const int64_t n = std::min(hi - lo, t.taps);
    double total = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double x = std::abs((static_cast<double>(lo + k) - center + 0.5) * ss);
      ws[static_cast<size_t>(k)] = x < 1.0 ? 1.0 - x : 0.0;
      total += ws[static_cast<size_t>(k)];
    }
    for (int64_t k = 0; k < n; ++k) {
      const double wk = total != 0.0 ? ws[static_cast<size_t>(k)] / total : 0.0;
      t.w[static_cast<size_t>(i * t.taps + k)] = static_cast<int32_t>(wk * (1 << kPrecisionBits) + 0.5);
    }
    t.first[static_cast<size_t>(i)] = lo;
    t.count[static_cast<size_t>(i)] = n;
  }
  return t;
}

// A fixed-point sum (with its rounding half already added) to 8 bits.
uint8_t clip8(int32_t v) {
  return v <= 0 ? 0 : v >= (255 << kPrecisionBits) ? 255 : static_cast<uint8_t>(v >> kPrecisionBits);
}

}  // namespace

bool is_png(const uint8_t* data, size_t size) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return size >= 8 && std::memcmp(data, sig, 8) == 0;
}

bool is_jpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

Image decode_image(const uint8_t* data, size_t size, const std::string& name) {
  if (is_png(data, size)) return decode_png(data, size, name);
  if (is_jpeg(data, size)) return decode_jpeg(data, size, name);
  MF_THROW("image ", name, ": not a PNG or JPEG file (", size == 0 ? "empty" : "unknown signature", ")");
}

Image decode_image_file(const std::string& path) {
  const std::string bytes = read_file(path);
  return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

void write_png(const Image& img, const std::string& path) {
  MF_CHECK(img.channels == 1 || img.channels == 3, "write_png ", path, ": ", img.channels, " channels (1 or 3)");
  MF_CHECK(img.height > 0 && img.width > 0, "write_png ", path, ": empty image");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  MF_CHECK(f != nullptr, "write_png: cannot open ", path, " for writing");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  std::vector<png_bytep> rows(static_cast<size_t>(img.height));
  for (int64_t y = 0; y < img.height; ++y)
    rows[static_cast<size_t>(y)] = const_cast<png_bytep>(img.pixels.data() + y * img.width * img.channels);
  bool ok = info != nullptr;
  if (ok && setjmp(png_jmpbuf(png)) == 0) {
    png_init_io(png, f);
    png_set_IHDR(png, info, static_cast<png_uint_32>(img.width), static_cast<png_uint_32>(img.height), 8,
                 img.channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    png_write_image(png, rows.data());
    png_write_end(png, nullptr);
  } else {
    ok = false;
  }
  png_destroy_write_struct(&png, &info);
  ok = (std::fclose(f) == 0) && ok;
  MF_CHECK(ok, "write_png: cannot write ", path);
}

void write_jpeg(const Image& img, const std::string& path, int quality) {
  MF_CHECK(img.channels == 1 || img.channels == 3, "write_jpeg ", path, ": ", img.channels, " channels (1 or 3)");
  MF_CHECK(img.height > 0 && img.width > 0, "write_jpeg ", path, ": empty image");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  MF_CHECK(f != nullptr, "write_jpeg: cannot open ", path, " for writing");
  jpeg_compress_struct cinfo;
  JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit_fn;
  bool ok = true;
  if (setjmp(err.jump) == 0) {
    jpeg_create_compress(&cinfo);
    jpeg_stdio_dest(&cinfo, f);
    cinfo.image_width = static_cast<JDIMENSION>(img.width);
    cinfo.image_height = static_cast<JDIMENSION>(img.height);
    cinfo.input_components = static_cast<int>(img.channels);
    cinfo.in_color_space = img.channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
      JSAMPROW row = const_cast<JSAMPROW>(img.pixels.data() + cinfo.next_scanline * img.width * img.channels);
      jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
  } else {
    ok = false;
  }
  jpeg_destroy_compress(&cinfo);
  ok = (std::fclose(f) == 0) && ok;
  MF_CHECK(ok, "write_jpeg: cannot write ", path, err.message[0] ? ": " : "", err.message);
}

Image crop(const Image& img, int64_t top, int64_t left, int64_t h, int64_t w) {
  MF_CHECK(h > 0 && w > 0 && top >= 0 && left >= 0 && h <= img.height - top && w <= img.width - left, "crop: box (top ",
           top, ", left ", left, ", ", h, "x", w, ") outside the ", img.height, "x", img.width, " image");
  Image out(h, w, img.channels);
  const size_t row = static_cast<size_t>(w * img.channels);
  for (int64_t y = 0; y < h; ++y)
    std::memcpy(out.pixels.data() + y * w * img.channels,
                img.pixels.data() + ((top + y) * img.width + left) * img.channels, row);
  return out;
}

Image flip_horizontal(const Image& img) {
  Image out(img.height, img.width, img.channels);
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t x = 0; x < img.width; ++x)
      for (int64_t c = 0; c < img.channels; ++c) out.at(y, img.width - 1 - x, c) = img.at(y, x, c);
  return out;
}

Image resize_bilinear(const Image& img, int64_t out_h, int64_t out_w, bool antialias) {
  MF_CHECK(out_h > 0 && out_w > 0, "resize: output size ", out_h, "x", out_w, " must be positive");
  MF_CHECK(img.height > 0 && img.width > 0, "resize: empty input image");
  if (out_h == img.height && out_w == img.width) return img;
  const int64_t C = img.channels, H = img.height, W = img.width;
  constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);
  // Horizontal pass (H x out_w, 8 bits), then vertical, as PIL does them (a pass whose size does
  // not change is skipped).
  Image mid;
  const Image* rows = &img;
  if (out_w != W) {
    const Taps tx = bilinear_taps(W, out_w, antialias);
    mid = Image(H, out_w, C);
    for (int64_t y = 0; y < H; ++y) {
      const uint8_t* src = img.pixels.data() + y * W * C;
      uint8_t* dst = mid.pixels.data() + y * out_w * C;
      for (int64_t x = 0; x < out_w; ++x) {
        const int32_t* w = tx.w.data() + x * tx.taps;
        const int64_t first = tx.first[static_cast<size_t>(x)], n = tx.count[static_cast<size_t>(x)];
        for (int64_t c = 0; c < C; ++c) {
          int32_t s = kHalf;
          for (int64_t k = 0; k < n; ++k) s += w[k] * static_cast<int32_t>(src[(first + k) * C + c]);
          dst[x * C + c] = clip8(s);
        }
      }
    }
    rows = &mid;
  }
  if (out_h == H) return mid;
  const Taps ty = bilinear_taps(H, out_h, antialias);
  Image out(out_h, out_w, C);
  const int64_t row = out_w * C;
  std::vector<int32_t> acc(static_cast<size_t>(row));
  for (int64_t y = 0; y < out_h; ++y) {
    std::fill(acc.begin(), acc.end(), kHalf);
    const int32_t* w = ty.w.data() + y * ty.taps;
    const int64_t first = ty.first[static_cast<size_t>(y)], n = ty.count[static_cast<size_t>(y)];
    for (int64_t k = 0; k < n; ++k) {
      const uint8_t* src = rows->pixels.data() + (first + k) * row;
      const int32_t wk = w[k];
      for (int64_t i = 0; i < row; ++i) acc[static_cast<size_t>(i)] += wk * static_cast<int32_t>(src[i]);
    }
    uint8_t* dst = out.pixels.data() + y * row;
    for (int64_t i = 0; i < row; ++i) dst[i] = clip8(acc[static_cast<size_t>(i)]);
  }
  return out;
}

Image resize_shorter_center_crop(const Image& img, int64_t size, bool antialias) {
  MF_CHECK(size > 0, "resize: size ", size, " must be positive");
  const bool tall = img.height >= img.width;
  const int64_t shorter = tall ? img.width : img.height, longer = tall ? img.height : img.width;
  const int64_t new_long = size * longer / shorter;  // torchvision: int(size * long / short)
  const Image r = tall ? resize_bilinear(img, new_long, size, antialias) : resize_bilinear(img, size, new_long, antialias);
  const auto offset = [](int64_t have, int64_t want) {  // round((have - want) / 2), halves to even
    return static_cast<int64_t>(std::nearbyint(static_cast<double>(have - want) / 2.0));
  };
  if (r.height == size && r.width == size) return r;
  return crop(r, offset(r.height, size), offset(r.width, size), size, size);
}

Image to_gray(const Image& img) {
  MF_CHECK(img.channels == 3, "to_gray: needs an RGB image, got ", img.channels, " channels");
  Image out(img.height, img.width, 1);
  const size_t n = static_cast<size_t>(img.height * img.width);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = img.pixels[i * 3], g = img.pixels[i * 3 + 1], b = img.pixels[i * 3 + 2];
    out.pixels[i] = static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);  // PIL's "L"
  }
  return out;
}

}  // namespace mf
