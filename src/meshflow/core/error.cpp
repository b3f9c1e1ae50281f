#include "meshflow/core/error.h"

#include <cstring>

namespace mf::detail {

void throw_error(const char* file, int line, const std::string& msg) {
  const char* base = std::strrchr(file, '/');
  throw Error(msg + " [" + (base ? base + 1 : file) + ":" + std::to_string(line) + "]");
}

}  // namespace mf::detail
