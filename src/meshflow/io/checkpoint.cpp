#include "meshflow/io/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/io/safetensors.h"
#include "meshflow/ops/ops.h"

namespace mf::io {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {
constexpr int kFormatVersion = kCheckpointFormatVersion;
constexpr int64_t kCastChunkElems = int64_t{1} << 20;  // the bounded buffer of a dtype-converting read
std::atomic<bool> g_crash_in_next_save{false};

std::string iter_name(int64_t iter) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(iter));
  return buf;
}

std::string shard_name(int rank) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "shard_%05d.safetensors", rank);
  return buf;
}

std::string errno_str() { return std::strerror(errno); }

using Geometry = RegionGeometry;
Geometry geometry(const TensorRegion& r) { return region_geometry(r); }

// A file opened for positioned reads (shard headers and data, checksums).
class Fd {
 public:
  explicit Fd(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    MF_CHECK(fd_ >= 0, "cannot open ", path, ": ", errno_str());
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void read_at(void* dst, size_t nbytes, int64_t offset) const {
    char* p = static_cast<char*>(dst);
    while (nbytes > 0) {
      ssize_t n = ::pread(fd_, p, nbytes, offset);
      if (n < 0 && errno == EINTR) continue;
      MF_CHECK(n > 0, path_, ": short read at byte ", offset, " (", n < 0 ? errno_str() : "end of file", ")");
      p += n;
      offset += n;
      nbytes -= static_cast<size_t>(n);
    }
  }

 private:
  std::string path_;
  int fd_;
};

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void barrier(comm::Communicator* world) {
  if (world) world->barrier()->wait();
}

// Writes this rank's pieces as one safetensors file (flat tensors; the regions in the header's
// metadata) and returns its size and CRC-32.
std::pair<int64_t, uint32_t> write_shard(const fs::path& path, int rank, const std::vector<ShardPiece>& mine) {
  json regions = json::object();
  json header = json::object();
  uint64_t offset = 0;
  std::vector<Tensor> data;
  for (const ShardPiece& p : mine) {
    check_region(p.region, p.logical, "checkpoint piece '" + p.name + "'");
    MF_CHECK(p.data.numel() == p.region.numel(), "checkpoint piece '", p.name, "' holds ", p.data.numel(),
             " elements for a region of ", p.region.numel());
    // A second piece of the same tensor (possible, e.g. a test writing several ranks' pieces
    // from one process) gets its own key.
    std::string key = p.name;
    for (int k = 1; regions.contains(key); ++k) key = p.name + "@" + std::to_string(k);
    Tensor c = contiguous(p.data.detach());
    if (c.device().type != DeviceType::kCPU) c = to(c, cpu_device());  // GPU state: written from a host copy
    json r = region_json(p.region);
    r["tensor"] = p.name;
    r["shape"] = p.logical;
    regions[key] = r;
    header[key] = {{"dtype", io::safetensors_dtype(c.dtype())},
                      {"shape", {c.numel()}},
                      {"data_offsets", {offset, offset + c.nbytes()}}};
    offset += c.nbytes();
    data.push_back(c);
  }
  json full = json::object();
  full["__metadata__"] = {{"format", "meshflow-shard"}, {"rank", std::to_string(rank)}, {"regions", regions.dump()}};
  for (auto& [k, v] : header.items()) full[k] = v;
  std::string h = full.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t hlen = h.size();
  AtomicFile f(path.string());
  uLong crc = crc32(0L, Z_NULL, 0);
  auto put = [&](const void* p, size_t n) {
    f.write(p, n);
    const auto* b = static_cast<const Bytef*>(p);
    while (n > 0) {  // crc32 takes a uInt length
      const uInt k = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
      crc = crc32(crc, b, k);
      b += k;
      n -= k;
    }
  };
  put(&hlen, 8);
  put(h.data(), h.size());
  for (const Tensor& c : data) put(c.raw_data(), c.nbytes());
  f.commit();
  return {static_cast<int64_t>(8 + hlen + offset), static_cast<uint32_t>(crc)};
}

int64_t metadata_crc(const json& meta) { return checkpoint_metadata_crc(meta); }

// Removes a checkpoint folder so that no moment of the removal shows a half-removed folder under a
// checkpoint's name: it is renamed out of the way first (a ".tmp" name, which no reader takes and
// the next save clears if this process dies before the removal ends).
void remove_checkpoint_dir(const fs::path& dir, const char* why) {
  const fs::path gone = dir.parent_path() / (dir.filename().string() + "." + why + ".tmp");
  fs::remove_all(gone);
  fs::rename(dir, gone);
  fs::remove_all(gone);
}

void prune(const fs::path& root, int64_t max_to_keep) {
  std::vector<std::string> dirs;
  for (auto& e : fs::directory_iterator(root)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && is_checkpoint_name(n)) dirs.push_back(n);
  }
  std::sort(dirs.begin(), dirs.end());
  if (max_to_keep > 0)
    for (size_t i = 0; i + static_cast<size_t>(max_to_keep) < dirs.size(); ++i) remove_checkpoint_dir(root / dirs[i], "pruned");
}

