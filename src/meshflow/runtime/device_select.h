// The run's device (train.dist.device_type, LiBai's key): cpu, or cuda with the GPU chosen by
// the process's local rank on its node. Checked before any work, with one-line errors when the
// build has no CUDA backend or the machine no (or too few) GPUs.
#pragma once
#include <string>

#include "meshflow/config/config.h"
#include "meshflow/core/device.h"

namespace mf::runtime {

struct RunDevice {
  Device device;
  std::string how;  // "cpu", or "cuda:1 (LOCAL_RANK=1, 8 visible)" for the log
};

// The local rank from the launcher's environment: LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK,
// else MPI_LOCALRANKID, else SLURM_LOCALID, else 0. `source` gets the variable's name ("" for the
// default). Throws when the variable is not a non-negative integer.
int local_rank_from_env(std::string* source = nullptr);
// The processes of the job on this node: LOCAL_WORLD_SIZE, else OMPI_COMM_WORLD_LOCAL_SIZE, else
// MPI_LOCALNRANKS, else 1. Throws when the variable is not a positive integer.
int local_world_size_from_env();

// Resolves train.dist.device_type (cpu | cuda) and, for cuda, checks the backend and the GPU count
// and makes the chosen GPU this thread's current device. Throws mf::Error with one line.
RunDevice select_run_device(const Config& c);

}  // namespace mf::runtime
