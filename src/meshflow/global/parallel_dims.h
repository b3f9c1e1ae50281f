// The named parallel dimensions of a run: the one place the layout's dimensions are listed.
//
// Each dimension has a name ("pp", "dp", "tp"), the train.dist key of its size, and a place in
// the device mesh: outermost first, pipeline stages outermost and tensor-parallel ranks innermost
// (neighbouring ranks, so their traffic stays on the fastest links). ParallelDims holds one size
// per dimension; the device mesh (device_mesh.h), the groups (parallel/groups.h), the checkpoint's
// layout record, the per-rank statistics, the launcher's restart on fewer ranks and the planner's
// layouts iterate over it instead of naming three sizes. A new dimension (context parallelism,
// expert parallelism, a second tensor axis) is a new row of dim_specs() (parallel_dims.cpp); see
// docs/architecture/global-view.md, "Adding a parallel dimension", for what else it touches.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mf {
class Config;
}

namespace mf::global {

struct DimSpec {
  const char* name;        // "dp": the group's name, and the key in logs and checkpoint metadata
  const char* config_key;  // "train.dist.data_parallel_size"
  const char* role;        // one line, for errors and docs
  // Its ranks take different rows of the global batch (the global batch is micro-batch x
  // accumulation x the product of these sizes).
  bool splits_batch;
  // A supervised restart on fewer processes (meshflow launch) may shrink it, keeping the global
  // batch through the accumulation steps; the others are kept.
  bool elastic;
  // The model's layers are placed over it (layers::Place: one mesh axis of their tensors, named
  // so; tp) rather than it being handled around the model (the batch rows of dp, the stages of pp).
  bool places_layers;

  // The key under train.dist: "data_parallel_size".
  std::string_view key_name() const { return std::string_view(config_key).substr(std::string_view("train.dist.").size()); }
};

// Every dimension, outermost first.
const std::vector<DimSpec>& dim_specs();
// The position of `name` in dim_specs(); throws naming the known dimensions.
size_t dim_index(std::string_view name);
// The position of the one elastic dimension (dp).
size_t elastic_dim();
// The names of the dimensions the model's layers are placed over, outermost first ("tp").
std::vector<std::string> layer_dims();

class ParallelDims {
 public:
  ParallelDims();  // every size 1
  // The named sizes (the others 1): ParallelDims({{"dp", 2}, {"tp", 2}}). Throws on an unknown name.
  ParallelDims(std::initializer_list<std::pair<std::string_view, int64_t>> sizes);
  // train.dist.<dimension>_parallel_size as given (a 0 is derived by resolved()).
  static ParallelDims from_config(const Config& config);

  // The sizes with a 0 resolved from the world size (at most one may be 0, as LiBai derives
  // data parallelism), checked to multiply to it: pure arithmetic, identical on every rank.
  // Throws mf::Error naming every size (by its key) and the world size.
  ParallelDims resolved(int64_t world_size) const;

  size_t count() const { return sizes_.size(); }
  const char* name(size_t i) const;
  int64_t size(size_t i) const { return sizes_.at(i); }
  int64_t size(std::string_view name) const { return sizes_[dim_index(name)]; }
  ParallelDims& set(std::string_view name, int64_t size);
  const std::vector<int64_t>& sizes() const { return sizes_; }

  int64_t product() const;  // the ranks the layout takes
  // The product of the sizes of the dimensions that split the batch (dp today).
  int64_t batch_ranks() const;
  // The coordinate (one index per dimension) of the `index`-th rank, row-major; and back.
  std::vector<int64_t> coordinate_of(int64_t index) const;
  int64_t index_of(const std::vector<int64_t>& coordinate) const;

  // "pp=2, dp=2, tp=1"; "pipeline_parallel_size=2, data_parallel_size=2, ...";
  // {"dp": 2, "pp": 2, "tp": 1} (for metadata and logs).
  std::string str() const;
  std::string keys_str() const;
  std::map<std::string, int64_t> named() const;
  // The key=value overrides that set these sizes.
  std::vector<std::string> overrides() const;

  bool operator==(const ParallelDims& o) const { return sizes_ == o.sizes_; }
  bool operator!=(const ParallelDims& o) const { return sizes_ != o.sizes_; }

 private:
  std::vector<int64_t> sizes_;
};

}  // namespace mf::global
