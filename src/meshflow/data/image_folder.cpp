// ImageFolder, PackedImages and the packing of a folder (see image_folder.h).
#include "meshflow/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"
#include "meshflow/data/prefetch.h"

namespace mf {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPackedFormat = "meshflow.packed_images";
constexpr int64_t kPackedVersion = 1;

bool has_image_extension(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == "png" || ext == "jpg" || ext == "jpeg";
}

// P for "P", "P.bin" and "P.json".
std::string packed_prefix(const std::string& path) {
  for (const char* ext : {".bin", ".json"}) {
    const std::string e(ext);
    if (path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0)
      return path.substr(0, path.size() - e.size());
  }
  return path;
}

}  // namespace

std::vector<int64_t> ImageDataset::class_counts() const {
  std::vector<int64_t> counts(static_cast<size_t>(num_classes()), 0);
  for (int64_t i = 0; i < size(); ++i) ++counts[static_cast<size_t>(label(i))];
  return counts;
}

// ------------------------------------------------------------------------------ ImageFolder

ImageFolder::ImageFolder(const std::string& root, int64_t image_size) : root_(root), image_size_(image_size) {
  const std::string where = "image folder " + root;
  MF_CHECK(image_size >= 0, where, ": image_size ", image_size, " must be >= 0");
  std::error_code ec;
  MF_CHECK(fs::is_directory(root, ec), where, ": no such folder");
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.empty() && name[0] != '.' && e.is_directory()) classes_.push_back(name);
  }
  MF_CHECK(!ec, where, ": cannot list it: ", ec.message());
  std::sort(classes_.begin(), classes_.end());
  MF_CHECK(!classes_.empty(), where, ": holds no class folder (expected ", root, "/<class>/<image>.png|jpg|jpeg)");
  for (size_t c = 0; c < classes_.size(); ++c) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(fs::path(root) / classes_[c], ec)) {
      const std::string name = e.path().filename().string();
      if (!name.empty() && name[0] != '.' && has_image_extension(name) && e.is_regular_file()) names.push_back(name);
    }
    MF_CHECK(!ec, where, ": cannot list class folder ", classes_[c], ": ", ec.message());
    MF_CHECK(!names.empty(), where, ": class folder ", classes_[c], " holds no .png, .jpg or .jpeg image");
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      files_.push_back(classes_[c] + "/" + n);
      labels_.push_back(static_cast<int64_t>(c));
    }
  }
}

int64_t ImageFolder::label(int64_t i) const {
  MF_CHECK(i >= 0 && i < size(), "image folder ", root_, ": image ", i, " outside [0, ", size(), ")");
  return labels_[static_cast<size_t>(i)];
}

std::string ImageFolder::describe(int64_t i) const {
  MF_CHECK(i >= 0 && i < size(), "image folder ", root_, ": image ", i, " outside [0, ", size(), ")");
  return (fs::path(root_) / files_[static_cast<size_t>(i)]).string();
}

Image ImageFolder::image(int64_t i) const {
  Image img = decode_image_file(describe(i));
  return image_size_ > 0 ? resize_shorter_center_crop(img, image_size_) : img;
}

// ------------------------------------------------------------------------------ PackedImages

PackedImages::PackedImages(const std::string& prefix) : prefix_(prefix) {
  const std::string json_path = prefix + ".json", bin_path = prefix + ".bin";
  const std::string where = "packed images " + json_path;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(json_path));
  } catch (const nlohmann::json::exception& e) {
    MF_THROW(where, ": not valid JSON: ", e.what());
  }
  try {
    MF_CHECK(j.is_object() && j.value("format", "") == kPackedFormat, where, ": not a packed image index (format '",
             kPackedFormat, "' expected)");
    const int64_t version = j.at("version").get<int64_t>();
    MF_CHECK(version == kPackedVersion, where, ": format version ", version, ", this build reads ", kPackedVersion);
    image_size_ = j.at("image_size").get<int64_t>();
    MF_CHECK(image_size_ > 0 && j.at("channels").get<int64_t>() == 3, where, ": image_size ", image_size_,
             " and channels ", j.at("channels").dump(), " (3) are not valid");
    classes_ = j.at("classes").get<std::vector<std::string>>();
    labels_ = j.at("labels").get<std::vector<int64_t>>();
    files_ = j.at("files").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    MF_THROW(where, ": ", e.what());
  }
  MF_CHECK(!labels_.empty() && files_.size() == labels_.size(), where, ": ", labels_.size(), " labels and ",
           files_.size(), " files (equal and at least 1 expected)");
  for (int64_t y : labels_)
    MF_CHECK(y >= 0 && y < num_classes(), where, ": label ", y, " outside the ", num_classes(), " classes");
  bin_ = MappedFile(bin_path);
  const auto want = static_cast<size_t>(size() * image_size_ * image_size_ * 3);
  MF_CHECK(bin_.size() == want, "packed images ", bin_path, ": ", bin_.size(), " bytes where ", size(), " images of ",
           image_size_, "x", image_size_, " RGB take ", want, " (a file from another packing?)");
}

