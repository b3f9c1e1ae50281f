// The checkpoint format (train/checkpoint.h): pieces written under one layout read back under
// another (checked against naive index loops), dtype casts, a checkpoint that was corrupted,
// truncated, lost a file or comes from a future format, a writer killed mid-save, a save that
// fails part-way (its folder removed, the error naming the latest checkpoint), and the
// memory a save and a load hold.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "data_testing.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/global/sbp.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/io/safetensors_header.h"
#include "testing.h"

namespace {

namespace fs = std::filesystem;
using mf::DType;
using mf::Shape;
using mf::Tensor;
using mf::io::ShardPiece;
using mf::io::TensorRegion;

// A tensor whose element i is i (exact in f64 and, for small i, in f32).
Tensor iota(const Shape& s) {
  std::vector<double> v(static_cast<size_t>(mf::shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return mf::from_vector(v, s);
}

// The naive answer: the row-major indices of the logical tensor a region covers, in order.
std::vector<int64_t> region_indices(const TensorRegion& r) {
  std::vector<int64_t> box;
  const int64_t n = mf::shape_numel(r.view);
  for (int64_t i = 0; i < n; ++i) {
    if (r.axis >= 0) {
      int64_t rest = i, coord = 0;
      for (int64_t k = static_cast<int64_t>(r.view.size()) - 1; k >= r.axis; --k) {
        coord = rest % r.view[static_cast<size_t>(k)];
        rest /= r.view[static_cast<size_t>(k)];
      }
      if (coord < r.start || coord >= r.start + r.length) continue;
    }
    box.push_back(i);
  }
  const int64_t len = r.flat_length < 0 ? static_cast<int64_t>(box.size()) - r.flat_start : r.flat_length;
  return {box.begin() + r.flat_start, box.begin() + r.flat_start + len};
}

// A layout: `tp` boxes along `axis` of `view` (axis -1: one whole box), each cut into `dp` flat slices.
std::vector<TensorRegion> layout(const Shape& view, int64_t axis, int tp, int dp) {
  std::vector<TensorRegion> out;
  for (int t = 0; t < (axis < 0 ? 1 : tp); ++t) {
    TensorRegion box = TensorRegion::whole(view);
    if (axis >= 0) {
      box.axis = axis;
      box.start = mf::global::split_start(view[static_cast<size_t>(axis)], tp, t);
      box.length = mf::global::split_size(view[static_cast<size_t>(axis)], tp, t);
    }
    const int64_t n = box.box_numel();
    for (int d = 0; d < dp; ++d) {
      TensorRegion r = box;
      r.flat_start = mf::global::split_start(n, dp, d);
      r.flat_length = mf::global::split_size(n, dp, d);
      out.push_back(r);
    }
  }
  return out;
}

std::vector<ShardPiece> pieces_of(const std::string& name, const Tensor& logical, const std::vector<TensorRegion>& regions) {
  std::vector<ShardPiece> out;
  for (const TensorRegion& r : regions) {
    std::vector<double> v;
    for (int64_t i : region_indices(r)) v.push_back(logical.data<double>()[i]);
    out.push_back({name, mf::from_vector(v, {static_cast<int64_t>(v.size())}), logical.shape(), r});
  }
  return out;
}

TEST(CheckpointFormat, RegionsWrittenUnderOneLayoutReadUnderAnother) {
  // A (6, 12) tensor viewed like the fused QKV weight as (6, 3, 4); layouts split the heads
  // axis or the rows, unevenly, and cut each box into ZeRO's flat slices.
  const Shape logical{6, 12}, grouped{6, 3, 4};
  const Tensor w = iota(logical);
  const std::vector<std::vector<TensorRegion>> layouts = {
      layout(logical, -1, 1, 1), layout(grouped, 2, 2, 3), layout(logical, 0, 4, 2), layout(grouped, 2, 3, 2),
      layout(grouped, 1, 3, 1), layout(logical, -1, 1, 5)};
  for (size_t src = 0; src < layouts.size(); ++src) {
    mft::TempDir dir;
    mf::io::write_checkpoint_shards(nullptr, dir.path().string(), {}, "", {}, pieces_of("w", w, layouts[src]), 1);
    auto reader = mf::io::CheckpointReader::open_latest(dir.path().string());
    ASSERT_TRUE(reader.has_value());
    reader->verify(nullptr);
    EXPECT_EQ(reader->shape("w"), logical);
    for (size_t dst = 0; dst < layouts.size(); ++dst)
      for (const TensorRegion& r : layouts[dst]) {
        const std::vector<int64_t> want = region_indices(r);
        Tensor out = mf::empty({r.numel()}, DType::kF64);
        reader->read("w", r, out);
        Tensor out32 = mf::empty({r.numel()}, DType::kF32);  // through the casting path
        reader->read("w", r, out32);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(out.data<double>()[i], static_cast<double>(want[i])) << "layout " << src << " -> " << dst;
          ASSERT_EQ(out32.data<float>()[i], static_cast<float>(want[i])) << "layout " << src << " -> " << dst;
        }
      }
    // A layout that leaves part of the tensor out is caught.
    if (src == 1) {
      std::vector<ShardPiece> some = pieces_of("w", w, layouts[src]);
      some.pop_back();
      mft::TempDir d2;
      mf::io::write_checkpoint_shards(nullptr, d2.path().string(), {}, "", {}, some, 1);
      auto r2 = mf::io::CheckpointReader::open_latest(d2.path().string());
      Tensor all = mf::empty(logical, DType::kF64);
      MFT_EXPECT_ERROR(r2->read("w", TensorRegion::whole(logical), all), "tensor 'w'", "cover");
    }
  }
}

// A one-process checkpoint of two tensors at iteration `iter`.
void save(const std::string& dir, int64_t iter, double offset = 0) {
  mf::io::TrainingState st;
  st.iter = iter;
  Tensor a = mf::add_scalar(iota({64, 16}), offset), b = iota({5});
  mf::io::write_checkpoint(dir, st, {{"a", a}}, {{"a.exp_avg", b}}, 2);
}

std::string shard_path(const std::string& dir, int64_t iter) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "checkpoints/iter_%07lld/shard_00000.safetensors", static_cast<long long>(iter));
  return (fs::path(dir) / buf).string();
}

