// `meshflow profile`: this machine's hardware profile for the planner, measured — every rank at
// once, so that ranks sharing the machine measure what each gets: the FMA peak, GEMM rates by size
// (fit: rate = G x / (x + h) for a call of x FLOPs), attention's rate, the memory bandwidth, the
// host's time per op, and each collective (all_reduce, reduce_scatter, all_gather; send_recv
// between neighbours) per group size through the real communicator, fitted to alpha + beta x bytes.
// With more threads than cores, each rate is scaled to a rank's share of the cores. Plan with the
// same number of processes the profile was measured with.
#pragma once
#include <string>

#include "meshflow/comm/communicator.h"
#include "meshflow/plan/hardware.h"

namespace mf::plan {

struct ProfileOptions {
  std::string output = "profile.json";
  int repeats = 5;  // per measurement: the median counts
  // A published profile's name (a100-80gb, h100-80gb): write it, measure nothing — a file to edit
  // for a cluster or runtime the published figures do not describe.
  std::string published;
};

// Collective over `world` (null: one process). Rank 0 writes the profile (atomically) and returns it.
HardwareProfile measure_profile(const comm::CommPtr& world, const ProfileOptions& o, std::FILE* out);

}  // namespace mf::plan
