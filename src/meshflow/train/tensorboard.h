// TensorBoardWriter: scalar summaries in TensorBoard's event-file format, with no protobuf or
// TensorFlow dependency. The file `<dir>/events.out.tfevents.<unix time>.<hostname>` is a
// sequence of TFRecords (uint64 length, masked CRC32C of the length, the bytes, masked CRC32C
// of the bytes), each holding one hand-encoded `Event` protobuf: first the file version
// ("brain.Event:2"), then one Event{wall_time, step, summary{value{tag, simple_value}}} per
// scalar.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace mf {

class TensorBoardWriter {
 public:
  // Creates `dir` if needed and a new event file in it (never reusing an existing name).
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();  // flushes and closes
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One scalar point; `wall_time` < 0 means now (seconds since the epoch). Buffered until
  // flush() (or destruction).
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = -1);
  void flush();

  const std::string& path() const { return path_; }

 private:
  void write_record(std::string_view data);

  std::string path_;
  std::FILE* file_ = nullptr;
};

namespace tensorboard {
// CRC32C (Castagnoli, reflected polynomial 0x82f63b78) of `n` bytes, continuing from `crc`.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n);
// The serialised Event protobufs the writer frames.
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(const std::string& tag, float value, int64_t step, double wall_time);
}  // namespace tensorboard

}  // namespace mf
