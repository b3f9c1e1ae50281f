// Whether a run's model state fits this host's memory, checked from the config before any weight
// exists: a model too large for the machine is one error line naming its sizes and what to change,
// not a process the kernel kills while the weights are initialised.
#pragma once
#include <cstdint>
#include <string>

#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/core/host_memory.h"

namespace mf::plan {

// What a process holds of the model beside its activations: training, the parameters, gradients
// and optimizer state; inference (generate, serve, eval), the parameters.
enum class ModelUse { kTraining, kInference };

// "" when one rank's model state under the run's layout (the planner's memory model:
// train.dist.*, ZeRO, the parameter dtype; AdamW's state, none counted for SGD) fits in
// `host.bytes` shared by `ranks_on_host` ranks; otherwise the error line. With pipeline
// parallelism the stages differ: the largest stage must fit the whole host (a lower bound of what
// the host holds). Past 10^5 layers the model is first bounded from one layer of its sizes, so a
// layer count no host holds is refused before its parameters are listed. A config the run itself
// refuses (a mesh that does not divide the ranks) gives "": the run's own check names it.
std::string model_state_fit(const Config& c, int64_t world_size, int64_t ranks_on_host, const HostMemory& host,
                            ModelUse use = ModelUse::kTraining);

// Throws mf::Error with model_state_fit's line for a CPU run (train.dist.device_type=cpu); the
// ranks on this host from the launcher's environment (runtime::local_world_size_from_env).
void check_model_state_fits(const Config& c, const comm::CommPtr& world, ModelUse use = ModelUse::kTraining);

}  // namespace mf::plan
