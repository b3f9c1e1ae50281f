// `meshflow devices`: the build's backends and the GPUs this process sees. The first line is
// machine-readable ("cuda_devices N"); scripts skip GPU tests on 0.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "meshflow/cli/commands.h"
#include "meshflow/core/device.h"
#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/device_info.h"
#endif

namespace mf::cli {
namespace {

class DevicesCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    return app.add_subcommand("devices", "Print the CUDA devices this process sees (first line: cuda_devices N)");
  }

  int run(const comm::CommPtr&) override {
    const int n = mf::cuda_device_count();
    std::printf("cuda_devices %d\n", n);
    std::printf("cuda backend: %s\n", mf::cuda_backend_compiled() ? "compiled" : "not compiled (configure with the CUDA toolkit)");
#if MESHFLOW_WITH_CUDA
    for (int i = 0; i < n; ++i) {
      const mf::cuda::DeviceInfo d = mf::cuda::device_info(i);
      std::printf("cuda:%d %s, sm_%d%d, %d SMs, %.1f GiB\n", i, d.name.c_str(), d.major, d.minor, d.multiprocessors,
                  static_cast<double>(d.total_bytes) / (1024.0 * 1024.0 * 1024.0));
    }
#endif
#if MESHFLOW_WITH_NCCL
    std::printf("nccl: compiled\n");
#else
    std::printf("nccl: not compiled\n");
#endif
    return 0;
  }
};

}  // namespace

std::unique_ptr<Command> devices_command() { return std::make_unique<DevicesCommand>(); }

}  // namespace mf::cli
