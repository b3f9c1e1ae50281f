// Megatron mmap indexed dataset: round trips through our builder and reader, and compatibility
// both ways with an independent reader and writer written here from the documented layout
// (plain fstream, nothing shared with the library); corrupt files fail with clear errors.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "data_testing.h"
#include "meshflow/data/indexed_dataset.h"
#include "testing.h"

namespace {

// ---- independent implementation of the layout ----
struct RefIndex {
  uint8_t dtype_code = 0;
  std::vector<int32_t> sizes;
  std::vector<int64_t> pointers, doc_idx;
};

template <class T>
T get(std::istream& in) {
  T v{};
  in.read(reinterpret_cast<char*>(&v), sizeof(T));
  return v;
}
template <class T>
void put(std::ostream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

RefIndex ref_read_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[9];
  in.read(magic, 9);
  EXPECT_EQ(std::string(magic, 9), std::string("MMIDIDX\0\0", 9));
  EXPECT_EQ(get<uint64_t>(in), 1u);
  RefIndex r;
  r.dtype_code = get<uint8_t>(in);
  uint64_t n = get<uint64_t>(in), d = get<uint64_t>(in);
  for (uint64_t i = 0; i < n; ++i) r.sizes.push_back(get<int32_t>(in));
  for (uint64_t i = 0; i < n; ++i) r.pointers.push_back(get<int64_t>(in));
  for (uint64_t i = 0; i < d; ++i) r.doc_idx.push_back(get<int64_t>(in));
  EXPECT_TRUE(in.good());
  in.get();
  EXPECT_TRUE(in.eof()) << "trailing bytes in " << path;
  return r;
}

// Reads the uint16 tokens of every sequence.
std::vector<std::vector<int32_t>> ref_read_u16(const std::string& prefix) {
  RefIndex r = ref_read_index(prefix + ".idx");
  EXPECT_EQ(r.dtype_code, 8);
  std::ifstream bin(prefix + ".bin", std::ios::binary);
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < r.sizes.size(); ++i) {
    bin.seekg(r.pointers[i]);
    std::vector<int32_t> seq;
    for (int32_t k = 0; k < r.sizes[i]; ++k) seq.push_back(get<uint16_t>(bin));
    out.push_back(seq);
  }
  EXPECT_TRUE(bin.good());
  return out;
}

// Writes int32 tokens (code 4), several sequences per document as Megatron allows.
void ref_write_i32(const std::string& prefix, const std::vector<std::vector<int32_t>>& seqs,
                   const std::vector<int64_t>& doc_idx) {
  std::ofstream bin(prefix + ".bin", std::ios::binary), idx(prefix + ".idx", std::ios::binary);
  std::vector<int64_t> ptrs;
  int64_t p = 0;
  for (const auto& s : seqs) {
    ptrs.push_back(p);
    for (int32_t t : s) put<int32_t>(bin, t);
    p += 4 * static_cast<int64_t>(s.size());
  }
  idx.write("MMIDIDX\0\0", 9);
  put<uint64_t>(idx, 1);
  put<uint8_t>(idx, 4);
  put<uint64_t>(idx, seqs.size());
  put<uint64_t>(idx, doc_idx.size());
  for (const auto& s : seqs) put<int32_t>(idx, static_cast<int32_t>(s.size()));
  for (int64_t q : ptrs) put<int64_t>(idx, q);
  for (int64_t d : doc_idx) put<int64_t>(idx, d);
}

std::vector<std::vector<int32_t>> sample_docs() {
  return {{1, 2, 3}, {}, {65535, 0, 50256, 7}, {42}, std::vector<int32_t>(1000, 9)};
}

void build(const std::string& prefix, const std::vector<std::vector<int32_t>>& docs, mf::IndexDType dt) {
  mf::IndexedDatasetBuilder b(prefix, dt);
  for (const auto& d : docs) b.add_document(d);
  b.finalize();
}