TEST(CheckpointFormat, DamageIsAnErrorNamingTheFile) {
  {
    mft::TempDir d;
    save(d.path().string(), 1);
    auto loaded = mf::io::read_latest_checkpoint(d.path().string());
    ASSERT_TRUE(loaded.has_value());
    EXPECT_EQ(loaded->state.iter, 1);
    ASSERT_EQ(loaded->model.size(), 1u);
    EXPECT_EQ(loaded->model[0].second.to_vector<double>(), iota({64, 16}).to_vector<double>());
  }
  {  // a flipped byte in the data
    mft::TempDir d;
    save(d.path().string(), 1);
    std::fstream f(shard_path(d.path().string(), 1), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(-100, std::ios::end);
    f.write(&c, 1);
    f.close();
    MFT_EXPECT_ERROR(mf::io::read_latest_checkpoint(d.path().string()), "shard_00000.safetensors", "checksum");
  }
  {  // truncated
    mft::TempDir d;
    save(d.path().string(), 1);
    fs::resize_file(shard_path(d.path().string(), 1), 200);
    MFT_EXPECT_ERROR(mf::io::read_latest_checkpoint(d.path().string()), "shard_00000.safetensors", "truncated");
  }
  {  // missing
    mft::TempDir d;
    save(d.path().string(), 1);
    fs::remove(shard_path(d.path().string(), 1));
    MFT_EXPECT_ERROR(mf::io::read_latest_checkpoint(d.path().string()), "shard_00000.safetensors", "missing");
  }
  {  // from a future meshflow
    mft::TempDir d;
    save(d.path().string(), 1);
    const std::string meta = (d.path() / "checkpoints/iter_0000001/metadata.json").string();
    std::string text = mf::read_file(meta);
    const std::string key = "\"format_version\": 2";
    ASSERT_NE(text.find(key), std::string::npos) << text.substr(0, 200);
    text.replace(text.find(key), key.size(), "\"format_version\": 99");
    mf::write_file_atomic(meta, text);
    MFT_EXPECT_ERROR(mf::io::read_latest_checkpoint(d.path().string()), "metadata.json", "version 99", "newer");
  }
  {  // edited: a state value changed by hand is caught by the metadata's own checksum
    mft::TempDir d;
    save(d.path().string(), 1);
    const std::string meta = (d.path() / "checkpoints/iter_0000001/metadata.json").string();
    std::string text = mf::read_file(meta);
    const std::string key = "\"iter\": 1";
    ASSERT_NE(text.find(key), std::string::npos) << text.substr(0, 200);
    text.replace(text.find(key), key.size(), "\"iter\": 7");
    mf::write_file_atomic(meta, text);
    MFT_EXPECT_ERROR(mf::io::read_latest_checkpoint(d.path().string()), "metadata.json", "checksum does not match");
  }
  {  // `latest` missing: the newest complete checkpoint, with a note; naming nothing: an error
    mft::TempDir d;
    save(d.path().string(), 1);
    save(d.path().string(), 2);
    fs::remove(d.path() / "checkpoints/latest");
    auto r = mf::io::CheckpointReader::open_latest(d.path().string());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->state().iter, 2);
    EXPECT_NE(r->note().find("latest is missing"), std::string::npos) << r->note();
    mf::write_file_atomic((d.path() / "checkpoints/latest").string(), std::string("iter_0000002\0\n", 14));
    MFT_EXPECT_ERROR(mf::io::CheckpointReader::open_latest(d.path().string()), "\\x00", "not a checkpoint name",
                     "newest complete checkpoint there is iter_0000002");
    mf::write_file_atomic((d.path() / "checkpoints/latest").string(), "iter_0000009\n");
    MFT_EXPECT_ERROR(mf::io::CheckpointReader::open_latest(d.path().string()), "iter_0000009', which does not exist");
  }
}

