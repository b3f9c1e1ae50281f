// Sbp printing, the NdSbp intern table, and the local-piece arithmetic of splits.
#include "meshflow/global/sbp.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "meshflow/core/error.h"

namespace mf::global {

namespace {

// Walks the mesh axes in order, narrowing `size`/`start` (per tensor axis) to the piece of the
// rank at `coord`; with coord empty it only checks.
void narrow(const Shape& logical, const NdSbp& sbp, const std::vector<int64_t>& mesh_shape,
            const std::vector<int64_t>& coord, Shape& size, Shape& start) {
  MF_CHECK(static_cast<size_t>(sbp.ndim()) == mesh_shape.size(), "nd_sbp ", sbp.str(), " has ", sbp.ndim(),
           " entries for a mesh ", shape_str(mesh_shape), " of ", mesh_shape.size(), " axes");
  MF_CHECK(coord.empty() || coord.size() == mesh_shape.size(), "mesh coordinate of ", coord.size(),
           " entries on a mesh ", shape_str(mesh_shape));
  const int64_t ndim = static_cast<int64_t>(logical.size());
  size = logical;
  start.assign(logical.size(), 0);
  Shape parts(logical.size(), 1);  // product of the mesh axes splitting each tensor axis so far
  for (size_t m = 0; m < mesh_shape.size(); ++m) {
    const int64_t p = mesh_shape[m];
    MF_CHECK(p >= 1, "mesh ", shape_str(mesh_shape), " has an axis of size ", p);
    if (!coord.empty())
      MF_CHECK(coord[m] >= 0 && coord[m] < p, "mesh coordinate ", coord[m], " out of range for mesh axis ", m,
               " of size ", p);
    const Sbp& s = sbp[static_cast<int>(m)];
    if (!s.is_split()) continue;
    MF_CHECK(s.axis < ndim, s.str(), " on mesh axis ", m, ": tensor axis ", s.axis, " out of range for logical shape ",
             shape_str(logical), " (nd_sbp ", sbp.str(), ", mesh ", shape_str(mesh_shape), ")");
    const auto k = static_cast<size_t>(s.axis);
    parts[k] *= p;
    MF_CHECK(logical[k] >= parts[k], s.str(), " on mesh axis ", m, ": tensor axis ", s.axis, " has ", logical[k],
             " elements, fewer than the ", parts[k], " ranks it is split over (logical shape ", shape_str(logical),
             ", nd_sbp ", sbp.str(), ", mesh ", shape_str(mesh_shape), ")");
    if (coord.empty()) continue;
    start[k] += split_start(size[k], p, coord[m]);
    size[k] = split_size(size[k], p, coord[m]);
  }
}

}  // namespace

Sbp Sbp::split(int axis) {
  MF_CHECK(axis >= 0, "Sbp::split: axis must be >= 0, got ", axis);
  return Sbp{SbpKind::kSplit, axis};
}

std::string Sbp::str() const {
  switch (kind) {
    case SbpKind::kSplit: return "S(" + std::to_string(axis) + ")";
    case SbpKind::kBroadcast: return "B";
    case SbpKind::kPartialSum: return "P";
  }
  return "?";
}

std::string NdSbp::str() const {
  std::string r = "(";
  for (size_t i = 0; i < sbps_.size(); ++i) {
    if (i) r += ", ";
    r += sbps_[i].str();
  }
  return r + ")";
}

const NdSbp* nd_sbp(const std::vector<Sbp>& sbps) {
  MF_CHECK(!sbps.empty(), "nd_sbp: needs one Sbp per mesh axis, got none");
  for (const Sbp& s : sbps)
    MF_CHECK(s.is_split() ? s.axis >= 0 : s.axis == -1, "nd_sbp: malformed Sbp (kind ", static_cast<int>(s.kind),
             ", axis ", s.axis, ")");
  using Key = std::vector<std::pair<int, int>>;
  // Never destroyed, so pointers stay valid during static destruction too.
  static auto* mutex = new std::mutex;
  static auto* table = new std::map<Key, std::unique_ptr<NdSbp>>;
  Key key;
  key.reserve(sbps.size());
  for (const Sbp& s : sbps) key.emplace_back(static_cast<int>(s.kind), s.axis);
  std::lock_guard<std::mutex> lock(*mutex);
  auto [it, inserted] = table->try_emplace(std::move(key));
  if (inserted) it->second.reset(new NdSbp(sbps));
  return it->second.get();
}

const NdSbp* nd_sbp(std::initializer_list<Sbp> sbps) { return nd_sbp(std::vector<Sbp>(sbps)); }

int64_t split_size(int64_t n, int64_t parts, int64_t index) {
  MF_CHECK(parts >= 1 && index >= 0 && index < parts && n >= 0, "split_size: part ", index, " of ", parts,
           " of ", n, " rows");
  return n / parts + (index < n % parts ? 1 : 0);
}

int64_t split_start(int64_t n, int64_t parts, int64_t index) {
  MF_CHECK(parts >= 1 && index >= 0 && index < parts && n >= 0, "split_start: part ", index, " of ", parts,
           " of ", n, " rows");
  const int64_t q = n / parts, r = n % parts;
  return index * q + std::min(index, r);
}

void check_sbp(const Shape& logical, const NdSbp& sbp, const std::vector<int64_t>& mesh_shape) {
  Shape size, start;
  narrow(logical, sbp, mesh_shape, {}, size, start);
}

Shape local_shape(const Shape& logical, const NdSbp& sbp, const std::vector<int64_t>& mesh_shape,
                  const std::vector<int64_t>& coord) {
  MF_CHECK(coord.size() == mesh_shape.size(), "local_shape: mesh coordinate of ", coord.size(),
           " entries on a mesh ", shape_str(mesh_shape));
  Shape size, start;
  narrow(logical, sbp, mesh_shape, coord, size, start);
  return size;
}

LogicalSlice local_slice(const Shape& logical, const NdSbp& sbp, const std::vector<int64_t>& mesh_shape,
                         const std::vector<int64_t>& coord) {
  MF_CHECK(coord.size() == mesh_shape.size(), "local_slice: mesh coordinate of ", coord.size(),
           " entries on a mesh ", shape_str(mesh_shape));
  Shape size, start;
  narrow(logical, sbp, mesh_shape, coord, size, start);
  return LogicalSlice{logical, start};
}

}  // namespace mf::global
