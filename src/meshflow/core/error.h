// Errors: every check in meshflow throws mf::Error with context; nothing aborts.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mf {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace mf

// MF_CHECK(cond, parts...): throws mf::Error("parts..." [file:line]) when cond is false.
#define MF_CHECK(cond, ...)                                                   \
  do {                                                                       \
    if (!(cond)) ::mf::detail::throw_error(__FILE__, __LINE__, ::mf::detail::cat(__VA_ARGS__)); \
  } while (0)
#define MF_THROW(...) ::mf::detail::throw_error(__FILE__, __LINE__, ::mf::detail::cat(__VA_ARGS__))
