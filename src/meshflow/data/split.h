// Train / validation / test split of a document range, Megatron's way: "949,50,1" (or
// "949/50/1", or fewer numbers, padded with 0) is normalised to fractions, each boundary is the
// cumulative fraction times the document count rounded half to even, then every boundary is
// shifted so that the last one equals the count.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace mf {

struct DocumentRange {
  int64_t begin = 0, end = 0;  // [begin, end)
  int64_t size() const { return end - begin; }
  bool operator==(const DocumentRange&) const = default;
};

// Throws mf::Error for a malformed spec (not numbers, negative, more than 3, all zero).
std::array<DocumentRange, 3> split_documents(const std::string& spec, int64_t num_documents);

}  // namespace mf