// What a save killed or failed part-way left in `root`: unfinished checkpoint folders (".tmp" names)
// and the temporary of a `latest` being replaced.
void remove_leftovers(const fs::path& root) {
  std::vector<fs::path> gone;
  for (auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if ((e.is_directory() && n.rfind("iter_", 0) == 0 && n.find(".tmp") != std::string::npos) ||
        (!e.is_directory() && n.rfind("latest.tmp.", 0) == 0))
      gone.push_back(e.path());
  }
  for (const fs::path& p : gone) fs::remove_all(p);
}

// The iteration of an unfinished save's folder ("iter_NNNNNNN.tmp"), or -1.
int64_t unfinished_iter(const std::string& n) {
  if (n.size() <= 4 || n.compare(n.size() - 4, 4, ".tmp") != 0) return -1;
  const std::string base = n.substr(0, n.size() - 4);
  return is_checkpoint_name(base) ? std::stoll(base.substr(5)) : -1;
}

// The name `latest` holds (trailing newline and spaces dropped), or "" when it cannot be read.
std::string latest_name(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_regular_file(root / "latest", ec)) return "";
  try {
    std::string name = read_file((root / "latest").string());
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    return name;
  } catch (const std::exception&) {
    return "";
  }
}
}  // namespace

void crash_in_next_checkpoint_for_testing() { g_crash_in_next_save = true; }

std::string checkpoint_name(int64_t iter) { return iter_name(iter); }

