// Pipeline parallelism on the world as the pp axis (2 or 4 stages): each schedule's stored
// activations per stage, from the allocator counters, stay within its bound — 1F1B holds at
// most p - s micro-batches on stage s, GPipe all m of them — with the messages in flight.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "meshflow/models/gpt2/model.h"
#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/train/synthetic_batches.h"
#include "meshflow/train/trainer.h"
#include "testing.h"

namespace {

using mf::Tensor;

// A fresh output directory, the same on every rank (rank 0 names it).
std::string shared_tmp_dir(mf::comm::Communicator& world, const char* what) {
  Tensor id = mf::full({1}, world.rank() == 0 ? static_cast<double>(getpid()) : 0.0, mf::DType::kI64);
  world.broadcast(id, 0)->wait();
  return (std::filesystem::temp_directory_path() / (std::string("meshflow_") + what + "_" +
                                                    std::to_string(id.data<int64_t>()[0])))
      .string();
}

struct PipelineRun {
  mf::train::PipelineStats stats;
  int64_t stage = 0, stages = 1;
};

PipelineRun run_pipeline(const std::string& schedule, int64_t micro_batches) {
  mf::comm::CommPtr world = mf::comm::mpi_world();
  const int p = world->size(), s = world->rank();
  mf::models::Gpt2Config c;
  c.vocab_size = 50;
  c.max_seq_length = 64;
  c.hidden_size = 32;
  c.num_layers = 2 * p;
  c.num_attention_heads = 4;
  const int64_t per = c.num_layers / p;
  auto model = std::make_shared<mf::models::Gpt2Model>(
      c, mf::models::ModelContext{{}, mf::models::PipelineStage{s * per, (s + 1) * per, s == 0, s == p - 1, {}}});
  model->init_weights(3);
  mf::runtime::TrainOptions o;
  o.output_dir = shared_tmp_dir(*world, ("pp_" + schedule).c_str());
  o.train_iter = 2;
  o.micro_batch = 2;
  o.accumulation_steps = micro_batches;
  o.seq_length = 64;
  o.eval_enabled = false;
  o.pipeline_schedule = schedule;
  o.scheduler.warmup_iters = 0;
  mf::train::Trainer t(o, model, std::make_unique<mf::train::SyntheticBatchSource>(c.vocab_size, 64),
                       [&] { return std::make_unique<mf::train::SyntheticBatchSource>(c.vocab_size, 64); });
  t.set_parallel(nullptr, nullptr, world, world);
  t.train();
  world->barrier()->wait();
  if (s == 0) std::filesystem::remove_all(o.output_dir);
  return {t.last_pipeline_stats(), s, p};
}

// 32 micro-batches: a message sent stays only until its receipt is proven (the pipeline's
// messages held to the end of the step would add a micro-batch's output per forward).
TEST(Pipeline, OneFOneBHoldsAtMostStagesMinusIndexMicroBatches) {
  const int64_t m = 32;
  PipelineRun r = run_pipeline("1f1b", m);
  const auto& st = r.stats;
  EXPECT_EQ(st.max_in_flight, r.stages - r.stage);
  ASSERT_GT(st.micro_activation_bytes, 0);
  // Within the schedule's bound (a little slack for the buffers of messages in flight).
  EXPECT_LE(st.peak_activation_bytes, static_cast<int64_t>(1.2 * static_cast<double>((r.stages - r.stage) * st.micro_activation_bytes)));
  EXPECT_GE(st.peak_activation_bytes, (r.stages - r.stage) * st.micro_activation_bytes * 8 / 10);
}

TEST(Pipeline, GpipeHoldsEveryMicroBatch) {
  const int64_t m = 8;
  PipelineRun r = run_pipeline("gpipe", m);
  const auto& st = r.stats;
  EXPECT_EQ(st.max_in_flight, m);
  ASSERT_GT(st.micro_activation_bytes, 0);
  EXPECT_GE(st.peak_activation_bytes, m * st.micro_activation_bytes * 9 / 10);
  EXPECT_LE(st.peak_activation_bytes, static_cast<int64_t>(1.2 * static_cast<double>(m * st.micro_activation_bytes)));
}

}  // namespace
