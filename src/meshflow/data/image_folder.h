// Image-classification datasets: the ImageNet-style folder and its packed form.
//
// Folder: root/<class>/<image>.(png|jpg|jpeg) (extensions in any case; other files and
// sub-folders of a class are ignored; dot-files and dot-folders are skipped). Classes are the
// sub-folders of root sorted by name (byte order) and a class's label is its index, as
// torchvision's ImageFolder; images are sorted by their path, so image i is the same in every
// run. A folder without classes, or with a class holding no image, is an error.
//
// Packed (`meshflow preprocess --images ROOT --output-prefix P --image-size S`): every image
// decoded once, its shorter side resized to S and the centre S x S square cropped
// (resize_shorter_center_crop), stored as S*S*3 bytes of RGB (HWC) one after the other in
// P.bin, with P.json holding the format, the size, the class names, one label per image and the
// images' paths relative to the root. Both files are written atomically (temporary, fsync,
// rename; P.bin before P.json), so a reader sees both complete or the old pair.
//
// Reading: ImageDataset::image(i) gives image i as RGB. An ImageFolder opened with
// image_size S gives the same canonical S x S image as the packed file made with S does (the
// packed format is only faster: no decoding, no resizing); with image_size 0 it gives the decoded
// file as it is. Every image() is thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/data/image_decode.h"
#include "meshflow/data/mapped_file.h"

namespace mf {

class ImageDataset {
 public:
  virtual ~ImageDataset() = default;
  virtual int64_t size() const = 0;  // images
  virtual int64_t label(int64_t i) const = 0;
  virtual const std::vector<std::string>& classes() const = 0;
  virtual Image image(int64_t i) const = 0;  // RGB; throws naming the file
  virtual std::string describe(int64_t i) const = 0;  // the image's file, for messages
  virtual std::string kind() const = 0;                // "image folder" / "packed images"
  int64_t num_classes() const { return static_cast<int64_t>(classes().size()); }
  std::vector<int64_t> class_counts() const;  // images per class
};

class ImageFolder final : public ImageDataset {
 public:
  // image_size > 0: image() gives the canonical image_size square (as packed); 0: as decoded.
  explicit ImageFolder(const std::string& root, int64_t image_size = 0);
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  int64_t label(int64_t i) const override;
  const std::vector<std::string>& classes() const override { return classes_; }
  Image image(int64_t i) const override;
  std::string describe(int64_t i) const override;
  std::string kind() const override { return "image folder"; }
  const std::string& root() const { return root_; }
  const std::vector<std::string>& files() const { return files_; }  // relative to root: "<class>/<name>"

 private:
  std::string root_;
  int64_t image_size_;
  std::vector<std::string> classes_, files_;
  std::vector<int64_t> labels_;
};

class PackedImages final : public ImageDataset {
 public:
  explicit PackedImages(const std::string& prefix);  // reads prefix.json, maps prefix.bin
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int64_t label(int64_t i) const override;
  const std::vector<std::string>& classes() const override { return classes_; }
  Image image(int64_t i) const override;
  std::string describe(int64_t i) const override;
  std::string kind() const override { return "packed images"; }
  int64_t image_size() const { return image_size_; }

 private:
  std::string prefix_;
  int64_t image_size_ = 0;
  std::vector<std::string> classes_, files_;
  std::vector<int64_t> labels_;
  MappedFile bin_;
};

// `path` is a folder (an ImageFolder, canonical at folder_image_size) or a packed prefix (P with
// P.bin and P.json beside it; "P.bin" or "P.json" name it too). Throws naming `what` (the config
// key) and the path when it is neither.
std::unique_ptr<ImageDataset> open_image_dataset(const std::string& path, int64_t folder_image_size,
                                                 const std::string& what = "image data");
// True when `path` names a packed dataset (P.json exists for P = path without .bin/.json).
bool is_packed_images(const std::string& path);

struct PackImagesResult {
  std::string bin, json;  // the files written
  int64_t images = 0, classes = 0, bytes = 0;
};

// Writes the packed form of the folder `root` at `image_size`, decoding with `threads`
// background threads (0: on the calling thread). On any error (an image that does not decode
// is named) nothing is written.
PackImagesResult pack_image_folder(const std::string& root, const std::string& output_prefix, int64_t image_size,
                                   int threads = 2);

}  // namespace mf
