// Megatron's split of documents into train / validation / test ranges.
#include "meshflow/data/split.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "meshflow/core/error.h"

namespace mf {

std::array<DocumentRange, 3> split_documents(const std::string& spec, int64_t num_documents) {
  MF_CHECK(num_documents >= 0, "split '", spec, "': negative document count ", num_documents);
  std::vector<double> w;
  size_t i = 0;
  while (i <= spec.size()) {
    size_t j = spec.find_first_of(",/", i);
    if (j == std::string::npos) j = spec.size();
    std::string part = spec.substr(i, j - i);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    MF_CHECK(used > 0 && used == part.size() && std::isfinite(v) && v >= 0, "split '", spec, "': '", part,
             "' is not a non-negative number");
    w.push_back(v);
    i = j + 1;
  }
  MF_CHECK(w.size() <= 3, "split '", spec, "': at most 3 parts (train, validation, test)");
  w.resize(3, 0.0);
  double total = w[0] + w[1] + w[2];
  MF_CHECK(total > 0, "split '", spec, "': the parts sum to 0");
  std::array<int64_t, 4> b{0, 0, 0, 0};
  for (int k = 0; k < 3; ++k)
    b[k + 1] = b[k] + static_cast<int64_t>(std::nearbyint(w[k] / total * static_cast<double>(num_documents)));
  int64_t diff = b[3] - num_documents;
  for (int k = 1; k < 4; ++k) b[k] -= diff;
  // The shift can push an empty leading part below 0 ("0,1,1" of 3): keep the ranges ordered.
  for (int k = 1; k < 4; ++k) b[k] = std::max(b[k - 1], std::min(b[k], num_documents));
  std::array<DocumentRange, 3> out;
  for (int k = 0; k < 3; ++k) out[k] = {b[k], b[k + 1]};
  return out;
}

}  // namespace mf