TEST(IndexedDataset, RoundTripsEveryDtype) {
  mft::TempDir dir;
  using D = mf::IndexDType;
  for (D dt : {D::kU8, D::kI8, D::kI16, D::kI32, D::kI64, D::kF64, D::kF32, D::kU16}) {
    std::vector<std::vector<int32_t>> docs = {{1, 2, 3}, {}, {100, 0, 7}, {42}};
    std::string prefix = dir.file(std::string("ds_") + mf::index_dtype_name(dt));
    build(prefix, docs, dt);
    mf::IndexedDataset ds(prefix);
    EXPECT_EQ(ds.dtype(), dt);
    ASSERT_EQ(ds.num_sequences(), 4);
    EXPECT_EQ(ds.num_documents(), 4);
    EXPECT_EQ(ds.num_tokens(), 7);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ds.sequence(i), docs[i]) << mf::index_dtype_name(dt);
    EXPECT_EQ(ds.get(2, 1, 2), (std::vector<int32_t>{0, 7}));
    EXPECT_EQ(std::filesystem::file_size(prefix + ".bin"), 7 * mf::index_dtype_size(dt));
  }
}

TEST(IndexedDataset, OptimalDtypeAndRangeChecks) {
  EXPECT_EQ(mf::optimal_index_dtype(50257), mf::IndexDType::kU16);
  EXPECT_EQ(mf::optimal_index_dtype(65500), mf::IndexDType::kI32);
  mft::TempDir dir;
  mf::IndexedDatasetBuilder b(dir.file("x"), mf::IndexDType::kU16);
  MFT_EXPECT_ERROR(b.add_document(std::vector<int32_t>{1, 70000}), "70000", "uint16");
}

TEST(IndexedDataset, OursReadByIndependentReader) {
  mft::TempDir dir;
  std::string prefix = dir.file("ours");
  auto docs = sample_docs();
  build(prefix, docs, mf::IndexDType::kU16);
  RefIndex r = ref_read_index(prefix + ".idx");
  EXPECT_EQ(r.sizes, (std::vector<int32_t>{3, 0, 4, 1, 1000}));
  EXPECT_EQ(r.pointers, (std::vector<int64_t>{0, 6, 6, 14, 16}));
  EXPECT_EQ(r.doc_idx, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(ref_read_u16(prefix), docs);
  EXPECT_EQ(std::filesystem::file_size(prefix + ".idx"), 34u + 5 * 12 + 6 * 8);
}

TEST(IndexedDataset, IndependentWriterReadByOurs) {
  mft::TempDir dir;
  std::string prefix = dir.file("theirs");
  std::vector<std::vector<int32_t>> seqs = {{5, 6}, {7}, {}, {100000, -3, 8}, {9}};
  ref_write_i32(prefix, seqs, {0, 2, 3, 5});  // 3 documents: {0,1}, {2}, {3,4}
  mf::IndexedDataset ds(prefix);
  EXPECT_EQ(ds.dtype(), mf::IndexDType::kI32);
  EXPECT_EQ(ds.num_sequences(), 5);
  EXPECT_EQ(ds.num_documents(), 3);
  EXPECT_EQ(ds.document_indices(), (std::vector<int64_t>{0, 2, 3, 5}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ds.sequence(i), seqs[i]);
  EXPECT_EQ(ds.get(3, 1, -1), (std::vector<int32_t>{-3, 8}));
  MFT_EXPECT_ERROR(ds.get(3, 2, 2), "outside");
  MFT_EXPECT_ERROR(ds.get(3, 1, std::numeric_limits<int64_t>::max()), "outside");  // no offset + length overflow
  MFT_EXPECT_ERROR(ds.sequence(5), "sequence 5");
}

// Rewrites `n` bytes at `offset` of a file.
void patch(const std::string& path, size_t offset, const void* bytes, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
}

TEST(IndexedDataset, CorruptFilesThrowNamingTheFile) {
  mft::TempDir dir;
  auto fresh = [&](const std::string& name) {
    std::string prefix = dir.file(name);
    build(prefix, sample_docs(), mf::IndexDType::kU16);
    return prefix;
  };
  MFT_EXPECT_ERROR(mf::IndexedDataset(dir.file("absent")), "absent.idx");
  {
    std::string p = fresh("nobin");
    std::filesystem::remove(p + ".bin");
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "nobin.bin");
  }
  {
    std::string p = fresh("shortbin");
    std::filesystem::resize_file(p + ".bin", std::filesystem::file_size(p + ".bin") - 2);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "shortbin.bin", "truncated");
  }
  {
    std::string p = fresh("shortidx");
    std::filesystem::resize_file(p + ".idx", std::filesystem::file_size(p + ".idx") - 8);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "shortidx.idx", "truncated");
    std::filesystem::resize_file(p + ".idx", 20);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "shortidx.idx", "truncated");
  }
  {
    std::string p = fresh("magic");
    patch(p + ".idx", 0, "MMIDIDY", 7);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "magic.idx", "bad magic");
  }
  {
    std::string p = fresh("future");
    uint64_t v = 2;
    patch(p + ".idx", 9, &v, 8);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "future.idx", "version 2");
  }
  {
    std::string p = fresh("dtype");
    uint8_t c = 9;
    patch(p + ".idx", 17, &c, 1);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "dtype.idx", "dtype code 9");
  }
  {
    std::string p = fresh("count");
    uint64_t n = uint64_t{1} << 61;
    patch(p + ".idx", 18, &n, 8);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "count.idx", "truncated");
  }
  {
    // A pointer near INT64_MAX: the error once added the sequence's size to it (signed overflow,
    // found by fuzz/indexed_dataset_fuzz.cpp); the message now names the start and the byte count.
    std::string p = fresh("farptr");
    int64_t ptr = std::numeric_limits<int64_t>::max() - 127;
    patch(p + ".idx", 34 + 5 * 4, &ptr, 8);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "farptr.bin", "starts at byte 9223372036854775680");
  }
  {
    std::string p = fresh("docidx");
    int64_t last = 4;  // document indices must end at the sequence count, 5
    patch(p + ".idx", 34 + 5 * 12 + 5 * 8, &last, 8);
    MFT_EXPECT_ERROR(mf::IndexedDataset{p}, "docidx.idx", "document indices");
  }
}

