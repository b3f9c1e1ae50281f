// YAML configs and `key=value` overrides: the input is YAML text, a NUL byte, then one override a
// line. An accepted config is written back as YAML.
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_input.h"
#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = mf::fuzz::split_parts(data, size, 2);
  try {
    // `_base_` paths resolve against a folder that does not exist: no file is read.
    mf::Config c = mf::Config::from_yaml(parts[0], "fuzz.yaml", "/nonexistent-meshflow-fuzz");
    std::istringstream lines(parts[1]);
    for (std::string line; std::getline(lines, line);) c.apply_override(line);
    (void)c.dump();
  } catch (const mf::Error&) {
  }
  return 0;
}