int64_t PackedImages::label(int64_t i) const {
  MF_CHECK(i >= 0 && i < size(), "packed images ", prefix_, ": image ", i, " outside [0, ", size(), ")");
  return labels_[static_cast<size_t>(i)];
}

std::string PackedImages::describe(int64_t i) const {
  MF_CHECK(i >= 0 && i < size(), "packed images ", prefix_, ": image ", i, " outside [0, ", size(), ")");
  return prefix_ + ".bin[" + std::to_string(i) + "] (" + files_[static_cast<size_t>(i)] + ")";
}

Image PackedImages::image(int64_t i) const {
  MF_CHECK(i >= 0 && i < size(), "packed images ", prefix_, ": image ", i, " outside [0, ", size(), ")");
  Image img(image_size_, image_size_, 3);
  const size_t n = img.pixels.size();
  std::copy(bin_.data() + static_cast<size_t>(i) * n, bin_.data() + static_cast<size_t>(i + 1) * n, img.pixels.begin());
  return img;
}

// ------------------------------------------------------------------------------ opening, packing

bool is_packed_images(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(packed_prefix(path) + ".json", ec);
}

std::unique_ptr<ImageDataset> open_image_dataset(const std::string& path, int64_t folder_image_size,
                                                 const std::string& what) {
  MF_CHECK(!path.empty(), what, " is empty: give an image folder (<root>/<class>/<image>.png|jpg) or a packed prefix "
           "(from `meshflow preprocess --images`)");
  std::error_code ec;
  if (fs::is_directory(path, ec)) return std::make_unique<ImageFolder>(path, folder_image_size);
  if (is_packed_images(path)) return std::make_unique<PackedImages>(packed_prefix(path));
  MF_THROW(what, " ", path, ": neither an image folder (<root>/<class>/<image>.png|jpg) nor a packed prefix (",
           packed_prefix(path), ".bin and .json from `meshflow preprocess --images`)");
}

PackImagesResult pack_image_folder(const std::string& root, const std::string& output_prefix, int64_t image_size,
                                   int threads) {
  MF_CHECK(image_size > 0, "pack images: --image-size ", image_size, " must be positive");
  MF_CHECK(!output_prefix.empty(), "pack images: the output prefix is empty");
  const ImageFolder folder(root, image_size);
  PackImagesResult r;
  r.bin = output_prefix + ".bin";
  r.json = output_prefix + ".json";
  r.images = folder.size();
  r.classes = folder.num_classes();
  {
    AtomicFile bin(r.bin);
    AtomicFile json(r.json);
    OrderedPrefetcher<Image> decoded([&folder](int64_t k) { return folder.image(k); }, threads, 4 * threads + 2);
    for (int64_t i = 0; i < folder.size(); ++i) {
      const Image img = decoded.next();
      bin.write(img.pixels.data(), img.pixels.size());
    }
    r.bytes = static_cast<int64_t>(bin.bytes_written());
    std::vector<int64_t> labels(static_cast<size_t>(folder.size()));
    for (int64_t i = 0; i < folder.size(); ++i) labels[static_cast<size_t>(i)] = folder.label(i);
    nlohmann::json j = {{"format", kPackedFormat},
                        {"version", kPackedVersion},
                        {"image_size", image_size},
                        {"channels", 3},
                        {"layout", "uint8 RGB, height x width x channel, one image after the other"},
                        {"resize", "shorter side to image_size (PIL bilinear, antialiased), centre crop"},
                        {"num_images", folder.size()},
                        {"classes", folder.classes()},
                        {"labels", labels},
                        {"files", folder.files()}};
    json.write(j.dump(1) + "\n");
    bin.commit();
    json.commit();
  }
  return r;
}

}  // namespace mf
