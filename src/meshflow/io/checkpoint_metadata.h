// A checkpoint's metadata.json (see checkpoint.h): the training state, the layout, the shard files
// and where each tensor's pieces are. Parsing and checking it needs no file system, so that it can
// be tested (and fuzzed, fuzz/) on text alone.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "meshflow/core/dtype.h"
#include "meshflow/core/shape.h"
#include "meshflow/optim/loss_scaler.h"
#include "meshflow/random/generator.h"

namespace mf::io {

inline constexpr int kCheckpointFormatVersion = 2;

// What a resumed run keeps from the run it continues: the data it reads (sequence length, global
// batch: samples per step) and where it reads them from (the seed orders the samples).
struct RunConstants {
  int64_t seq_length = 0, global_batch_size = 0;
  uint64_t seed = 0;
};

struct TrainingState {
  int64_t iter = 0;
  int64_t optimizer_steps = 0;
  uint64_t data_position = 0;
  GeneratorState rng;
  // Mixed precision: the loss scaler's state (absent in checkpoints of runs without fp16
  // scaling) and the updates skipped on overflow.
  std::optional<optim::LossScalerState> loss_scaler;
  int64_t skipped_iters = 0;
  // Absent in checkpoints of tools (io::write_checkpoint) and of earlier versions.
  std::optional<RunConstants> run;
};

// A part of a logical tensor, in its row-major element order: the box [start, start + length)
// along `axis` of `view` (a row-major view of the tensor, e.g. the tensor-parallel grouping;
// axis -1: the whole tensor), and of that box's row-major elements [flat_start, +flat_length)
// (flat_length -1: all of them).
struct TensorRegion {
  Shape view;
  int64_t axis = -1, start = 0, length = 0;
  int64_t flat_start = 0, flat_length = -1;
  int64_t box_numel() const;
  int64_t numel() const { return flat_length < 0 ? box_numel() - flat_start : flat_length; }
  static TensorRegion whole(const Shape& shape);
};

// A region as periodic runs of the tensor's row-major (logical) element index L: `outer`
// segments [o * period + seg_start, +seg_len); box element e sits at
// L = (e / seg_len) * period + seg_start + e % seg_len.
struct RegionGeometry {
  int64_t period = 0, seg_start = 0, seg_len = 0, outer = 1;
};
RegionGeometry region_geometry(const TensorRegion& r);

// Throws naming `what` unless `r` is a region of a tensor of shape `logical`.
void check_region(const TensorRegion& r, const Shape& logical, const std::string& what);
nlohmann::ordered_json region_json(const TensorRegion& r);
TensorRegion region_from_json(const nlohmann::ordered_json& j);
// CRC-32 of the metadata without its "metadata_crc32" member, over its compact text: what is
// stored in that member, so that an edited or damaged metadata.json is noticed.
int64_t checkpoint_metadata_crc(const nlohmann::ordered_json& meta);

struct CheckpointMetadata {
  struct Piece {
    int file = 0;        // index into files
    int64_t offset = 0;  // byte offset of its first element in that file
    TensorRegion region;
  };
  struct Tensor {
    Shape shape;
    DType dtype = DType::kF32;
    std::vector<Piece> pieces;
  };
  TrainingState state;
  std::map<std::string, int64_t> layout;
  std::vector<std::string> files;  // shard file names, relative to the checkpoint folder
  std::vector<int64_t> file_bytes;
  std::vector<uint32_t> file_crc;
  std::map<std::string, Tensor> tensors;
};

// Parses metadata.json's text (`path` names it in errors): the format version, the checksum, the
// state, and every piece a region of its tensor inside its file's recorded size, all sizes and
// offsets without overflow. Throws mf::Error naming `path`.
CheckpointMetadata parse_checkpoint_metadata(const std::string& text, const std::string& path);

}  // namespace mf::io
