// train.dist.device_type -> the run's device; the GPU index from the local rank.
#include "meshflow/runtime/device_select.h"

#include <cstdlib>
#include <string>

#include "meshflow/core/error.h"
#include "meshflow/global/device_mesh.h"

#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/device_info.h"
#endif

namespace mf::runtime {

int local_rank_from_env(std::string* source) {
  for (const char* var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    MF_CHECK(end != nullptr && *end == '\0' && r >= 0 && r < (1 << 20), "train.dist.device_type=cuda: ", var, "='", v,
             "' is not a local rank (a non-negative integer)");
    if (source) *source = var;
    return static_cast<int>(r);
  }
  if (source) source->clear();
  return 0;
}

int local_world_size_from_env() {
  for (const char* var : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    MF_CHECK(end != nullptr && *end == '\0' && n > 0 && n < (1 << 20), var, "='", v,
             "' is not a number of processes on this node (a positive integer)");
    return static_cast<int>(n);
  }
  return 1;
}

RunDevice select_run_device(const Config& c) {
  if (global::device_type_from_config(c) == DeviceType::kCPU) return {cpu_device(), "cpu"};
  MF_CHECK(cuda_backend_compiled(),
           "train.dist.device_type=cuda: this build has no CUDA backend (configure with the CUDA toolkit)");
  const int visible = cuda_device_count();
  MF_CHECK(visible > 0, "train.dist.device_type=cuda: no CUDA device is visible on this machine");
  std::string source;
  const int local = local_rank_from_env(&source);
  const std::string from = source.empty() ? std::string("no local rank in the environment") : source + "=" + std::to_string(local);
  // One visible GPU: the launcher bound this rank to it (srun --gpus-per-task=1, a per-rank
  // CUDA_VISIBLE_DEVICES), whatever its local rank.
  const int index = visible == 1 ? 0 : local;
  MF_CHECK(index < visible, "train.dist.device_type=cuda: local rank ", local, " (", from, ") but only ", visible,
           " CUDA device(s) are visible (check CUDA_VISIBLE_DEVICES and the processes per node)");
  RunDevice d{cuda_device(index), ""};
#if MESHFLOW_WITH_CUDA
  cuda::use_device(index);
  d.how = detail::cat("cuda:", index, " (", cuda::device_info(index).name, "; ", from, ", ", visible, " visible)");
#endif
  return d;
}

}  // namespace mf::runtime
