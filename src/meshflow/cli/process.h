// What the commands share about the process they run in: the job's MPI world when a launcher
// (`mpirun -np N meshflow train ...`, or `srun` with PMIx) started it, the line a rank prints when
// the launcher terminates it, and the communicator a GPU run trains over.
#pragma once

#include <memory>

namespace mf {
class Config;
}
namespace mf::comm {
class Communicator;
using CommPtr = std::shared_ptr<Communicator>;
}  // namespace mf::comm

namespace mf::cli {

// This process's place in a job. Started by an MPI launcher, it joins the job's world (MPI
// finalized when it is destroyed) and installs the SIGTERM handler that prints one line
// "meshflow: error: [rank R/N] terminated by the launcher: ..."; otherwise it runs alone.
class Process {
 public:
  Process();
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // False after printing the error line when MPI fails to start. A build without MPI warns that
  // it runs as a single process.
  bool start(int* argc, char*** argv);
  // The job's world; null in a single process.
  const comm::CommPtr& world() const { return world_; }

 private:
  struct Mpi;  // comm::MpiRuntime in a build with MPI
  comm::CommPtr world_;
  std::unique_ptr<Mpi> mpi_;  // after world_: MPI is finalized before the world is released
};

// A GPU run of several processes talks through NCCL (host tensors through its MPI group). Picks
// this rank's GPU first: the NCCL communicator lives on the current device.
comm::CommPtr device_world(const Config& c, const comm::CommPtr& world);

}  // namespace mf::cli
