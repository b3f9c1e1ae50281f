// Files a user names where a regular file is expected (tokenizer files). A device such as
// /dev/zero would be read without end, a FIFO would block and a folder fails obscurely; these
// checks refuse them, and files past a size bound, in one line naming `what` (the config key or
// the file's role) and the path.
#pragma once
#include <cstdint>
#include <string>

namespace mf {

// Bound on tokenizer files (vocab.json, merges.txt, tokenizer.json, tokenizer_config.json,
// tokenizer.model, vocab.txt); real ones are at most tens of MB.
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{1} << 30;

// Throws unless `path` (symbolic links followed) is a regular file of at most `max_bytes`.
void check_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// The whole file, after the checks of check_regular_file on the opened descriptor (a FIFO is
// refused without waiting for a writer).
std::string read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes);

}  // namespace mf
