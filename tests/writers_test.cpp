// Run output writers: metrics.jsonl lines (loss precision, flushing, resume), TensorBoard event
// files read back by an independent reader (framing, both CRCs, protobuf fields), and the
// progress line's formatting and ETA.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/train/metrics_writer.h"
#include "meshflow/train/progress.h"
#include "meshflow/train/tensorboard.h"
#include "testing.h"

namespace {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "mf_writers_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// ---- metrics.jsonl ----

TEST(MetricsWriter, WritesOneObjectPerLineWithNineDigitLoss) {
  TempDir d;
  std::string dir = d.path + "/run/a";  // created on demand
  {
    mf::MetricsWriter w(dir);
    EXPECT_EQ(w.path(), dir + "/metrics.jsonl");
    w.write({{"step", 1}, {"loss", 3.14159265358979}, {"lr", 6e-4}, {"tag", "train"}});
    // Flushed per line: readable before the writer closes.
    ASSERT_EQ(lines_of(w.path()).size(), 1u);
    w.write({{"step", 2}, {"loss", 10.0}, {"grad_norm", 0.1}, {"eval", {{"loss", 2.123456789012}}}});
    w.write({{"step", 3}, {"loss", std::nan("")}});
  }
  std::vector<std::string> l = lines_of(dir + "/metrics.jsonl");
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], R"({"step":1,"loss":3.14159265,"lr":0.0006,"tag":"train"})");
  EXPECT_EQ(l[1], R"({"step":2,"loss":10,"grad_norm":0.1,"eval":{"loss":2.123456789012}})");
  EXPECT_EQ(l[2], R"({"step":3,"loss":null})");
  for (const auto& s : l) EXPECT_TRUE(nlohmann::json::parse(s).is_object());
  MFT_EXPECT_ERROR(mf::MetricsWriter::format_line(nlohmann::ordered_json::array({1, 2})), "must be a JSON object");
}

TEST(MetricsWriter, FreshRunTruncatesResumeAppendsAfterDroppingLaterSteps) {
  TempDir d;
  {
    mf::MetricsWriter w(d.path);
    for (int s = 1; s <= 5; ++s) w.write({{"step", s}, {"loss", 1.0 / s}});
  }
  // A crash mid-line leaves a torn tail.
  { std::ofstream(d.path + "/metrics.jsonl", std::ios::app) << "{\"step\":6,\"lo"; }
  {
    mf::MetricsWriter w(d.path, int64_t{3});  // resumed from the step-3 checkpoint
    w.write({{"step", 4}, {"loss", 0.2}});
  }
  std::vector<std::string> l = lines_of(d.path + "/metrics.jsonl");
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(nlohmann::json::parse(l[2])["step"], 3);
  EXPECT_EQ(l[3], R"({"step":4,"loss":0.2})");
  { mf::MetricsWriter fresh(d.path); }
  EXPECT_TRUE(lines_of(d.path + "/metrics.jsonl").empty());
  // Resuming with no file yet just creates it.
  TempDir e;
  { mf::MetricsWriter w(e.path, int64_t{10}); w.write({{"step", 11}}); }
  EXPECT_EQ(lines_of(e.path + "/metrics.jsonl").size(), 1u);
}

// ---- TensorBoard: an independent reader ----