bool is_checkpoint_name(const std::string& n) {
  if (n.size() <= 5 || n.size() > 24 || n.rfind("iter_", 0) != 0) return false;
  return std::all_of(n.begin() + 5, n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

namespace {

// Adds shard file `file` (index files.size(), of `bytes` bytes and CRC-32 `crc`, in `dir`) to the
// metadata's file list and each of its pieces to its tensor's entry.
void index_shard_file(const fs::path& dir, const std::string& file, int64_t bytes, int64_t crc, json& files,
                      json& tensors) {
  Fd f((dir / file).string());
  uint64_t hlen = 0;
  f.read_at(&hlen, 8, 0);
  std::string h(hlen, ' ');
  f.read_at(h.data(), hlen, 8);
  const json header = json::parse(h);
  const json regions = json::parse(header.at("__metadata__").at("regions").get<std::string>());
  const int file_index = static_cast<int>(files.size());
  files.push_back({{"name", file}, {"bytes", bytes}, {"crc32", crc}});
  for (auto& [key, entry] : header.items()) {
    if (key == "__metadata__") continue;
    const auto off = entry.at("data_offsets").get<std::vector<int64_t>>();
    const json& r = regions.at(key);
    const std::string tensor = r.at("tensor").get<std::string>();
    json& t = tensors[tensor];
    if (t.is_null()) t = {{"shape", r.at("shape")}, {"dtype", entry.at("dtype")}, {"pieces", json::array()}};
    MF_CHECK(t.at("shape") == r.at("shape") && t.at("dtype") == entry.at("dtype"), "checkpoint: tensor '", tensor,
             "' has pieces of different shapes or dtypes (", file, ")");
    json piece = region_json(region_from_json(r));
    piece["file"] = file_index;
    piece["offset"] = static_cast<int64_t>(8 + hlen) + off[0];
    piece["bytes"] = off[1] - off[0];
    t["pieces"].push_back(piece);
  }
}

json metadata_json(const TrainingState& st, const std::string& config_yaml, const std::map<std::string, int64_t>& layout,
                   json files, json tensors) {
  json lay = json::object();
  for (const auto& [k, v] : layout) lay[k] = v;
  json meta = {{"format", "meshflow-checkpoint"},
               {"format_version", kFormatVersion},
               {"iter", st.iter},
               {"optimizer_steps", st.optimizer_steps},
               {"data_position", st.data_position},
               {"rng", {{"seed", st.rng.seed}, {"next_stream", st.rng.next_stream}}},
               {"skipped_iters", st.skipped_iters},
               {"layout", lay},
               {"files", std::move(files)},
               {"tensors", std::move(tensors)},
               {"config", config_yaml}};
  if (st.run)
    meta["run"] = {{"seq_length", st.run->seq_length},
                   {"global_batch_size", st.run->global_batch_size},
                   {"seed", st.run->seed}};
  if (st.loss_scaler)
    meta["loss_scaler"] = {{"scale", st.loss_scaler->scale},
                           {"growth_tracker", st.loss_scaler->growth_tracker},
                           {"hysteresis_tracker", st.loss_scaler->hysteresis_tracker}};
  return meta;
}

}  // namespace

void write_checkpoint_shards(comm::Communicator* world, const std::string& output_dir, const TrainingState& st,
                             const std::string& config_yaml, const std::map<std::string, int64_t>& layout,
                             const std::vector<ShardPiece>& mine, int64_t max_to_keep) {
  const int rank = world ? world->rank() : 0, size = world ? world->size() : 1;
  const fs::path root = fs::path(output_dir) / "checkpoints";
  const std::string name = iter_name(st.iter);
  const fs::path tmp = root / (name + ".tmp"), final_dir = root / name;
  // A save that fails part-way (a full disk, a write error) removes what it wrote, so the unfinished
  // folder neither fills the disk nor is ever read, and says which checkpoint is still the latest.
  // (A process killed mid-save leaves `iter_N.tmp`, which the next save removes; the rename and
  // `latest` make the new checkpoint appear whole or not at all.)
  bool renamed = false, committed = false;
  try {
    if (rank == 0) {
      fs::create_directories(root);
      remove_leftovers(root);
      fs::create_directories(tmp);
    }
    barrier(world);
    int64_t nbytes = 0;
    uint32_t crc = 0;
    if (!mine.empty()) std::tie(nbytes, crc) = write_shard(tmp / shard_name(rank), rank, mine);
    if (g_crash_in_next_save.exchange(false)) ::raise(SIGKILL);
    Tensor info = full({2}, 0.0, DType::kI64);
    info.data<int64_t>()[0] = nbytes;
    info.data<int64_t>()[1] = crc;
    Tensor all = empty({2 * static_cast<int64_t>(size)}, DType::kI64);
    if (world)
      world->all_gather(info, all)->wait();
    else
      all = info;
    if (rank == 0) {
      json files = json::array();
      json tensors = json::object();
      for (int q = 0; q < size; ++q) {
        const int64_t bytes = all.data<int64_t>()[2 * q];
        if (bytes > 0) index_shard_file(tmp, shard_name(q), bytes, all.data<int64_t>()[2 * q + 1], files, tensors);
      }
      json meta = metadata_json(st, config_yaml, layout, std::move(files), std::move(tensors));
      meta["metadata_crc32"] = metadata_crc(meta);
      write_file_atomic((tmp / "metadata.json").string(), meta.dump(1) + "\n");
      fsync_dir(tmp);
      // Every shard is durable (each rank fsynced its file before the gather) and so is the metadata:
      // the folder may take its name.
      if (fs::exists(final_dir)) remove_checkpoint_dir(final_dir, "replaced");
      fs::rename(tmp, final_dir);
      renamed = true;
      fsync_dir(root);
      write_file_atomic((root / "latest").string(), name + "\n");
      committed = true;
      prune(root, max_to_keep);
    }
  } catch (const std::exception& e) {
    if (committed) throw;  // the checkpoint is saved and named; only pruning failed
    std::error_code ec;
    if (renamed) fs::rename(final_dir, tmp, ec);  // saved but not named by `latest`: not a checkpoint
    fs::remove_all(tmp, ec);
    const std::string what = e.what();
    const bool full_disk = what.find(std::strerror(ENOSPC)) != std::string::npos ||
                           what.find(std::strerror(EDQUOT)) != std::string::npos;
    const std::string kept = latest_name(root);
    MF_THROW("saving checkpoint ", final_dir.string(), " failed", full_disk ? ": out of disk space" : "", " (", what,
             "); the unfinished save was removed; ",
             kept.empty() ? std::string("no earlier checkpoint was saved")
                          : (root / "latest").string() + " still names " + kept + ", the last complete checkpoint");
  }
  barrier(world);
}

// ---- reading

struct CheckpointReader::Impl {
  struct Piece {
    int file = 0;
    int64_t offset = 0;
    TensorRegion region;
    Geometry g;
  };
  struct Entry {
    Shape shape;
    DType dtype = DType::kF32;
    std::vector<Piece> pieces;
  };
  std::string dir;
  TrainingState state;
  std::map<std::string, int64_t> layout;
  std::vector<std::string> files;
  std::vector<int64_t> file_bytes;
  std::vector<uint32_t> file_crc;
  std::map<std::string, Entry> tensors;
  mutable std::vector<std::unique_ptr<Fd>> fds;

  std::string path(int file) const { return (fs::path(dir) / files[static_cast<size_t>(file)]).string(); }
  const Fd& fd(int file) const {
    auto& f = fds[static_cast<size_t>(file)];
    if (!f) f = std::make_unique<Fd>(path(file));
    return *f;
  }
  const Entry& entry(const std::string& name) const {
    auto it = tensors.find(name);
    MF_CHECK(it != tensors.end(), "checkpoint ", dir, ": no tensor '", name, "'");
    return it->second;
  }
};

CheckpointReader::CheckpointReader(const std::string& dir) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dir = dir;
  const fs::path meta_path = fs::path(dir) / "metadata.json";
  if (!fs::exists(meta_path) && fs::exists(fs::path(dir) / "state.json"))
    MF_THROW(dir, ": a format-1 checkpoint (one model.safetensors); this meshflow reads format ", kFormatVersion);
  MF_CHECK(fs::exists(meta_path), meta_path.string(), ": missing (not a meshflow checkpoint, or an incomplete one)");
  CheckpointMetadata meta = parse_checkpoint_metadata(read_file(meta_path.string()), meta_path.string());
  m.state = meta.state;
  m.layout = std::move(meta.layout);
  m.files = std::move(meta.files);
  m.file_bytes = std::move(meta.file_bytes);
  m.file_crc = std::move(meta.file_crc);
  for (auto& [name, t] : meta.tensors) {
    Impl::Entry e;
    e.shape = t.shape;
    e.dtype = t.dtype;
    for (const CheckpointMetadata::Piece& p : t.pieces) e.pieces.push_back({p.file, p.offset, p.region, geometry(p.region)});
    m.tensors.emplace(name, std::move(e));
  }
  m.fds.resize(m.files.size());
  for (size_t f = 0; f < m.files.size(); ++f) {
    const std::string p = m.path(static_cast<int>(f));
    MF_CHECK(fs::exists(p), p, ": shard file missing from the checkpoint");
    const auto bytes = static_cast<int64_t>(fs::file_size(p));
    MF_CHECK(bytes == m.file_bytes[f], p, ": ", bytes, " bytes, the checkpoint recorded ", m.file_bytes[f],
             " (truncated or overwritten)");
  }
}

CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;

std::vector<std::string> complete_checkpoints(const std::string& output_dir) {
  const fs::path root = fs::path(output_dir) / "checkpoints";
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return names;
  for (auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && is_checkpoint_name(n) && fs::exists(e.path() / "metadata.json")) names.push_back(n);
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return std::stoll(a.substr(5)) > std::stoll(b.substr(5));
  });
  return names;
}

