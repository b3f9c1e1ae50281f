// TensorBoardWriter: TFRecord framing, CRC32C and the few protobuf fields of a scalar Event,
// encoded by hand (wire types: varint 0, 64-bit 1, length-delimited 2, 32-bit 5).
#include "meshflow/train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "meshflow/core/error.h"

namespace mf {

namespace tensorboard {

namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

// Protobuf encoding helpers.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_tag(std::string& out, int field, int wire_type) { put_varint(out, (uint64_t(field) << 3) | wire_type); }
template <class T>
void put_le(std::string& out, T v) {  // little-endian fixed width (x86 and ARM are little-endian)
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_bytes(std::string& out, int field, std::string_view s) {
  put_tag(out, field, 2);
  put_varint(out, s.size());
  out.append(s);
}
void put_double(std::string& out, int field, double v) {
  put_tag(out, field, 1);
  put_le(out, v);
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string encode_file_version_event(double wall_time) {
  std::string ev;
  put_double(ev, 1, wall_time);         // Event.wall_time
  put_bytes(ev, 3, "brain.Event:2");    // Event.file_version
  return ev;
}

std::string encode_scalar_event(const std::string& tag, float value, int64_t step, double wall_time) {
  std::string val;
  put_bytes(val, 1, tag);               // Summary.Value.tag
  put_tag(val, 2, 5);                   // Summary.Value.simple_value (float)
  put_le(val, value);
  std::string summary;
  put_bytes(summary, 1, val);           // Summary.value
  std::string ev;
  put_double(ev, 1, wall_time);         // Event.wall_time
  put_tag(ev, 2, 0);                    // Event.step (int64 varint)
  put_varint(ev, static_cast<uint64_t>(step));
  put_bytes(ev, 5, summary);            // Event.summary
  return ev;
}

}  // namespace tensorboard

namespace {
double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}
}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MF_CHECK(!ec, "cannot create directory ", dir, ": ", ec.message());
  char host[256] = "localhost";
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof(host) - 1] = '\0';
  double wall = now_seconds();
  std::string base = (std::filesystem::path(dir) / ("events.out.tfevents." +
                                                    std::to_string(static_cast<int64_t>(wall)) + "." + host))
                         .string();
  // O_EXCL: two writers started in the same second get distinct files (".1", ".2", ...).
  for (int n = 0; n < 1000 && !file_; ++n) {
    std::string p = n == 0 ? base : base + "." + std::to_string(n);
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      MF_CHECK(errno == EEXIST, "cannot create ", p, ": ", std::strerror(errno));
      continue;
    }
    file_ = ::fdopen(fd, "wb");
    MF_CHECK(file_, "cannot open ", p, ": ", std::strerror(errno));
    path_ = p;
  }
  MF_CHECK(file_, "cannot create an event file named ", base, "*");
  write_record(tensorboard::encode_file_version_event(wall));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  write_record(tensorboard::encode_scalar_event(tag, static_cast<float>(value), step,
                                                wall_time < 0 ? now_seconds() : wall_time));
}

void TensorBoardWriter::write_record(std::string_view data) {
  std::string rec;
  uint64_t len = data.size();
  rec.append(reinterpret_cast<const char*>(&len), 8);
  uint32_t len_crc = tensorboard::masked_crc32c(&len, 8);
  rec.append(reinterpret_cast<const char*>(&len_crc), 4);
  rec.append(data);
  uint32_t data_crc = tensorboard::masked_crc32c(data.data(), data.size());
  rec.append(reinterpret_cast<const char*>(&data_crc), 4);
  MF_CHECK(std::fwrite(rec.data(), 1, rec.size(), file_) == rec.size(), "write to ", path_, " failed: ",
           std::strerror(errno));
}

void TensorBoardWriter::flush() {
  MF_CHECK(std::fflush(file_) == 0, "flush of ", path_, " failed: ", std::strerror(errno));
}

}  // namespace mf
