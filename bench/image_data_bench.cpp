// Image pipeline throughput: images/s of ImageBatchSource (decode, canonical square, training
// transforms — RandomResizedCrop + flip + normalisation — into pixel_values) from an image folder
// and from its packed form, with 0 (on the calling thread), 1 and 2 background decode threads, on
// the handwritten digits (8x8 PNGs, scripts/make_digits.sh; skipped when missing) and on a folder
// of synthetic 224x224 JPEGs written here. Printed as a table.
//
// Then images/s trained beside images/s decoded: the same source (folder, 2 decode threads) feeding
// a ViT's forward and backward on every batch — the tiny ViT of configs/vit/tiny.yaml on the
// digits at 16 pixels, and ViT-Base/16 on the 224-pixel JPEGs — with the decoding of the next
// batches overlapping the step: when the trained rate is far below the decoded one, the step never
// waits on decoding.
//
// Usage: meshflow_image_data_bench [digits_dir (data/digits/train)] [image_size (224)] [micro_batch (32)]
//        [batches (12)] [jpegs (192)]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>

#include "meshflow/data/image_folder.h"
#include "meshflow/models/vit/model.h"
#include "meshflow/random/philox.h"
#include "meshflow/train/image_batches.h"

namespace {

namespace fs = std::filesystem;

// One training step on a batch (the model engineer's hook); empty: decoding alone.
using TrainStep = std::function<void(const mf::models::Batch&)>;

// Images per second through `source`: one warm-up batch (threads start, caches fill), then
// `batches` timed micro-batches, each handed to `step` when given.
double images_per_second(mf::train::BatchSource& source, int64_t micro_batch, int64_t batches,
                         const TrainStep& step = {}) {
  if (step) step(source.next(micro_batch));
  else source.next(micro_batch);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < batches; ++i) {
    const mf::models::Batch b = source.next(micro_batch);
    if (step) step(b);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(micro_batch * batches) / s;
}

// n JPEGs of 224 x 224 in 8 classes: smooth colour fields with noise (photo-like sizes, ~20 KB).
void write_jpegs(const std::string& root, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const std::string dir = root + "/class" + std::to_string(i % 8);
    fs::create_directories(dir);
    mf::Image img(224, 224, 3);
    for (int64_t y = 0; y < 224; ++y)
      for (int64_t x = 0; x < 224; ++x)
        for (int64_t c = 0; c < 3; ++c) {
          const double base = 128 + 100 * std::sin(0.03 * static_cast<double>(x + 7 * i) + 0.05 * static_cast<double>(y) + 2.0 * static_cast<double>(c));
          const double noise = 40 * (mf::philox_uniform(static_cast<uint64_t>(i), 0, static_cast<uint64_t>((y * 224 + x) * 3 + c)) - 0.5);
          img.at(y, x, c) = static_cast<uint8_t>(std::clamp(base + noise, 0.0, 255.0));
        }
    char name[32];
    std::snprintf(name, sizeof name, "/%05lld.jpg", static_cast<long long>(i));
    mf::write_jpeg(img, dir + name, 90);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string digits = argc > 1 ? argv[1] : "data/digits/train";
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  const int64_t S = arg(2, 224), mb = arg(3, 32), batches = arg(4, 12), jpegs = arg(5, 192);

  const fs::path tmp = fs::temp_directory_path() / ("meshflow_image_bench_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  struct Set {
    std::string name, folder;
  };
  std::vector<Set> sets;
  if (fs::is_directory(digits)) sets.push_back({"digits 8x8 png", digits});
  else std::printf("(no %s: run scripts/make_digits.sh for the digits rows)\n", digits.c_str());
  write_jpegs((tmp / "jpegs").string(), jpegs);
  sets.push_back({"synthetic 224x224 jpeg", (tmp / "jpegs").string()});

  std::printf("image pipeline, training transforms to %lldx%lld, micro-batch %lld, %lld batches per row\n",
              static_cast<long long>(S), static_cast<long long>(S), static_cast<long long>(mb),
              static_cast<long long>(batches));
  std::printf("%-24s %-8s %7s %9s %12s\n", "data", "format", "images", "threads", "images/s");
  for (const Set& set : sets) {
    const std::string prefix = (tmp / "packed").string();
    mf::pack_image_folder(set.folder, prefix, S, 2);
    const mf::ImageFolder folder(set.folder, S);
    const mf::PackedImages packed(prefix);
    for (const mf::ImageDataset* d : {static_cast<const mf::ImageDataset*>(&folder), static_cast<const mf::ImageDataset*>(&packed)}) {
      for (int threads : {0, 1, 2}) {
        mf::train::ImageBatchOptions o;
        o.transform.image_size = S;
        o.num_samples = mb * (batches + 1);
        o.decode_threads = threads;
        mf::train::ImageBatchSource source(*d, o);
        const double rate = images_per_second(source, mb, batches);
        std::printf("%-24s %-8s %7lld %9d %12.1f\n", set.name.c_str(), d == &folder ? "folder" : "packed",
                    static_cast<long long>(d->size()), threads, rate);
      }
    }
  }
  // Decoded vs trained: a ViT's forward + backward on every batch (f32, this process's threads).
  std::printf("\nimages/s decoded (2 decode threads, training transforms) vs trained (ViT forward + backward on each "
              "batch, decoding overlapped)\n");
  std::printf("%-24s %-34s %6s %12s %12s\n", "data", "model", "batch", "decoded/s", "trained/s");
  struct Run {
    std::string name, folder, model;
    int64_t image, patch, layers, hidden, heads, mlp, labels, micro, steps;
  };
  std::vector<Run> runs;
  if (fs::is_directory(digits)) runs.push_back({"digits 8x8 png", digits, "tiny ViT (16 px, 4x64)", 16, 4, 4, 64, 4, 256, 10, 32, 20});
  runs.push_back({"synthetic 224x224 jpeg", (tmp / "jpegs").string(), "ViT-Base/16 (224 px, 12x768)", 224, 16, 12, 768, 12,
                  3072, 8, 8, 2});
  for (const Run& r : runs) {
    const mf::ImageFolder folder(r.folder, r.image);
    mf::train::ImageBatchOptions o;
    o.transform.image_size = r.image;
    o.num_samples = r.micro * (r.steps + 1) * 2;
    o.decode_threads = 2;
    mf::train::ImageBatchSource decode_only(folder, o), feeding(folder, o);
    const double decoded = images_per_second(decode_only, r.micro, r.steps);
    mf::models::VitConfig c;
    c.image_size = r.image;
    c.patch_size = r.patch;
    c.num_layers = r.layers;
    c.hidden_size = r.hidden;
    c.num_attention_heads = r.heads;
    c.ffn_hidden_size = r.mlp;
    c.num_labels = r.labels;
    mf::models::VitModel model(c);
    model.init_weights(1);
    model.train();
    const TrainStep step = [&model](const mf::models::Batch& b) {
      model.loss(b).backward();
      for (auto& [name, t] : model.named_parameters()) t.set_grad(mf::Tensor());
    };
    const double trained = images_per_second(feeding, r.micro, r.steps, step);
    std::printf("%-24s %-34s %6lld %12.1f %12.1f\n", r.name.c_str(), r.model.c_str(), static_cast<long long>(r.micro),
                decoded, trained);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return 0;
}