std::optional<CheckpointReader> CheckpointReader::open_latest(const std::string& output_dir) {
  const fs::path root = fs::path(output_dir) / "checkpoints";
  const fs::path latest = root / "latest";
  const std::vector<std::string> complete = complete_checkpoints(output_dir);
  if (!fs::exists(latest)) {
    // Saving replaces `latest` last: without it, the newest complete checkpoint is the state.
    if (complete.empty()) return std::nullopt;
    CheckpointReader r((root / complete.front()).string());
    r.note_ = latest.string() + " is missing; the newest complete checkpoint is " + complete.front();
    return r;
  }
  std::string name = read_file(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  const std::string newest = complete.empty() ? std::string("none") : complete.front();
  if (!is_checkpoint_name(name)) {
    std::string shown;  // control bytes (a NUL) written as \xNN
    for (char c : name.substr(0, 64)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      shown += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? std::string(buf) : std::string(1, c);
    }
    MF_THROW(latest.string(), " holds '", shown, "', not a checkpoint name (iter_NNNNNNN); the newest complete "
             "checkpoint there is ", newest);
  }
  const fs::path dir = root / name;
  MF_CHECK(fs::is_directory(dir), latest.string(), " names '", name, "', which does not exist; the newest complete "
           "checkpoint there is ", newest);
  CheckpointReader r(dir.string());
  // Saves newer than `latest` that did not finish (the run stopped while writing them) are not
  // checkpoints: they are never read, and the note names them.
  const int64_t at = std::stoll(name.substr(5));
  std::vector<std::string> unfinished;
  for (auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory()) continue;
    if (unfinished_iter(n) > at) unfinished.push_back(n + " (unfinished)");
    if (is_checkpoint_name(n) && std::stoll(n.substr(5)) > at) unfinished.push_back(n + " (not yet named by latest)");
  }
  if (!unfinished.empty()) {
    std::sort(unfinished.begin(), unfinished.end());
    std::string list;
    for (const std::string& u : unfinished) list += (list.empty() ? "" : ", ") + u;
    r.note_ = "a newer save did not finish: " + list + " ignored; " + latest.string() + " names " + name +
              ", the last complete checkpoint";
  }
  return r;
}

