// ZeRO's memory on the world as the data-parallel group: per rank, the model-state bytes the
// allocator holds after a training step follow the ZeRO paper's formulas for Ψ parameters and
// N ranks (f32 with AdamW: stage 0 16Ψ, 1 4Ψ + 4Ψ + 8Ψ/N, 2 4Ψ + 12Ψ/N, 3 16Ψ/N), within 5%,
// and the trainer's memory report splits them the same way; with bf16 and f32 master weights the
// K = 12 forms; every stage reports the gradient reduction's exposed time (StepStats). Saving
// and loading a checkpoint allocate nothing beyond the state.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "meshflow/models/gpt2/model.h"
#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/train/synthetic_batches.h"
#include "meshflow/train/trainer.h"
#include "testing.h"

namespace {

using mf::DType;
using mf::Tensor;

struct Bytes {
  double total = 0;  // allocator: bytes held after the step, over those held before the model
  mf::train::MemoryReport report;
  double psi = 0;    // parameters of the model
  double exposed_comm_s = -1;  // the step's gradient reduction not hidden behind backward
};

class LastStep final : public mf::train::HookBase {
 public:
  explicit LastStep(Bytes* out) : out_(out) {}
  void after_step(mf::train::Trainer&, const mf::train::StepStats& s) override {
    out_->report = s.memory;
    out_->exposed_comm_s = s.exposed_comm_s;
  }

 private:
  Bytes* out_;
};

struct Peaks {
  int64_t save = 0, load = 0;  // allocator peak above the bytes held before, bytes
  double psi = 0;
};

Bytes model_state_bytes(int stage, Peaks* checkpoint_peaks = nullptr, DType dtype = DType::kF32) {
  mf::comm::CommPtr world = mf::comm::mpi_world();
  mf::Allocator& alloc = mf::allocator_for(mf::cpu_device());
  Bytes b;
  {
    Tensor id = mf::full({1}, world->rank() == 0 ? static_cast<double>(getpid()) : 0.0, mf::DType::kI64);
    world->broadcast(id, 0)->wait();
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("meshflow_zero_mem_" + std::to_string(stage) + "_" + std::to_string(id.data<int64_t>()[0])))
                                .string();
    const int64_t base = alloc.stats().current_bytes;
    mf::models::Gpt2Config c;
    c.vocab_size = 96;
    c.max_seq_length = 8;
    c.hidden_size = 64;
    c.num_layers = 2;
    c.num_attention_heads = 4;
    c.dtype = dtype;  // bf16: mixed precision, f32 master weights in the optimizer
    auto model = std::make_shared<mf::models::Gpt2Model>(c);
    model->init_weights(5);
    b.psi = static_cast<double>(model->num_parameters());
    mf::runtime::TrainOptions o;
    o.output_dir = dir;
    o.train_iter = 1;
    o.micro_batch = 1;
    o.seq_length = 8;
    o.eval_enabled = false;
    o.zero_stage = stage;
    mf::train::Trainer t(o, model, std::make_unique<mf::train::SyntheticBatchSource>(c.vocab_size, 8),
                         [&] { return std::make_unique<mf::train::SyntheticBatchSource>(c.vocab_size, 8); });
    t.add_hook(std::make_unique<LastStep>(&b));
    t.set_parallel(world, world);
    t.train();
    b.total = static_cast<double>(alloc.stats().current_bytes - base);
    if (checkpoint_peaks) {  // a save writes this rank's tensors themselves, a load reads into them
      int64_t before = alloc.stats().current_bytes;
      alloc.reset_peak();
      t.save_checkpoint();
      checkpoint_peaks->save = alloc.stats().peak_bytes - before;
      before = alloc.stats().current_bytes;
      alloc.reset_peak();
      EXPECT_TRUE(t.load_latest_checkpoint());
      checkpoint_peaks->load = alloc.stats().peak_bytes - before;
      checkpoint_peaks->psi = b.psi;
    }
    world->barrier()->wait();
    if (world->rank() == 0) std::filesystem::remove_all(dir);
  }
  return b;
}

void expect_near_rel(double got, double want, const char* what, int stage) {
  EXPECT_NEAR(got / want, 1.0, 0.05) << "ZeRO stage " << stage << " " << what << ": " << got << " bytes, formula "
                                     << want;
}

// Each stage against its formula, given the bytes per parameter of the parameters, the
// gradients and the optimizer state when unsharded.
void check_formulas(DType dtype, double param_bytes, double grad_bytes, double optim_bytes) {
  const double n = mf::comm::mpi_world()->size();
  for (int stage = 0; stage <= 3; ++stage) {
    Bytes b = model_state_bytes(stage, nullptr, dtype);
    const double psi = b.psi;
    const double p = param_bytes / (stage == 3 ? n : 1), g = grad_bytes / (stage >= 2 ? n : 1);
    const double os = optim_bytes / (stage >= 1 ? n : 1);
    expect_near_rel(b.total, (p + g + os) * psi, "allocator total", stage);
    expect_near_rel(static_cast<double>(b.report.parameters), p * psi, "parameters", stage);
    expect_near_rel(static_cast<double>(b.report.gradients), g * psi, "gradients", stage);
    expect_near_rel(static_cast<double>(b.report.optimizer_state), os * psi, "optimizer state", stage);
    // Every stage reduces gradients after backward (buckets, or ZeRO 2/3's reduce-scatters) and
    // reports the wait: some time, less than the whole test.
    EXPECT_GT(b.exposed_comm_s, 0.0) << "ZeRO stage " << stage;
    EXPECT_LT(b.exposed_comm_s, 60.0) << "ZeRO stage " << stage;
    if (mf::comm::mpi_world()->rank() == 0)
      std::printf("%s ZeRO stage %d, N=%d: model states %.0f bytes = %.3f x 16 psi (formula %.3f)\n",
                  mf::dtype_name(dtype), stage, static_cast<int>(n), b.total, b.total / (16 * psi), (p + g + os) / 16);
  }
}

TEST(ZeroMemory, ModelStatesFollowTheFormulas) { check_formulas(DType::kF32, 4, 4, 8); }

// bf16 parameters and gradients, f32 master weights and AdamW moments (K = 12): stage 0 16Ψ,
// 1 2Ψ + 2Ψ + 12Ψ/N, 2 2Ψ + 14Ψ/N, 3 16Ψ/N.
TEST(ZeroMemory, MixedPrecisionModelStatesFollowTheKEquals12Forms) { check_formulas(DType::kBF16, 2, 2, 12); }

TEST(ZeroMemory, CheckpointsHoldNoCopiesOfTheState) {
  // Saving and loading under ZeRO 1 and 3 allocate at most a few small bookkeeping tensors: no
  // gathered parameter or optimizer state, whatever the model size.
  for (int stage : {1, 3}) {
    Peaks p;
    model_state_bytes(stage, &p);
    EXPECT_LE(p.save, 4096) << "ZeRO " << stage << ": save allocated " << p.save << " bytes beyond the state";
    EXPECT_LE(p.load, 4096) << "ZeRO " << stage << ": load allocated " << p.load << " bytes beyond the state";
    EXPECT_LT(4096, 0.01 * 16 * p.psi / mf::comm::mpi_world()->size());  // the bound is far below one rank's state
  }
}

}  // namespace
