#include "meshflow/global/parallel_dims.h"

#include <algorithm>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

namespace mf::global {

const std::vector<DimSpec>& dim_specs() {
  static const std::vector<DimSpec> specs = {
      {"pp", "train.dist.pipeline_parallel_size", "pipeline stages: each holds a run of the model's layers", false, false,
       false},
      {"dp", "train.dist.data_parallel_size", "data parallelism: each rank takes its rows of the batch", true, true,
       false},
      {"cp", "train.dist.context_parallel_size",
       "context parallelism: each rank holds a slice of every sequence, attention passes keys and values around a ring",
       false, false, true},
      {"tp", "train.dist.tensor_parallel_size", "tensor parallelism: each rank holds a slice of the split layers", false,
       false, true},
  };
  return specs;
}

size_t dim_index(std::string_view name) {
  const auto& specs = dim_specs();
  for (size_t i = 0; i < specs.size(); ++i)
    if (name == specs[i].name) return i;
  std::string known;
  for (const DimSpec& s : specs) known += (known.empty() ? "" : ", ") + std::string(s.name);
  MF_THROW("no parallel dimension named '", name, "' (the dimensions: ", known, ")");
}

size_t elastic_dim() {
  const auto& specs = dim_specs();
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].elastic) return i;
  MF_THROW("no parallel dimension is elastic");
}

std::vector<std::string> layer_dims() {
  std::vector<std::string> out;
  for (const DimSpec& s : dim_specs())
    if (s.places_layers) out.emplace_back(s.name);
  return out;
}

ParallelDims::ParallelDims() : sizes_(dim_specs().size(), 1) {}

ParallelDims::ParallelDims(std::initializer_list<std::pair<std::string_view, int64_t>> sizes) : ParallelDims() {
  for (const auto& [name, size] : sizes) set(name, size);
}

ParallelDims ParallelDims::from_config(const Config& config) {
  ParallelDims d;
  for (size_t i = 0; i < d.count(); ++i) d.sizes_[i] = config.get_int(dim_specs()[i].config_key);
  return d;
}

const char* ParallelDims::name(size_t i) const { return dim_specs().at(i).name; }

ParallelDims& ParallelDims::set(std::string_view name, int64_t size) {
  sizes_[dim_index(name)] = size;
  return *this;
}

ParallelDims ParallelDims::resolved(int64_t world_size) const {
  const std::string what = detail::cat("device mesh: ", keys_str(), " (train.dist.*) on a world of ", world_size, " ranks: ");
  int zeros = 0;
  int64_t others = 1;
  for (int64_t s : sizes_) {
    MF_CHECK(s >= 0, what, "sizes must be >= 1, or 0 to derive one");
    zeros += s == 0;
    others *= std::max<int64_t>(s, 1);
  }
  MF_CHECK(zeros <= 1, what, "at most one size may be 0 (derived from the world size)");
  ParallelDims d = *this;
  if (zeros == 1) {
    MF_CHECK(world_size % others == 0, what, "the world size is not divisible by the product ", others,
             " of the given sizes, so the size given as 0 cannot be derived");
    *std::find(d.sizes_.begin(), d.sizes_.end(), 0) = world_size / others;
  }
  std::string formula, factors;
  for (size_t i = 0; i < count(); ++i) {
    formula += (i ? " x " : "") + std::string(name(i));
    factors += (i ? " x " : "") + std::to_string(d.sizes_[i]);
  }
  MF_CHECK(d.product() == world_size, what, formula, " = ", factors, " = ", d.product(),
           " does not equal the world size ", world_size);
  return d;
}

int64_t ParallelDims::product() const {
  int64_t p = 1;
  for (int64_t s : sizes_) p *= s;
  return p;
}

int64_t ParallelDims::batch_ranks() const {
  int64_t p = 1;
  for (size_t i = 0; i < count(); ++i)
    if (dim_specs()[i].splits_batch) p *= sizes_[i];
  return p;
}

std::vector<int64_t> ParallelDims::coordinate_of(int64_t index) const {
  MF_CHECK(index >= 0 && index < product(), "parallel dims ", str(), ": rank index ", index, " out of range");
  std::vector<int64_t> c(count());
  for (size_t i = count(); i-- > 0;) {
    c[i] = index % sizes_[i];
    index /= sizes_[i];
  }
  return c;
}

int64_t ParallelDims::index_of(const std::vector<int64_t>& coordinate) const {
  MF_CHECK(coordinate.size() == count(), "parallel dims ", str(), ": a coordinate of ", coordinate.size(), " indices");
  int64_t index = 0;
  for (size_t i = 0; i < count(); ++i) index = index * sizes_[i] + coordinate[i];
  return index;
}

std::string ParallelDims::str() const {
  std::string s;
  for (size_t i = 0; i < count(); ++i) s += detail::cat(i ? ", " : "", name(i), "=", sizes_[i]);
  return s;
}

std::string ParallelDims::keys_str() const {
  std::string s;
  for (size_t i = 0; i < count(); ++i) s += detail::cat(i ? ", " : "", dim_specs()[i].key_name(), "=", sizes_[i]);
  return s;
}

std::map<std::string, int64_t> ParallelDims::named() const {
  std::map<std::string, int64_t> m;
  for (size_t i = 0; i < count(); ++i) m[name(i)] = sizes_[i];
  return m;
}

std::vector<std::string> ParallelDims::overrides() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < count(); ++i) out.push_back(detail::cat(dim_specs()[i].config_key, "=", sizes_[i]));
  return out;
}

}  // namespace mf::global
