// The denominator of MFU on a CPU: a peak that load on the machine cannot lower. The measured FMA
// rate (every OpenMP thread running independent fused multiply-adds) reads low when other
// processes share the cores, and an MFU over it read above 100%; the nominal peak from the CPU's
// description (cores x clock x f32 FLOPs per cycle of its widest FMA vectors) does not move. The
// peak in use is the larger of the two, and a run raises it whenever a step does more FLOP/s
// than it (PeakTracker): MFU never exceeds 100%, and the log says which peak it is over.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace mf::runtime {

// FLOP/s (2 per FMA lane) over all OpenMP threads: the best of 40 short bursts, measured once per
// process (about 0.07 s; longer on a busy machine).
double measured_peak_flops();
// The same measurement taken afresh (not the process's first).
double measure_peak_flops_now();

// What /proc/cpuinfo (and cpufreq) say of the CPU.
struct CpuSpec {
  std::string model;       // "model name"
  int64_t cores = 0;       // logical CPUs ("processor" entries)
  double max_ghz = 0;      // the highest clock known (0: none)
  const char* isa = "";    // the widest f32 FMA vectors: "AVX-512", "AVX2", "AVX", "SSE", "NEON", "" (unknown)
  int64_t f32_lanes = 0;   // f32 lanes of those vectors
  bool fma = false;        // fused multiply-add (2 FLOPs a lane per instruction)
};

// Parses /proc/cpuinfo's text. The clock: `cpufreq_max_khz` (cpufreq's cpuinfo_max_freq) when
// positive, else the model name's "@ 2.60GHz", else the largest "cpu MHz" (the current clock of
// each core; a virtual machine's nominal one).
CpuSpec parse_cpu_spec(const std::string& cpuinfo, double cpufreq_max_khz);
// This machine's (/proc/cpuinfo, /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq).
CpuSpec this_cpu();

// f32 FLOPs per cycle of one core: lanes x 2 (an FMA multiplies and adds) x 2 FMA units (the
// most an x86 or Arm core has), so that the figure bounds what the core can do; 0 when unknown.
double nominal_flops_per_cycle(const CpuSpec& cpu);
// Nominal peak FLOP/s of `threads` threads (at most one per core); 0 when the clock or the ISA is
// unknown.
double nominal_peak_flops(const CpuSpec& cpu, int64_t threads);

struct PeakFlops {
  double flops = 0;     // FLOP/s
  std::string source;   // how it was found, for the log
};

// The larger of the nominal and the measured peak, saying which and showing the other.
PeakFlops choose_cpu_peak(const CpuSpec& cpu, int64_t threads, double measured);
// This process's CPU peak: choose_cpu_peak over this_cpu(), its OpenMP threads and
// measured_peak_flops().
PeakFlops cpu_peak_flops();

// The peak a run's MFU is over. A rate above it proves it wrong: observe() raises it to a fresh
// measurement, or to the rate itself when the measurement reads lower still.
class PeakTracker {
 public:
  PeakTracker() = default;
  explicit PeakTracker(PeakFlops peak) : peak_(std::move(peak)) {}
  double flops() const { return peak_.flops; }
  const std::string& source() const { return peak_.source; }
  // `achieved`: FLOP/s a step did; `remeasure`: a fresh peak measurement of the same devices.
  // Returns a line for the log when the peak was raised, else "".
  std::string observe(double achieved, const std::function<double()>& remeasure);
  // achieved / peak (0 when the peak is unknown): at most 1 once observe() has seen `achieved`.
  double mfu(double achieved) const { return peak_.flops > 0 ? achieved / peak_.flops : 0.0; }

 private:
  PeakFlops peak_;
};

}  // namespace mf::runtime