TEST(CheckpointFormat, AWriterKilledMidSaveLeavesThePreviousCheckpoint) {
  mft::TempDir d;
  const std::string dir = d.path().string();
  save(dir, 1);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    mf::io::crash_in_next_checkpoint_for_testing();
    save(dir, 2, 1000.0);
    std::_Exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(fs::exists(d.path() / "checkpoints/iter_0000002.tmp"));  // the half-written one
  EXPECT_FALSE(fs::exists(d.path() / "checkpoints/iter_0000002"));
  auto loaded = mf::io::read_latest_checkpoint(dir);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.iter, 1);
  EXPECT_EQ(loaded->model[0].second.to_vector<double>(), iota({64, 16}).to_vector<double>());
  {  // resuming says that the newer save did not finish and which checkpoint it takes instead
    auto r = mf::io::CheckpointReader::open_latest(dir);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->state().iter, 1);
    EXPECT_NE(r->note().find("iter_0000002.tmp (unfinished)"), std::string::npos) << r->note();
    EXPECT_NE(r->note().find("names iter_0000001, the last complete checkpoint"), std::string::npos) << r->note();
  }
  // A writer killed while replacing `latest` leaves its temporary beside it.
  { std::ofstream((d.path() / "checkpoints/latest.tmp.12345").string()) << "iter_00"; }
  save(dir, 3);  // the next save clears what the crashes left
  EXPECT_FALSE(fs::exists(d.path() / "checkpoints/iter_0000002.tmp"));
  EXPECT_FALSE(fs::exists(d.path() / "checkpoints/latest.tmp.12345"));
  EXPECT_EQ(mf::io::read_latest_checkpoint(dir)->state.iter, 3);
  EXPECT_EQ(mf::io::CheckpointReader::open_latest(dir)->note(), "");
  // A save whose folder was renamed into place but `latest` not yet replaced: still the older one.
  fs::create_directories(d.path() / "checkpoints/scratch");
  save((d.path() / "checkpoints/scratch").string(), 4);
  fs::rename(d.path() / "checkpoints/scratch/checkpoints/iter_0000004", d.path() / "checkpoints/iter_0000004");
  fs::remove_all(d.path() / "checkpoints/scratch");
  auto r = mf::io::CheckpointReader::open_latest(dir);
  EXPECT_EQ(r->state().iter, 3);
  EXPECT_NE(r->note().find("iter_0000004 (not yet named by latest)"), std::string::npos) << r->note();
}