void CheckpointReader::verify(comm::Communicator* world) const {
  const Impl& m = *impl_;
  const int rank = world ? world->rank() : 0, size = world ? world->size() : 1;
  int64_t bad = 0;  // 1 + the first file this rank found bad
  std::vector<char> buf(size_t{4} << 20);
  for (size_t f = static_cast<size_t>(rank); f < m.files.size() && bad == 0; f += static_cast<size_t>(size)) {
    const Fd& fd = m.fd(static_cast<int>(f));
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int64_t at = 0; at < m.file_bytes[f];) {
      const auto n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(buf.size()), m.file_bytes[f] - at));
      fd.read_at(buf.data(), n, at);
      crc = crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(n));
      at += static_cast<int64_t>(n);
    }
    if (static_cast<uint32_t>(crc) != m.file_crc[f]) bad = static_cast<int64_t>(f) + 1;
  }
  Tensor t = full({1}, static_cast<double>(bad == 0 ? 0 : static_cast<int64_t>(m.files.size()) + 1 - bad), DType::kI64);
  if (world) world->all_reduce(t, comm::ReduceOp::kMax)->wait();  // the lowest bad index wins
  const int64_t v = t.data<int64_t>()[0];
  MF_CHECK(v == 0, m.path(static_cast<int>(static_cast<int64_t>(m.files.size()) + 1 - v - 1)),
           ": checksum mismatch (the file was corrupted after it was written)");
}

