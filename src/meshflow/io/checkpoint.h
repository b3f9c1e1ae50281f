// Training checkpoints, written by every rank in parallel and loadable into any layout.
//
//   <output_dir>/checkpoints/iter_0000100/
//     metadata.json             format version, training state, the resolved config, the layout
//                               it was saved under; per shard file its size and CRC-32; per
//                               tensor its logical shape, dtype and where its pieces are
//     shard_00000.safetensors   one per rank that holds something to save: its pieces, flat
//   <output_dir>/checkpoints/latest   the name of the newest complete checkpoint
//
// Tensors are named "model/<parameter>" and "optimizer/<parameter>.<slot>" and keep their
// logical (unsplit, Hugging Face) shape. A piece is a TensorRegion of one: the tensor-parallel
// box a rank holds, and of that the flat range ZeRO gives it. No rank gathers anything: each
// writes its own pieces (a piece replicated over ranks is written by one of them, spread by
// parameter index), then rank 0 collects the sizes and checksums and writes metadata.json.
// Everything goes into `iter_XXXXXXX.tmp` first, fsynced; the directory is renamed into place and
// `latest` replaced last, so a crash mid-save leaves the previous checkpoint intact and named.
// Reading maps the regions a rank wants onto the pieces that hold them and reads only those
// byte ranges, straight into the destination tensors (through a bounded buffer when the dtype
// differs): a checkpoint saved under any (dp, tp, pp, ZeRO stage) loads under any other.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/io/checkpoint_metadata.h"
#include "meshflow/nn/module.h"

namespace mf::io {

struct ShardPiece {
  std::string name;  // "model/<param>" or "optimizer/<param>.<slot>"
  Tensor data;       // the region's elements, in order (any shape with region.numel() elements)
  Shape logical;     // the whole tensor's shape
  TensorRegion region;
};

// Collective over `world` (null: one process; every rank passes its own pieces, maybe none).
// A save that fails part-way (no space left on the device, a write error) removes its unfinished
// folder and throws naming the checkpoint, the cause ("out of disk space" first when the device is
// full) and the checkpoint `latest` still names; a crash leaves `iter_N.tmp`, removed by the next save.
// `layout`: recorded as is (e.g. {"dp": 2, "tp": 2, "pp": 2, "zero_stage": 1}).
void write_checkpoint_shards(comm::Communicator* world, const std::string& output_dir, const TrainingState& state,
                             const std::string& config_yaml, const std::map<std::string, int64_t>& layout,
                             const std::vector<ShardPiece>& mine, int64_t max_to_keep);

class CheckpointReader {
 public:
  // Parses `dir`/metadata.json; checks the format version and that every shard file is there
  // with its recorded size. Errors name the file.
  explicit CheckpointReader(const std::string& dir);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  // The checkpoint `<output_dir>/checkpoints/latest` names, or nullopt when there is none. Without
  // `latest` (a save killed before replacing it, a file removed by hand), the newest complete
  // checkpoint, with note() saying so. A `latest` that names no checkpoint is an error naming
  // the newest complete one.
  static std::optional<CheckpointReader> open_latest(const std::string& output_dir);
  // Why this checkpoint was chosen when it is not the one `latest` names, or which newer saves did
  // not finish (a run killed mid-save: folders `iter_N.tmp`, or an `iter_N` that `latest` does not
  // name yet) and are ignored; "" otherwise.
  const std::string& note() const { return note_; }

  // Verifies the shard files' CRC-32s, each file by one rank of `world` (null: all here); on a
  // mismatch every rank throws naming the file. Collective.
  void verify(comm::Communicator* world) const;
  const std::string& dir() const;
  const TrainingState& state() const;
  const std::map<std::string, int64_t>& layout() const;
  bool has(const std::string& name) const;
  std::vector<std::string> names() const;  // every tensor, sorted
  Shape shape(const std::string& name) const;
  DType dtype(const std::string& name) const;
  // Fills `out` (region.numel() elements, contiguous) with `region` of tensor `name`, reading only
  // the byte ranges that hold it; casts to out's dtype if the stored one differs.
  void read(const std::string& name, const TensorRegion& region, Tensor& out) const;
  Tensor read_whole(const std::string& name) const;  // the logical tensor, stored dtype

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string note_;
};

// Testing: the next write_checkpoint_shards kills its own process (SIGKILL) after the shard
// files are written, before metadata.json and the rename — a writer killed mid-save.
void crash_in_next_checkpoint_for_testing();

// One process, whole tensors (tools, tests): `model` and `optimizer` entries by their plain
// names (prefixed "model/" / "optimizer/" in the file).
void write_checkpoint(const std::string& output_dir, const TrainingState& state, const nn::NamedTensors& model,
                      const nn::NamedTensors& optimizer, int64_t max_to_keep);

struct LoadedCheckpoint {
  std::string dir;
  TrainingState state;
  nn::NamedTensors model, optimizer;  // whole logical tensors, plain names
};
// Whether `name` is a checkpoint folder's name: "iter_" and digits.
bool is_checkpoint_name(const std::string& name);
// The folder name of the checkpoint of iteration `iter` ("iter_0000100").
std::string checkpoint_name(int64_t iter);
// The complete checkpoints of a run (folders checkpoints/iter_N holding their metadata.json),
// newest first.
std::vector<std::string> complete_checkpoints(const std::string& output_dir);
// The checkpoint `latest` points to, verified and read whole, or nullopt when there is none.
std::optional<LoadedCheckpoint> read_latest_checkpoint(const std::string& output_dir);

}  // namespace mf::io