// A save that fails part-way (here: a write refused by a file size limit, as a full disk refuses
// it) removes what it wrote and says which checkpoint is still the latest; the next save works.
TEST(CheckpointFormat, AFailedSaveRemovesItsFolderAndNamesTheLatest) {
  mft::TempDir d;
  const std::string dir = d.path().string();
  save(dir, 1);
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 1000;  // the shard (~4 KB) does not fit
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    save(dir, 2);
  } catch (const mf::Error& e) {
    error = e.what();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(error.find("saving checkpoint " + (d.path() / "checkpoints/iter_0000002").string() + " failed"),
            std::string::npos) << error;
  EXPECT_NE(error.find("shard_00000.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("File too large"), std::string::npos) << error;
  EXPECT_NE(error.find("the unfinished save was removed"), std::string::npos) << error;
  EXPECT_NE(error.find("latest still names iter_0000001, the last complete checkpoint"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;  // one line
  std::vector<std::string> left;
  for (auto& e : fs::directory_iterator(d.path() / "checkpoints")) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"iter_0000001", "latest"}));
  auto loaded = mf::io::read_latest_checkpoint(dir);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.iter, 1);
  EXPECT_EQ(mf::io::CheckpointReader::open_latest(dir)->note(), "");
  save(dir, 2);
  EXPECT_EQ(mf::io::read_latest_checkpoint(dir)->state.iter, 2);
}

TEST(CheckpointFormat, SaveAndLoadHoldOnlyTheirTensors) {
  // 8 MB of state; a save writes it from the tensors themselves and a load reads into them,
  // so neither allocates more than a few small bookkeeping tensors.
  mft::TempDir d;
  mf::Allocator& alloc = mf::allocator_for(mf::cpu_device());
  Tensor a = iota({512, 1024}), b = iota({1024, 512});
  std::vector<ShardPiece> pieces = pieces_of("a", a, layout({512, 1024}, 0, 2, 1));
  for (auto& p : pieces_of("b", b, layout({1024, 512}, 1, 2, 2))) pieces.push_back(p);
  const int64_t before = alloc.stats().current_bytes;
  alloc.reset_peak();
  mf::io::write_checkpoint_shards(nullptr, d.path().string(), {}, "", {}, pieces, 1);
  EXPECT_LE(alloc.stats().peak_bytes - before, 4096) << "save";
  auto reader = mf::io::CheckpointReader::open_latest(d.path().string());
  Tensor into = mf::empty({1024, 512}, DType::kF64);
  const int64_t before_read = alloc.stats().current_bytes;
  alloc.reset_peak();
  reader->verify(nullptr);
  reader->read("b", TensorRegion::whole({1024, 512}), into);
  EXPECT_LE(alloc.stats().peak_bytes - before_read, 4096) << "load";
  EXPECT_EQ(into.to_vector<double>(), b.to_vector<double>());
}

