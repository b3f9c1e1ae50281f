// Shapes and strides (in elements) and the helpers that reason about them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mf {

using Shape = std::vector<int64_t>;    // sizes per axis
using Strides = std::vector<int64_t>;  // element strides per axis

// Where a local tensor sits inside a logical tensor: its start index per axis in a tensor of
// logical_shape. Empty = the local tensor is the whole logical tensor.
struct LogicalSlice {
  Shape logical_shape;
  Shape start;
  bool whole() const { return logical_shape.empty() && start.empty(); }
};

int64_t shape_numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "(2, 3, 4)"
// Maps a possibly negative axis into [0, ndim); throws naming `op` when out of range.
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op);
// Numpy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace mf
