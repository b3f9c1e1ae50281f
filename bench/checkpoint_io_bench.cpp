// Checkpoint save and load throughput: a GPT-2's parameters and AdamW state (3 f32 tensors per
// parameter) written by every rank in parallel, each rank holding a flat 1/N slice of every
// tensor (ZeRO's layout), then verified (CRC-32 of every shard file, one rank per file) and read
// back under a different split (rank r reads the slices rank N-1-r wrote, so every byte crosses
// shards). Prints GB/s of the whole checkpoint (all ranks together) and the allocator's peak
// above the tensors themselves (the bound on save/load buffers).
// Usage: [mpirun -np N] meshflow_checkpoint_io_bench [layers hidden vocab dir]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/global/sbp.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/ops/ops.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/io/checkpoint.h"

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  const bool launched = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
  std::unique_ptr<mf::comm::MpiRuntime> mpi;
  if (launched) mpi = std::make_unique<mf::comm::MpiRuntime>(&argc, &argv);
  mf::comm::CommPtr world = launched ? mf::comm::mpi_world() : nullptr;
  const int n = world ? world->size() : 1, r = world ? world->rank() : 0;
  mf::models::Gpt2Config c;
  c.num_layers = argc > 1 ? std::atoi(argv[1]) : 12;
  c.hidden_size = argc > 2 ? std::atoi(argv[2]) : 768;
  c.num_attention_heads = 12;
  c.vocab_size = argc > 3 ? std::atoi(argv[3]) : 50257;
  const std::string dir = argc > 4 ? argv[4] : (std::filesystem::temp_directory_path() / "meshflow_ckpt_bench").string();
  mf::models::Gpt2Model model(c);
  model.init_weights(1);
  auto& alloc = mf::allocator_for(mf::cpu_device());
  // Every tensor's flat slice r (parameter, exp_avg, exp_avg_sq), as ZeRO holds them.
  std::vector<mf::io::ShardPiece> mine;
  int64_t total_bytes = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const int64_t numel = p.numel();
    total_bytes += 3 * static_cast<int64_t>(p.nbytes());
    mf::io::TensorRegion region = mf::io::TensorRegion::whole(p.shape());
    region.flat_start = mf::global::split_start(numel, n, r);
    region.flat_length = mf::global::split_size(numel, n, r);
    mf::Tensor flat = mf::reshape(p.detach(), {numel});
    for (const char* slot : {"", ".exp_avg", ".exp_avg_sq"})
      mine.push_back({std::string(*slot ? "optimizer/" : "model/") + name + slot,
                      mf::contiguous(mf::narrow(flat, 0, region.flat_start, region.flat_length)), p.shape(), region});
  }
  if (r == 0) std::filesystem::remove_all(dir);
  if (world) world->barrier()->wait();
  const double gb = static_cast<double>(total_bytes) / 1e9;
  int64_t base = alloc.stats().current_bytes;
  alloc.reset_peak();
  auto t0 = std::chrono::steady_clock::now();
  mf::io::write_checkpoint_shards(world.get(), dir, {}, "", {{"dp", n}}, mine, 1);
  const double save_s = seconds_since(t0);
  const double save_extra_mb = static_cast<double>(alloc.stats().peak_bytes - base) / 1e6;
  auto reader = mf::io::CheckpointReader::open_latest(dir);
  t0 = std::chrono::steady_clock::now();
  reader->verify(world.get());
  if (world) world->barrier()->wait();
  const double verify_s = seconds_since(t0);
  // Read the slices another rank wrote into this rank's tensors.
  const int other = n - 1 - r;
  base = alloc.stats().current_bytes;
  alloc.reset_peak();
  t0 = std::chrono::steady_clock::now();
  for (auto& piece : mine) {
    const int64_t numel = mf::shape_numel(piece.logical);
    mf::io::TensorRegion region = mf::io::TensorRegion::whole(piece.logical);
    region.flat_start = mf::global::split_start(numel, n, other);
    region.flat_length = mf::global::split_size(numel, n, other);
    mf::Tensor into = region.flat_length == piece.data.numel() ? piece.data : mf::empty({region.flat_length});
    reader->read(piece.name, region, into);
  }
  if (world) world->barrier()->wait();
  const double load_s = seconds_since(t0);
  const double load_extra_mb = static_cast<double>(alloc.stats().peak_bytes - base) / 1e6;
  if (r == 0) {
    std::printf("checkpoint of %.3f GB (%lld parameters + AdamW state, f32) on %d rank(s), %s\n", gb,
                static_cast<long long>(model.num_parameters()), n, dir.c_str());
    std::printf("save   %.2f s  %.2f GB/s  (allocator above the tensors: %.3f MB on rank 0)\n", save_s, gb / save_s,
                save_extra_mb);
    std::printf("verify %.2f s  %.2f GB/s  (CRC-32 of every shard file)\n", verify_s, gb / verify_s);
    std::printf("load   %.2f s  %.2f GB/s  (another rank's slices; allocator above the tensors: %.3f MB on rank 0)\n",
                load_s, gb / load_s, load_extra_mb);
    std::filesystem::remove_all(dir);
  }
  return 0;
}
