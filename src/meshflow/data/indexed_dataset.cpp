// Megatron mmap indexed dataset: builder (streaming .bin, atomic commit) and validating reader.
#include "meshflow/data/indexed_dataset.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"

namespace mf {
namespace {

constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, counts = 34

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A float token as an id (truncated toward zero); NaN, infinities and values outside int32 are
// no token id (and converting them would be undefined).
template <class F>
int64_t float_token(F v) {
  MF_CHECK(v > F(-2147483649.0) && v < F(2147483648.0), "indexed dataset: float token ", v, " is not a token id");
  return static_cast<int64_t>(v);
}

// Token `k` of a buffer of dtype `d`, as int64 (floats are truncated toward zero).
int64_t token_at(const unsigned char* p, IndexDType d, size_t k) {
  switch (d) {
    case IndexDType::kU8: return p[k];
    case IndexDType::kI8: return static_cast<int8_t>(p[k]);
    case IndexDType::kI16: return load<int16_t>(p + 2 * k);
    case IndexDType::kU16: return load<uint16_t>(p + 2 * k);
    case IndexDType::kI32: return load<int32_t>(p + 4 * k);
    case IndexDType::kI64: return load<int64_t>(p + 8 * k);
    case IndexDType::kF32: return float_token(load<float>(p + 4 * k));
    case IndexDType::kF64: return float_token(load<double>(p + 8 * k));
  }
  return 0;
}

bool fits(int64_t v, IndexDType d) {
  switch (d) {
    case IndexDType::kU8: return v >= 0 && v <= 255;
    case IndexDType::kI8: return v >= -128 && v <= 127;
    case IndexDType::kI16: return v >= -32768 && v <= 32767;
    case IndexDType::kU16: return v >= 0 && v <= 65535;
    default: return true;  // int32 values fit int32, int64, float64 and (ids < 2^24) float32
  }
}

void store(char* p, IndexDType d, int32_t v) {
  switch (d) {
    case IndexDType::kU8: *p = static_cast<char>(static_cast<uint8_t>(v)); break;
    case IndexDType::kI8: *p = static_cast<char>(static_cast<int8_t>(v)); break;
    case IndexDType::kI16: { int16_t x = static_cast<int16_t>(v); std::memcpy(p, &x, 2); break; }
    case IndexDType::kU16: { uint16_t x = static_cast<uint16_t>(v); std::memcpy(p, &x, 2); break; }
    case IndexDType::kI32: std::memcpy(p, &v, 4); break;
    case IndexDType::kI64: { int64_t x = v; std::memcpy(p, &x, 8); break; }
    case IndexDType::kF32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
    case IndexDType::kF64: { double x = v; std::memcpy(p, &x, 8); break; }
  }
}

}  // namespace

bool is_valid_index_dtype_code(uint8_t code) { return code >= 1 && code <= 8; }

size_t index_dtype_size(IndexDType d) {
  switch (d) {
    case IndexDType::kU8: case IndexDType::kI8: return 1;
    case IndexDType::kI16: case IndexDType::kU16: return 2;
    case IndexDType::kI32: case IndexDType::kF32: return 4;
    case IndexDType::kI64: case IndexDType::kF64: return 8;
  }
  MF_THROW("invalid index dtype code ", static_cast<int>(d));
}

const char* index_dtype_name(IndexDType d) {
  static const char* names[] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
  uint8_t c = static_cast<uint8_t>(d);
  return is_valid_index_dtype_code(c) ? names[c] : "?";
}

IndexDType optimal_index_dtype(int64_t vocab_size) { return vocab_size < 65500 ? IndexDType::kU16 : IndexDType::kI32; }

// ---- builder ----

IndexedDatasetBuilder::IndexedDatasetBuilder(std::string prefix, IndexDType dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  MF_CHECK(is_valid_index_dtype_code(static_cast<uint8_t>(dtype)), "IndexedDatasetBuilder ", prefix_,
           ": invalid dtype code ", static_cast<int>(dtype));
  bin_ = std::make_unique<AtomicFile>(data_file_path(prefix_));
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() = default;

void IndexedDatasetBuilder::add_document(std::span<const int32_t> tokens) {
  end_document();
  add_sentence(tokens);
  end_document();
}

void IndexedDatasetBuilder::add_document(const std::vector<std::vector<int32_t>>& sentences) {
  end_document();
  for (const std::vector<int32_t>& s : sentences) add_sentence(s);
  end_document();
}

void IndexedDatasetBuilder::end_document() {
  int64_t n = static_cast<int64_t>(sizes_.size());
  if (n > (doc_ends_.empty() ? 0 : doc_ends_.back())) doc_ends_.push_back(n);
}

void IndexedDatasetBuilder::add_sentence(std::span<const int32_t> tokens) {
  MF_CHECK(!finalized_, "IndexedDatasetBuilder ", prefix_, ": adding a sequence after finalize");
  MF_CHECK(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "IndexedDatasetBuilder ",
           prefix_, ": sequence of ", tokens.size(), " tokens exceeds the int32 size field");
  size_t es = index_dtype_size(dtype_);
  buf_.resize(tokens.size() * es);
  for (size_t k = 0; k < tokens.size(); ++k) {
    MF_CHECK(fits(tokens[k], dtype_), "IndexedDatasetBuilder ", prefix_, ": token ", tokens[k], " of sequence ",
             sizes_.size(), " does not fit dtype ", index_dtype_name(dtype_));
    store(buf_.data() + k * es, dtype_, tokens[k]);
  }
  if (!buf_.empty()) bin_->write(buf_.data(), buf_.size());
  sizes_.push_back(static_cast<int32_t>(tokens.size()));
  num_tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetBuilder::finalize() {
  MF_CHECK(!finalized_, "IndexedDatasetBuilder ", prefix_, ": finalize called twice");
  end_document();
  const uint64_t n = sizes_.size();
  std::string idx;
  idx.reserve(kHeaderBytes + n * 20 + 8);
  auto put = [&](const void* p, size_t k) {
    if (k > 0) idx.append(static_cast<const char*>(p), k);
  };
  uint8_t code = static_cast<uint8_t>(dtype_);
  uint64_t doc_count = doc_ends_.size() + 1;
  put(kIndexMagic, 9);
  put(&kIndexVersion, 8);
  put(&code, 1);
  put(&n, 8);
  put(&doc_count, 8);
  put(sizes_.data(), n * 4);
  int64_t ptr = 0, es = static_cast<int64_t>(index_dtype_size(dtype_));
  for (int32_t s : sizes_) {
    put(&ptr, 8);
    ptr += s * es;
  }
  const int64_t zero = 0;
  put(&zero, 8);
  put(doc_ends_.data(), doc_ends_.size() * 8);
  AtomicFile idx_file(index_file_path(prefix_));
  idx_file.write(idx);
  bin_->commit();
  idx_file.commit();
  finalized_ = true;
}

// ---- reader ----

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string idx_path = index_file_path(prefix);
  MappedFile idx(idx_path);
  const unsigned char* p = idx.data();
  const size_t size = idx.size();
  MF_CHECK(size >= kHeaderBytes, "indexed dataset ", idx_path, ": truncated index (", size,
           " bytes, the header alone is ", kHeaderBytes, ")");
  MF_CHECK(std::memcmp(p, kIndexMagic, 9) == 0, "indexed dataset ", idx_path,
           ": bad magic (not a Megatron MMIDIDX index file)");
  uint64_t version = load<uint64_t>(p + 9);
  MF_CHECK(version == kIndexVersion, "indexed dataset ", idx_path, ": unsupported version ", version,
           " (this reader knows version ", kIndexVersion, ")");
  uint8_t code = p[17];
  MF_CHECK(is_valid_index_dtype_code(code), "indexed dataset ", idx_path, ": unknown dtype code ",
           static_cast<int>(code));
  dtype_ = static_cast<IndexDType>(code);
  uint64_t n = load<uint64_t>(p + 18), docs = load<uint64_t>(p + 26);
  const uint64_t avail = size - kHeaderBytes;
  MF_CHECK(n <= avail / 12 && docs <= avail / 8 && n * 12 + docs * 8 <= avail, "indexed dataset ", idx_path,
           ": truncated index: ", n, " sequences and ", docs, " document indices need ",
           kHeaderBytes, " + 12*", n, " + 8*", docs, " bytes, the file has ", size);
  const uint64_t need = kHeaderBytes + n * 12 + docs * 8;
  MF_CHECK(size == need || size == need + n, "indexed dataset ", idx_path, ": ", size - need,
           " unexpected bytes after the document indices (expected ", need, " bytes, or ", need + n,
           " with sequence modes)");
  MF_CHECK(docs >= 1, "indexed dataset ", idx_path, ": document count is 0 (must include the leading 0)");
  sizes_.resize(n);
  pointers_.resize(n);
  doc_idx_.resize(docs);
  if (n > 0) {
    std::memcpy(sizes_.data(), p + kHeaderBytes, n * 4);
    std::memcpy(pointers_.data(), p + kHeaderBytes + n * 4, n * 8);
  }
  std::memcpy(doc_idx_.data(), p + kHeaderBytes + n * 12, docs * 8);
  MF_CHECK(doc_idx_.front() == 0 && doc_idx_.back() == static_cast<int64_t>(n), "indexed dataset ", idx_path,
           ": document indices must run from 0 to the sequence count ", n, " (got ", doc_idx_.front(), " .. ",
           doc_idx_.back(), ")");
  for (size_t d = 1; d < docs; ++d)
    MF_CHECK(doc_idx_[d] >= doc_idx_[d - 1], "indexed dataset ", idx_path, ": document indices decrease at ", d);

  const std::string bin_path = data_file_path(prefix);
  bin_ = MappedFile(bin_path);
  const int64_t es = static_cast<int64_t>(index_dtype_size(dtype_));
  const int64_t bin_size = static_cast<int64_t>(bin_.size());
  for (uint64_t i = 0; i < n; ++i) {
    MF_CHECK(sizes_[i] >= 0 && pointers_[i] >= 0 && pointers_[i] % es == 0, "indexed dataset ", idx_path,
             ": sequence ", i, " has size ", sizes_[i], " and pointer ", pointers_[i]);
    MF_CHECK(pointers_[i] <= bin_size && sizes_[i] <= (bin_size - pointers_[i]) / es, "indexed dataset ", bin_path,
             ": truncated data file: sequence ", i, " starts at byte ", pointers_[i], " and holds ",
             static_cast<uint64_t>(sizes_[i]) * static_cast<uint64_t>(es), " bytes, the file has ", bin_size,
             " bytes");
    num_tokens_ += sizes_[i];
  }
}

int64_t IndexedDataset::sequence_length(int64_t i) const {
  MF_CHECK(i >= 0 && i < num_sequences(), "indexed dataset ", prefix_, ": sequence ", i, " outside [0, ",
           num_sequences(), ")");
  return sizes_[i];
}

void IndexedDataset::read(int64_t i, int64_t offset, int64_t length, std::vector<int32_t>& out) const {
  int64_t len = sequence_length(i);
  if (length < 0) length = len - offset;
  MF_CHECK(offset >= 0 && length >= 0 && offset <= len && length <= len - offset, "indexed dataset ", prefix_, ": ",
           length, " tokens from token ", offset, " of sequence ", i, " reach outside its ", len, " tokens");
  if (length == 0) return;
  const size_t es = index_dtype_size(dtype_);
  const unsigned char* base = bin_.data() + pointers_[i] + offset * static_cast<int64_t>(es);
  size_t start = out.size();
  out.resize(start + length);
  if (dtype_ == IndexDType::kI32) {
    std::memcpy(out.data() + start, base, length * 4);
  } else if (dtype_ == IndexDType::kU16) {
    for (int64_t k = 0; k < length; ++k) out[start + k] = load<uint16_t>(base + 2 * k);
  } else {
    for (int64_t k = 0; k < length; ++k) out[start + k] = static_cast<int32_t>(token_at(base, dtype_, k));
  }
}

std::vector<int32_t> IndexedDataset::get(int64_t i, int64_t offset, int64_t length) const {
  std::vector<int32_t> out;
  read(i, offset, length, out);
  return out;
}

}  // namespace mf
