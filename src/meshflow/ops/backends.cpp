// The backends this build has and the devices the machine offers (declared in core/device.h,
// defined here, at the layer that knows the backends).
#include "meshflow/core/device.h"

#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/runtime.h"
#endif

namespace mf {

#if MESHFLOW_WITH_CUDA
bool cuda_backend_compiled() { return true; }
int cuda_device_count() { return cuda::device_count(); }
#else
bool cuda_backend_compiled() { return false; }
int cuda_device_count() { return 0; }
#endif

}  // namespace mf
