// The machine's measured peak f32 FMA rate, the denominator of MFU: every OpenMP thread runs
// independent fused multiply-adds on the widest vectors the build targets (AVX-512 here).
#pragma once

namespace mf::train {

// FLOP/s (2 per FMA lane) over all OpenMP threads: the best of 40 short bursts, measured once per
// process (about 0.07 s; longer on a busy machine).
double measured_peak_flops();

}  // namespace mf::train
