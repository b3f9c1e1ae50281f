// Megatron-LM's memory-mapped indexed dataset (`MMapIndexedDataset`, megatron/core/datasets/
// indexed_dataset.py), byte for byte, little-endian:
//   <prefix>.idx: "MMIDIDX\0\0" (9 bytes) | version u64 = 1 | dtype code u8 |
//                 sequence count u64 | document count u64 (= documents + 1) |
//                 sizes i32[sequences] | pointers i64[sequences] (byte offsets into .bin) |
//                 document indices i64[document count] (0, then the sequence index ending each
//                 document) [| modes i8[sequences], multimodal only: accepted and ignored]
//   <prefix>.bin: the tokens of all sequences, concatenated, as the dtype.
// Dtype codes (Megatron's DType enum): 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
// 7 float32, 8 uint16. Our builder writes one sequence per document (add_document(tokens)), or
// several — one per sentence, as Megatron's preprocess_data.py --split-sentences does
// (add_document(sentences), or add_sentence() ... end_document()).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "meshflow/data/mapped_file.h"

namespace mf {

class AtomicFile;

enum class IndexDType : uint8_t { kU8 = 1, kI8 = 2, kI16 = 3, kI32 = 4, kI64 = 5, kF64 = 6, kF32 = 7, kU16 = 8 };

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;

size_t index_dtype_size(IndexDType d);
const char* index_dtype_name(IndexDType d);
bool is_valid_index_dtype_code(uint8_t code);
// Megatron's choice for token files: uint16 when vocab_size < 65500, else int32.
IndexDType optimal_index_dtype(int64_t vocab_size);

inline std::string index_file_path(const std::string& prefix) { return prefix + ".idx"; }
inline std::string data_file_path(const std::string& prefix) { return prefix + ".bin"; }

// Streams tokens to <prefix>.bin.tmp.<pid> as documents arrive; finalize() writes the index and
// renames both files into place (.bin first, then .idx). Destroyed without finalize(): nothing
// is left behind.
class IndexedDatasetBuilder {
 public:
  IndexedDatasetBuilder(std::string prefix, IndexDType dtype);
  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // One sequence forming one document. Throws if a token does not fit the dtype.
  void add_document(std::span<const int32_t> tokens);
  // One document of several sequences (sentences), one sequence each; empty sentences are
  // written too (Megatron keeps what it is given). A document of no sentence is not recorded.
  void add_document(const std::vector<std::vector<int32_t>>& sentences);
  // The same, a sentence at a time: add_sentence() appends a sequence to the open document,
  // end_document() closes it (no-op when it holds no sentence). finalize() closes an open one.
  void add_sentence(std::span<const int32_t> tokens);
  void end_document();
  void finalize();

  int64_t num_documents() const { return static_cast<int64_t>(doc_ends_.size()); }
  int64_t num_sequences() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  std::string prefix_;
  IndexDType dtype_;
  std::unique_ptr<AtomicFile> bin_;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> doc_ends_;  // the sequence index ending each document
  std::vector<char> buf_;
  int64_t num_tokens_ = 0;
  bool finalized_ = false;
};

// Read-only view of <prefix>.idx + <prefix>.bin. The index arrays are copied out (they are not
// aligned in the file); the tokens stay memory-mapped. Construction validates the header, the
// dtype, every array length against the file size, the document indices, and that every
// sequence lies inside .bin; errors name the file.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  IndexDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(doc_idx_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }
  int64_t sequence_length(int64_t i) const;
  const std::vector<int32_t>& sequence_lengths() const { return sizes_; }
  const std::vector<int64_t>& sequence_pointers() const { return pointers_; }
  const std::vector<int64_t>& document_indices() const { return doc_idx_; }

  std::vector<int32_t> sequence(int64_t i) const { return get(i, 0, -1); }
  // Tokens [offset, offset + length) of sequence i (length -1: to its end), as int32.
  std::vector<int32_t> get(int64_t i, int64_t offset, int64_t length) const;
  // Same, appended to `out` without a temporary.
  void read(int64_t i, int64_t offset, int64_t length, std::vector<int32_t>& out) const;

 private:
  std::string prefix_;
  IndexDType dtype_ = IndexDType::kI32;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> pointers_, doc_idx_;
  int64_t num_tokens_ = 0;
  MappedFile bin_;
};

}  // namespace mf