const std::string& CheckpointReader::dir() const { return impl_->dir; }
const TrainingState& CheckpointReader::state() const { return impl_->state; }
const std::map<std::string, int64_t>& CheckpointReader::layout() const { return impl_->layout; }
bool CheckpointReader::has(const std::string& name) const { return impl_->tensors.count(name) > 0; }
std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> r;
  for (const auto& [n, e] : impl_->tensors) r.push_back(n);
  return r;
}
Shape CheckpointReader::shape(const std::string& name) const { return impl_->entry(name).shape; }
DType CheckpointReader::dtype(const std::string& name) const { return impl_->entry(name).dtype; }

namespace {

// Reads runs of a file's elements (dtype `src`) into a contiguous host tensor, runs of the same file
// that continue each other as one read; a dtype change goes through bounded buffers.
class RunReader {
 public:
  RunReader(std::function<const Fd&(int)> fd, DType src, Tensor& out)
      : fd_(std::move(fd)), src_(src), out_(out), dst_(static_cast<char*>(out.raw_data())),
        src_size_(static_cast<int64_t>(dtype_nbytes(src))), dst_size_(static_cast<int64_t>(dtype_nbytes(out.dtype()))) {}
  // Source elements at byte `file_off` of `file` into destination elements [dst_elem, +n).
  void add(int file, int64_t file_off, int64_t dst_elem, int64_t n) {
    if (n_ > 0 && file_ == file && off_ + n_ * src_size_ == file_off && dst_elem_ + n_ == dst_elem) {
      n_ += n;
      return;
    }
    flush();
    file_ = file;
    off_ = file_off;
    dst_elem_ = dst_elem;
    n_ = n;
  }
  void flush() {
    if (n_ == 0) return;
    const Fd& fd = fd_(file_);
    if (src_ == out_.dtype()) {
      fd.read_at(dst_ + dst_elem_ * dst_size_, static_cast<size_t>(n_ * src_size_), off_);
    } else {
      NoGradGuard ng;
      for (int64_t done = 0; done < n_; done += kCastChunkElems) {
        const int64_t k = std::min(kCastChunkElems, n_ - done);
        Tensor tmp = empty({k}, src_);
        fd.read_at(tmp.raw_data(), static_cast<size_t>(k * src_size_), off_ + done * src_size_);
        Tensor c = cast(tmp, out_.dtype());
        std::memcpy(dst_ + (dst_elem_ + done) * dst_size_, c.raw_data(), static_cast<size_t>(k * dst_size_));
      }
    }
    n_ = 0;
  }

 private:
  std::function<const Fd&(int)> fd_;
  DType src_;
  Tensor& out_;
  char* dst_;
  int64_t src_size_, dst_size_;
  int file_ = -1;
  int64_t off_ = 0, dst_elem_ = 0, n_ = 0;
};

}  // namespace