// Inputs that broke the parser (seen writing fuzz/safetensors_header_fuzz.cpp): sizes converted by
// undefined casts (floats), wrapped (negatives) or overflowed, and non-string metadata that threw
// nlohmann's own exception; each is now an mf::Error naming the file.
TEST(CheckpointFormat, SafetensorsHeaderRefusesSizesThatWrapOrOverflow) {
  auto parse = [](const std::string& header, uint64_t data_bytes = 0) {
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    bytes += header + std::string(data_bytes, '\0');
    return mf::io::parse_safetensors_header(bytes, bytes.size(), "x.safetensors");
  };
  EXPECT_EQ(parse(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8).tensors.size(), 1u);
  MFT_EXPECT_ERROR(parse(R"({"__metadata__":{"format":1}})"), "x.safetensors", "'format' is not a string");
  MFT_EXPECT_ERROR(parse(R"({"__metadata__":[1]})"), "x.safetensors", "__metadata__");
  MFT_EXPECT_ERROR(parse(R"({"a":5})"), "x.safetensors", "'a'", "malformed entry");
  MFT_EXPECT_ERROR(parse(R"({"a":{"dtype":"F32","shape":[-1,0],"data_offsets":[0,0]}})"), "shape", "-1");
  MFT_EXPECT_ERROR(parse(R"({"a":{"dtype":"F32","shape":[1e300],"data_offsets":[0,0]}})"), "shape", "not a non-negative integer");
  MFT_EXPECT_ERROR(parse(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})"), "too large");
  MFT_EXPECT_ERROR(parse(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0.5,8]}})", 8), "data_offsets");
  MFT_EXPECT_ERROR(parse(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", 8), "dtype is not a string");
}

// Inputs that broke the parser (seen writing fuzz/checkpoint_metadata_fuzz.cpp): numbers that were
// floats (undefined casts), sizes that overflowed int64 in the region checks, a piece ending past
// int64; each is now an mf::Error naming the file.
TEST(CheckpointFormat, MetadataRefusesNumbersThatWrapOrOverflow) {
  const nlohmann::ordered_json good = nlohmann::ordered_json::parse(R"({"format_version": 2, "iter": 3,
    "optimizer_steps": 3, "data_position": 48, "rng": {"seed": 1, "next_stream": 2}, "layout": {"tp": 2},
    "files": [{"name": "shard_00000.safetensors", "bytes": 1000, "crc32": 1}],
    "tensors": {"model/w": {"shape": [4, 2], "dtype": "F32", "pieces": [{"view": [2, 2, 2], "axis": 0,
      "start": 1, "length": 1, "flat_start": 0, "flat_length": 4, "file": 0, "offset": 8, "bytes": 16}]}}})");
  const mf::io::CheckpointMetadata m = mf::io::parse_checkpoint_metadata(good.dump(), "metadata.json");
  EXPECT_EQ(m.tensors.at("model/w").pieces.at(0).region.numel(), 4);
  auto bad = [&](const char* pointer, const nlohmann::ordered_json& value, const char* want) {
    nlohmann::ordered_json j = good;
    j[nlohmann::ordered_json::json_pointer(pointer)] = value;
    MFT_EXPECT_ERROR(mf::io::parse_checkpoint_metadata(j.dump(), "metadata.json"), "metadata.json", want);
  };
  const int64_t max = std::numeric_limits<int64_t>::max();
  bad("/iter", 1e300, "not an integer");
  bad("/format_version", 2.5, "not an integer");
  bad("/files/0/crc32", uint64_t{1} << 40, "not a CRC-32");
  bad("/tensors/model~1w/pieces/0/file", 1e300, "not an integer");
  bad("/tensors/model~1w/shape", {int64_t{1} << 62, int64_t{1} << 62, 0}, "too large");
  bad("/tensors/model~1w/shape", {-4, -2}, "negative");
  bad("/tensors/model~1w/pieces/0/length", max, "outside axis");
  bad("/tensors/model~1w/pieces/0/flat_start", max, "flat range");
  bad("/tensors/model~1w/pieces/0/offset", max, "has a piece outside");
  bad("/tensors/model~1w/pieces/0/axis", -5, "region axis");
  bad("/layout", 3, "layout is not an object");
  bad("/layout/tp", "2", "not an integer");
  MFT_EXPECT_ERROR(mf::io::parse_checkpoint_metadata("[1]", "metadata.json"), "metadata.json", "not a JSON object");
}

}  // namespace
