// SBP: how a global tensor's logical value relates to the local pieces on the ranks of one mesh
// axis — S(k) split along tensor axis k, B broadcast, P partial sum (see GLOBAL_VIEW.md).
// An NdSbp holds one Sbp per mesh axis and is interned: nd_sbp(...) returns one canonical
// pointer per distinct value, so two NdSbps are equal exactly when their pointers are.
//
// Splits are contiguous and may be uneven: n rows over p ranks give the first n % p ranks
// n / p + 1 rows and the others n / p. Several mesh axes splitting the same tensor axis nest in
// mesh-axis order (the piece of mesh axis 0 is split again along mesh axis 1), so (S(0), S(0))
// on a (2, 2) mesh covers the rows in the same row-major rank order as S(0) on 4 ranks.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "meshflow/core/shape.h"

namespace mf::global {

enum class SbpKind : uint8_t { kSplit = 0, kBroadcast, kPartialSum };

struct Sbp {
  SbpKind kind = SbpKind::kBroadcast;
  int axis = -1;  // the split tensor axis (>= 0) for kSplit; -1 otherwise

  static Sbp split(int axis);  // throws for a negative axis
  static Sbp broadcast() { return Sbp{SbpKind::kBroadcast, -1}; }
  static Sbp partial_sum() { return Sbp{SbpKind::kPartialSum, -1}; }
  bool is_split() const { return kind == SbpKind::kSplit; }
  bool is_broadcast() const { return kind == SbpKind::kBroadcast; }
  bool is_partial_sum() const { return kind == SbpKind::kPartialSum; }
  std::string str() const;  // "S(0)", "B", "P"
  bool operator==(const Sbp&) const = default;
};

// One Sbp per mesh axis. Only nd_sbp() creates them; compare the pointers.
class NdSbp {
 public:
  const std::vector<Sbp>& sbps() const { return sbps_; }
  int ndim() const { return static_cast<int>(sbps_.size()); }
  const Sbp& operator[](int mesh_axis) const { return sbps_.at(static_cast<size_t>(mesh_axis)); }
  std::string str() const;  // "(S(0), B)"; one axis: "(S(0))"
  NdSbp(const NdSbp&) = delete;
  NdSbp& operator=(const NdSbp&) = delete;

 private:
  friend const NdSbp* nd_sbp(const std::vector<Sbp>& sbps);
  explicit NdSbp(std::vector<Sbp> sbps) : sbps_(std::move(sbps)) {}
  std::vector<Sbp> sbps_;
};

// The canonical NdSbp for these per-mesh-axis SBPs (at least one). Thread-safe; the pointer
// lives until the process ends.
const NdSbp* nd_sbp(const std::vector<Sbp>& sbps);
const NdSbp* nd_sbp(std::initializer_list<Sbp> sbps);

// Part `index` of n rows split over `parts` ranks: its row count and its first row.
int64_t split_size(int64_t n, int64_t parts, int64_t index);
int64_t split_start(int64_t n, int64_t parts, int64_t index);

// Throws mf::Error unless `sbp` can describe a tensor of `logical` shape on a mesh of
// `mesh_shape`: one Sbp per mesh axis, every split axis inside the tensor, and every split axis
// at least as long as the product of the mesh axes splitting it (so no rank holds an empty
// piece). The same answer on every rank: it does not depend on the coordinate.
void check_sbp(const Shape& logical, const NdSbp& sbp, const std::vector<int64_t>& mesh_shape);

// The local piece of the rank at `coord` (one index per mesh axis): its shape, and where it sits
// in the logical tensor (LogicalSlice{logical, start}). Both call check_sbp first.
Shape local_shape(const Shape& logical, const NdSbp& sbp, const std::vector<int64_t>& mesh_shape,
                  const std::vector<int64_t>& coord);
LogicalSlice local_slice(const Shape& logical, const NdSbp& sbp, const std::vector<int64_t>& mesh_shape,
                         const std::vector<int64_t>& coord);

}  // namespace mf::global
