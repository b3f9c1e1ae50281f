// The device type of a DeviceMesh (train.dist.device_type): a cpu mesh over MPI as before, a cuda
// mesh refused over a communicator that cannot carry GPU tensors (MPI), before any collective,
// naming the backend — the world communicator still works afterwards.
#include <string>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/global/device_mesh.h"
#include "testing.h"

namespace {

TEST(DeviceMeshDevice, CpuFromConfigAndCudaRefusedOverMpi) {
  mf::comm::CommPtr world = mf::comm::mpi_world();
  mf::Config c;
  const mf::global::DeviceMesh cpu = mf::global::DeviceMesh::from_config(c, *world);
  EXPECT_EQ(cpu.placement()->device_type(), mf::DeviceType::kCPU);
  c.set("train.dist.device_type", "cuda", "test");
  try {
    mf::global::DeviceMesh::from_config(c, *world);
    FAIL() << "a cuda mesh was built over the MPI communicator";
  } catch (const mf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device mesh on cuda: the mpi communicator of group ["), std::string::npos)
        << e.what();
  }
  c.set("train.dist.device_type", "gpu", "test");
  EXPECT_THROW(mf::global::DeviceMesh::from_config(c, *world), mf::Error);
  mf::Tensor t = mf::full({1}, 1.0, mf::DType::kF64);
  world->all_reduce(t)->wait();  // no collective was issued by the failed constructions
  EXPECT_EQ(t.item(), world->size());
}

}  // namespace
