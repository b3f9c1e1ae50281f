#include "meshflow/cli/process.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "meshflow/comm/watchdog.h"
#include "meshflow/config/config.h"
#include "meshflow/core/device.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/runtime/device_select.h"
#if MESHFLOW_WITH_MPI
#include "meshflow/comm/mpi/mpi_communicator.h"
#endif
#if MESHFLOW_WITH_NCCL
#include "meshflow/comm/nccl/nccl_communicator.h"
#endif

namespace mf::cli {

namespace {

// True when a launcher started this process as one rank of a job.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

char g_term_line[160];
size_t g_term_len = 0;

extern "C" void on_terminate(int) {
  // A running failure watchdog explains the termination itself (names the rank that died).
  if (mf::comm::Watchdog::forward_signal(SIGTERM)) return;
  // Async-signal-safe: a prepared line, write(2), _exit.
  ssize_t n = write(STDERR_FILENO, g_term_line, g_term_len);
  (void)n;
  _exit(128 + SIGTERM);
}

void install_termination_handler(int rank, int size) {
  std::snprintf(g_term_line, sizeof g_term_line,
                "meshflow: error: [rank %d/%d] terminated by the launcher: another rank of the job failed or died "
                "(see its message above)\n",
                rank, size);
  g_term_len = std::strlen(g_term_line);
  struct sigaction sa {};
  sa.sa_handler = on_terminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

struct Process::Mpi {
#if MESHFLOW_WITH_MPI
  Mpi(int* argc, char*** argv) : runtime(argc, argv) {}
  mf::comm::MpiRuntime runtime;
#endif
};

Process::Process() = default;
Process::~Process() = default;

bool Process::start(int* argc, char*** argv) {
#if MESHFLOW_WITH_MPI
  if (launched_by_mpi()) {
    try {
      mpi_ = std::make_unique<Mpi>(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "meshflow: error: %s\n", e.what());
      return false;
    }
    world_ = mpi_->runtime.world();
    install_termination_handler(world_->rank(), world_->size());
  }
#else
  (void)argc;
  (void)argv;
  if (launched_by_mpi())
    std::fprintf(stderr, "meshflow: warning: started by an MPI launcher, but this build has no MPI "
                         "(configure with -DMESHFLOW_WITH_MPI=ON); running as a single process\n");
#endif
  return true;
}

mf::comm::CommPtr device_world(const mf::Config& c, const mf::comm::CommPtr& world) {
  if (!world || world->size() == 1 || mf::global::device_type_from_config(c) != mf::DeviceType::kCUDA) return world;
  mf::runtime::select_run_device(c);  // fails with the one-line device errors
#if MESHFLOW_WITH_NCCL
  auto mpi = std::dynamic_pointer_cast<mf::comm::MpiCommunicator>(world);
  MF_CHECK(mpi != nullptr, "train.dist.device_type=cuda: the world communicator is not MPI's");
  return mf::comm::NcclCommunicator::create(mpi);
#else
  return world;  // run_training refuses it with its own message
#endif
}

}  // namespace mf::cli
