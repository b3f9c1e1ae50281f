#include "meshflow/runtime/peak_flops.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mf::runtime {

namespace {

// Runs `iters` rounds of 12 independent FMA chains; returns FLOPs done by this thread.
double fma_burn(int64_t iters, float seed) {
#if defined(__AVX512F__)
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  volatile float sink = lanes[0] + lanes[15];
  (void)sink;
  return static_cast<double>(iters) * 12 * 16 * 2;
#else
  float a[12][8];
  for (int i = 0; i < 12; ++i)
    for (int l = 0; l < 8; ++l) a[i][l] = seed + static_cast<float>(i);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i)
#pragma omp simd
      for (int l = 0; l < 8; ++l) a[i][l] = a[i][l] * 0.999999f + 1e-7f;
  volatile float sink = a[0][0];
  (void)sink;
  return static_cast<double>(iters) * 12 * 8 * 2;
#endif
}

// The best of many short bursts (each about 1.7 ms on 2 AVX-512 cores; 40 of them, about 0.07 s in
// all, the work of the 5 long bursts this replaced): a process sharing a core takes whole scheduler
// slices, so some bursts run alone. Five bursts of 14 ms read half the peak with one busy process
// beside them (measured: 96-122 against 236 GFLOP/s on 2 cores), and an MFU over such a peak read
// above 100%.
double measure() {
  double best = 0.0;
  for (int rep = 0; rep < 40; ++rep) {
    double flops = 0.0;
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : flops)
    flops += fma_burn(500'000, static_cast<float>(omp_get_thread_num()));
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops / dt);
  }
  return best;
}

__attribute__((format(printf, 1, 2))) std::string printf_string(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// The clock in a model name ("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"), 0 when none.
double ghz_in_name(const std::string& name) {
  const size_t at = name.find('@');
  if (at == std::string::npos) return 0;
  char* end = nullptr;
  const double v = std::strtod(name.c_str() + at + 1, &end);
  return end && std::string_view(end).find("GHz") != std::string_view::npos && v > 0 ? v : 0;
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

double measured_peak_flops() {
  static std::once_flag once;
  static double peak = 0.0;
  std::call_once(once, [] { peak = measure(); });
  return peak;
}

double measure_peak_flops_now() { return measure(); }

CpuSpec parse_cpu_spec(const std::string& cpuinfo, double cpufreq_max_khz) {
  CpuSpec c;
  std::set<std::string> flags;
  double max_mhz = 0;
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "processor") {
      ++c.cores;
    } else if (key == "model name" && c.model.empty()) {
      c.model = value;
    } else if (key == "cpu MHz") {
      max_mhz = std::max(max_mhz, std::strtod(value.c_str(), nullptr));
    } else if ((key == "flags" || key == "Features") && flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) flags.insert(w);
    }
  }
  c.max_ghz = cpufreq_max_khz > 0 ? cpufreq_max_khz / 1e6 : ghz_in_name(c.model) > 0 ? ghz_in_name(c.model) : max_mhz / 1e3;
  const auto has = [&](const char* f) { return flags.count(f) > 0; };
  if (has("avx512f")) {
    c.isa = "AVX-512";
    c.f32_lanes = 16;
  } else if (has("avx2") || has("avx")) {
    c.isa = has("avx2") ? "AVX2" : "AVX";
    c.f32_lanes = 8;
  } else if (has("asimd")) {
    c.isa = "NEON";
    c.f32_lanes = 4;
  } else if (has("sse")) {
    c.isa = "SSE";
    c.f32_lanes = 4;
  }
  c.fma = has("fma") || has("avx512f") || has("asimd");
  return c;
}

CpuSpec this_cpu() {
  const std::string khz = read_small_file("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  CpuSpec c = parse_cpu_spec(read_small_file("/proc/cpuinfo"), khz.empty() ? 0.0 : std::strtod(khz.c_str(), nullptr));
  if (c.cores == 0) c.cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  return c;
}

double nominal_flops_per_cycle(const CpuSpec& cpu) {
  return static_cast<double>(cpu.f32_lanes) * (cpu.fma ? 2.0 : 1.0) * 2.0;
}

double nominal_peak_flops(const CpuSpec& cpu, int64_t threads) {
  const int64_t cores = cpu.cores > 0 ? std::min(threads, cpu.cores) : threads;
  return static_cast<double>(std::max<int64_t>(cores, 0)) * cpu.max_ghz * 1e9 * nominal_flops_per_cycle(cpu);
}

PeakFlops choose_cpu_peak(const CpuSpec& cpu, int64_t threads, double measured) {
  const double nominal = nominal_peak_flops(cpu, threads);
  const int64_t cores = cpu.cores > 0 ? std::min(threads, cpu.cores) : threads;
  if (nominal > 0 && nominal >= measured)
    return {nominal, printf_string("nominal: %lld cores x %.2f GHz x %g f32 FLOPs/cycle (%s%s, 2 units); measured %.1f GFLOP/s",
                            static_cast<long long>(cores), cpu.max_ghz, nominal_flops_per_cycle(cpu), cpu.isa,
                            cpu.fma ? " FMA" : "", measured / 1e9)};
  if (nominal > 0)
    return {measured, printf_string("measured FMA rate, above the nominal %.1f GFLOP/s (%lld cores x %.2f GHz: the clock runs "
                             "faster than the one known)", nominal / 1e9, static_cast<long long>(cores), cpu.max_ghz)};
  return {measured, printf_string("measured FMA rate; no nominal peak (%s)",
                           cpu.max_ghz > 0 ? "the CPU's vector unit is unknown" : "the CPU's clock is unknown")};
}

PeakFlops cpu_peak_flops() { return choose_cpu_peak(this_cpu(), omp_get_max_threads(), measured_peak_flops()); }

std::string PeakTracker::observe(double achieved, const std::function<double()>& remeasure) {
  // An unknown peak (0: a GPU not in the table) stays unknown: MFU is then reported 0.
  if (!(peak_.flops > 0) || !(achieved > peak_.flops)) return "";
  const double before = peak_.flops;
  const double fresh = remeasure ? remeasure() : 0.0;
  if (fresh >= achieved) {
    peak_ = {fresh, printf_string("re-measured FMA rate, after a step beat the previous peak of %.1f GFLOP/s",
                                  before / 1e9)};
  } else {
    // The machine did `achieved`: its peak is at least that, whatever a measurement reads.
    peak_ = {achieved, printf_string("the fastest step's rate: a step beat the %.1f GFLOP/s peak in use and a fresh "
                              "measurement read %.1f GFLOP/s", before / 1e9, fresh / 1e9)};
  }
  return printf_string("peak raised from %.1f to %.1f GFLOP/s: a step did %.1f GFLOP/s, more than the peak in use, so that "
                "peak was wrong; MFU is over the new one (%s)", before / 1e9, peak_.flops / 1e9, achieved / 1e9,
                peak_.source.c_str());
}

}  // namespace mf::runtime