uint32_t bitwise_crc32c(const unsigned char* p, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}
uint32_t masked(const unsigned char* p, size_t n) {
  uint32_t c = bitwise_crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

struct Reader {  // minimal protobuf field reader
  const unsigned char* p;
  const unsigned char* end;
  bool done() const { return p >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      EXPECT_LT(p, end);
      if (p >= end) return v;
      unsigned char b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  template <class T>
  T fixed() {
    T v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  std::string bytes() {
    uint64_t n = varint();
    std::string s(reinterpret_cast<const char*>(p), n);
    p += n;
    return s;
  }
};

struct Event {
  double wall_time = -1;
  int64_t step = -1;
  std::string file_version, tag;
  float value = NAN;
};

Event decode_event(const std::string& data) {
  Event ev;
  Reader r{reinterpret_cast<const unsigned char*>(data.data()),
           reinterpret_cast<const unsigned char*>(data.data()) + data.size()};
  while (!r.done()) {
    uint64_t key = r.varint();
    int field = int(key >> 3), wire = int(key & 7);
    if (field == 1 && wire == 1) ev.wall_time = r.fixed<double>();
    else if (field == 2 && wire == 0) ev.step = int64_t(r.varint());
    else if (field == 3 && wire == 2) ev.file_version = r.bytes();
    else if (field == 5 && wire == 2) {
      std::string summary = r.bytes();
      Reader s{reinterpret_cast<const unsigned char*>(summary.data()),
               reinterpret_cast<const unsigned char*>(summary.data()) + summary.size()};
      while (!s.done()) {
        uint64_t k = s.varint();
        EXPECT_EQ(k, (1u << 3) | 2u);  // Summary.value
        std::string value = s.bytes();
        Reader v{reinterpret_cast<const unsigned char*>(value.data()),
                 reinterpret_cast<const unsigned char*>(value.data()) + value.size()};
        while (!v.done()) {
          uint64_t vk = v.varint();
          if (vk == ((1u << 3) | 2u)) ev.tag = v.bytes();
          else if (vk == ((2u << 3) | 5u)) ev.value = v.fixed<float>();
          else ADD_FAILURE() << "unexpected Summary.Value field key " << vk;
        }
      }
    } else {
      ADD_FAILURE() << "unexpected Event field " << field << " wire type " << wire;
      break;
    }
  }
  return ev;
}

std::vector<Event> read_events(const std::string& path) {
  std::string f = mf::read_file(path);
  const auto* p = reinterpret_cast<const unsigned char*>(f.data());
  size_t off = 0;
  std::vector<Event> out;
  while (off < f.size()) {
    EXPECT_GE(f.size() - off, 12u);
    uint64_t len;
    std::memcpy(&len, p + off, 8);
    uint32_t len_crc, data_crc;
    std::memcpy(&len_crc, p + off + 8, 4);
    EXPECT_EQ(len_crc, masked(p + off, 8)) << "length CRC at " << off;
    EXPECT_GE(f.size() - off, 16 + len);
    std::memcpy(&data_crc, p + off + 12 + len, 4);
    EXPECT_EQ(data_crc, masked(p + off + 12, len)) << "data CRC at " << off;
    out.push_back(decode_event(f.substr(off + 12, len)));
    off += 16 + len;
  }
  return out;
}

TEST(TensorBoard, Crc32cMatchesKnownValues) {
  // The CRC32C check value ("123456789") and the iSCSI test vector (32 zero bytes).
  EXPECT_EQ(mf::tensorboard::crc32c("123456789", 9), 0xe3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(mf::tensorboard::crc32c(zeros.data(), 32), 0x8a9136aau);
  std::string s = "meshflow event record";
  EXPECT_EQ(mf::tensorboard::crc32c(s.data(), s.size()), bitwise_crc32c((const unsigned char*)s.data(), s.size()));
  // Continuation: crc(a + b) == crc(b, crc(a)).
  EXPECT_EQ(mf::tensorboard::crc32c(s.data() + 5, s.size() - 5, mf::tensorboard::crc32c(s.data(), 5)),
            mf::tensorboard::crc32c(s.data(), s.size()));
}

TEST(TensorBoard, EventFileReadsBack) {
  TempDir d;
  std::string dir = d.path + "/tb";
  std::string path, path2;
  {
    mf::TensorBoardWriter w(dir);
    path = w.path();
    mf::TensorBoardWriter w2(dir);  // same second: a distinct file
    path2 = w2.path();
    w.add_scalar("train/loss", 3.25, 10, 1700000000.5);
    w.add_scalar("train/lr", 6e-4, 20, 1700000001.25);
    w.add_scalar("eval/loss", -1.5, 1234567890123LL);
    w.add_scalar("x", 0.1, -1, 5.0);
    w.flush();
  }
  EXPECT_NE(path, path2);
  std::string name = fs::path(path).filename().string();
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find(std::string(".") + host), std::string::npos) << name;

  std::vector<Event> ev = read_events(path);
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].file_version, "brain.Event:2");
  EXPECT_GT(ev[0].wall_time, 1.6e9);
  EXPECT_EQ(ev[1].tag, "train/loss");
  EXPECT_EQ(ev[1].value, 3.25f);
  EXPECT_EQ(ev[1].step, 10);
  EXPECT_EQ(ev[1].wall_time, 1700000000.5);
  EXPECT_EQ(ev[2].tag, "train/lr");
  EXPECT_EQ(ev[2].value, 6e-4f);
  EXPECT_EQ(ev[2].step, 20);
  EXPECT_EQ(ev[3].tag, "eval/loss");
  EXPECT_EQ(ev[3].value, -1.5f);
  EXPECT_EQ(ev[3].step, 1234567890123LL);
  EXPECT_GT(ev[3].wall_time, 1.6e9);  // now
  EXPECT_EQ(ev[4].step, -1);
  EXPECT_EQ(ev[4].value, 0.1f);
  EXPECT_EQ(read_events(path2).size(), 1u);
}

// ---- progress line ----

TEST(ProgressBar, FormatsDurationsAndRates) {
  EXPECT_EQ(mf::format_duration(0), "0s");
  EXPECT_EQ(mf::format_duration(45.2), "45s");
  EXPECT_EQ(mf::format_duration(192), "3m12s");
  EXPECT_EQ(mf::format_duration(3600), "1h00m");
  EXPECT_EQ(mf::format_duration(3725), "1h02m");
  EXPECT_EQ(mf::format_duration(183600), "2d03h");
  EXPECT_EQ(mf::format_duration(-1), "--");
  EXPECT_EQ(mf::format_duration(NAN), "--");
  EXPECT_EQ(mf::format_rate(2.5), "2.5");
  EXPECT_EQ(mf::format_rate(950), "950");
  EXPECT_EQ(mf::format_rate(999.7), "1.0k");
  EXPECT_EQ(mf::format_rate(1234), "1.2k");
  EXPECT_EQ(mf::format_rate(12345), "12.3k");
  EXPECT_EQ(mf::format_rate(1.5e6), "1.5M");
  EXPECT_EQ(mf::format_rate(3e9), "3.0G");
  EXPECT_EQ(mf::format_progress_line(120, 500, 3.2149, 1234, 192, 10),
            "[##........] 120/500 24% | loss 3.21 | 1.2k tok/s | ETA 3m12s");
  EXPECT_EQ(mf::format_progress_line(500, 500, 1.0, 50, NAN, 4), "[####] 500/500 100% | loss 1.00 | 50 tok/s | ETA --");
}

TEST(ProgressBar, EtaFromMeanStepTimeAndTerminalOnly) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    mf::ProgressBar bar(100, f);
    EXPECT_FALSE(bar.enabled());  // a file is not a terminal: nothing is drawn
    bar.update_at(10, 3.0, 1000, 50.0);
    EXPECT_TRUE(std::isnan(bar.eta_seconds()));
    bar.update_at(20, 2.5, 1000, 70.0);  // 2 s per step, 80 steps left
    EXPECT_DOUBLE_EQ(bar.eta_seconds(), 160.0);
    bar.update_at(30, 2.0, 1000, 80.0);  // mean 1.5 s per step since the first update
    EXPECT_DOUBLE_EQ(bar.eta_seconds(), 105.0);
    EXPECT_NE(bar.last_line().find("30/100 30% | loss 2.00 | 1.0k tok/s | ETA 1m45s"), std::string::npos)
        << bar.last_line();
  }
  EXPECT_EQ(std::ftell(f), 0L);

  std::rewind(f);
  {
    mf::ProgressBar bar(4, f);
    bar.set_enabled(true);
    bar.update_at(1, 9.0, 10, 0.0);
    bar.update_at(2, 8.0, 10, 0.05);  // within 0.1 s of the last draw: skipped
    bar.update_at(3, 7.0, 10, 1.0);
    bar.update_at(4, 6.0, 10, 1.01);  // the last step always draws
  }
  long n = std::ftell(f);
  std::rewind(f);
  std::string out(size_t(n), '\0');
  ASSERT_EQ(std::fread(out.data(), 1, out.size(), f), out.size());
  std::fclose(f);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 3) << out;
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(out.find("2/4"), std::string::npos);
  EXPECT_NE(out.find("4/4 100% | loss 6.00"), std::string::npos) << out;
}

}  // namespace