// Inputs that broke the reader (seen writing fuzz/indexed_dataset_fuzz.cpp): a float token that is
// NaN, infinite or outside int32 was converted to an integer (undefined behaviour); now an error.
TEST(IndexedDataset, FloatTokensThatAreNoIdThrow) {
  mft::TempDir dir;
  for (auto [dt, bad] : {std::pair{mf::IndexDType::kF32, 0}, std::pair{mf::IndexDType::kF64, 1}}) {
    const std::string prefix = dir.file(bad ? "f64" : "f32");
    build(prefix, {{1, 2, 3}}, dt);
    EXPECT_EQ(mf::IndexedDataset(prefix).sequence(0), (std::vector<int32_t>{1, 2, 3}));
    if (dt == mf::IndexDType::kF32) {
      const float nan = std::numeric_limits<float>::quiet_NaN(), big = 1e30f;
      patch(prefix + ".bin", 4, &nan, 4);
      patch(prefix + ".bin", 8, &big, 4);
    } else {
      const double inf = std::numeric_limits<double>::infinity();
      patch(prefix + ".bin", 8, &inf, 8);
    }
    mf::IndexedDataset ds(prefix);
    MFT_EXPECT_ERROR(ds.sequence(0), "float token", "not a token id");
    EXPECT_EQ(ds.get(0, 0, 1), (std::vector<int32_t>{1}));
  }
}

TEST(IndexedDataset, UnfinishedBuilderLeavesNothing) {
  mft::TempDir dir;
  {
    mf::IndexedDatasetBuilder b(dir.file("partial"), mf::IndexDType::kI32);
    b.add_document(std::vector<int32_t>{1, 2, 3});
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
