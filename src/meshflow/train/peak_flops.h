// The machine's measured peak f32 FMA rate, the denominator of MFU: every OpenMP thread runs
// independent fused multiply-adds on the widest vectors the build targets (AVX-512 here).
#pragma once

namespace mf::train {

// FLOP/s (2 per FMA lane) over all OpenMP threads; measured once per process (~0.1 s).
double measured_peak_flops();

}  // namespace mf::train