void CheckpointReader::read(const std::string& name, const TensorRegion& region, Tensor& out) const {
  const Impl& m = *impl_;
  const Impl::Entry& e = m.entry(name);
  const std::string what = "checkpoint " + m.dir + ": tensor '" + name + "'";
  check_region(region, e.shape, what);
  MF_CHECK(out.is_contiguous() && out.numel() == region.numel(), what, ": destination ", out.str(),
           " does not hold the region's ", region.numel(), " elements contiguously");
  if (out.device().type != DeviceType::kCPU) {  // a GPU destination: read on the host, then one copy up
    NoGradGuard ng;
    Tensor host = empty(out.shape(), out.dtype());
    read(name, region, host);
    copy_(out, to(host, out.device()));
    return;
  }
  const int64_t src_size = static_cast<int64_t>(dtype_nbytes(e.dtype));
  RunReader reader([&m](int file) -> const Fd& { return m.fd(file); }, e.dtype, out);
  const Geometry gt = geometry(region);
  const int64_t total = region.numel();
  int64_t filled = 0;
  for (int64_t j = 0; j < total;) {
    const int64_t e_box = region.flat_start + j, seg_off = e_box % gt.seg_len;
    const int64_t run = std::min(gt.seg_len - seg_off, total - j);
    const int64_t l0 = (e_box / gt.seg_len) * gt.period + gt.seg_start + seg_off;
    for (const Impl::Piece& p : e.pieces) {
      const Geometry& g = p.g;
      const int64_t fs0 = p.region.flat_start, fl = p.region.numel();
      for (int64_t pos = l0; pos < l0 + run;) {
        const int64_t o = pos / g.period, w = pos % g.period;
        if (o >= g.outer) break;
        if (w < g.seg_start) {
          pos = o * g.period + g.seg_start;
          continue;
        }
        if (w >= g.seg_start + g.seg_len) {
          pos = (o + 1) * g.period + g.seg_start;
          continue;
        }
        const int64_t eb = o * g.seg_len + (w - g.seg_start);
        const int64_t c = std::min(g.seg_start + g.seg_len - w, l0 + run - pos);
        const int64_t a = std::max(eb, fs0), b = std::min(eb + c, fs0 + fl);
        if (a < b) {
          reader.add(p.file, p.offset + (a - fs0) * src_size, j + (pos - l0) + (a - eb), b - a);
          filled += b - a;
        }
        pos += c;
      }
    }
    j += run;
  }
  reader.flush();
  MF_CHECK(filled == total, what, ": its pieces cover ", filled, " of the ", total, " elements requested");
}

Tensor CheckpointReader::read_whole(const std::string& name) const {
  const Shape s = shape(name);
  Tensor t = empty(s, dtype(name));
  read(name, TensorRegion::whole(s), t);
  return t;
}

// ---- one process, whole tensors

void write_checkpoint(const std::string& output_dir, const TrainingState& state, const nn::NamedTensors& model,
                      const nn::NamedTensors& optimizer, int64_t max_to_keep) {
  std::vector<ShardPiece> pieces;
  for (const auto& [prefix, set] : {std::pair{"model/", &model}, std::pair{"optimizer/", &optimizer}})
    for (const auto& [name, t] : *set) pieces.push_back({prefix + name, t, t.shape(), TensorRegion::whole(t.shape())});
  write_checkpoint_shards(nullptr, output_dir, state, "", {}, pieces, max_to_keep);
}

std::optional<LoadedCheckpoint> read_latest_checkpoint(const std::string& output_dir) {
  auto reader = CheckpointReader::open_latest(output_dir);
  if (!reader) return std::nullopt;
  reader->verify(nullptr);
  LoadedCheckpoint out;
  out.dir = reader->dir();
  out.state = reader->state();
  for (const std::string& n : reader->names()) {
    if (n.rfind("model/", 0) == 0) out.model.emplace_back(n.substr(6), reader->read_whole(n));
    if (n.rfind("optimizer/", 0) == 0) out.optimizer.emplace_back(n.substr(10), reader->read_whole(n));
  }
  return out;
}

}  // namespace mf::io
