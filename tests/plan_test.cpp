// The auto-parallel planner: what it reads of a model from its config, the layouts it offers
// (every one a run accepts, the others rejected with their reason, the user's keys kept), its
// memory model against the allocator's measured peak of real runs, its pipeline bubble, the
// hardware profile files, and graph.auto_parallel.enabled on one process.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/models/registry.h"
#include "meshflow/plan/fit.h"
#include "meshflow/plan/measure.h"
#include "meshflow/plan/pipeline_sim.h"
#include "meshflow/plan/planner.h"
#include "meshflow/plan/run.h"
#include "meshflow/runtime/build.h"
#include "meshflow/train/run.h"
#include "testing.h"

namespace {
namespace fs = std::filesystem;
using namespace mf::plan;

mf::Config gpt2_config(std::initializer_list<const char*> extra = {}) {
  mf::Config c;
  for (const char* kv : {"model.num_layers=4", "model.hidden_size=32", "model.num_attention_heads=4",
                         "model.max_seq_length=16", "model.vocab_size=300", "train.train_micro_batch_size=2"})
    c.apply_override(kv);
  for (const char* kv : extra) c.apply_override(kv);
  return c;
}

TEST(PlanModelCosts, Gpt2PartsAddUpToTheBuiltModel) {
  const mf::Config c = gpt2_config();
  const ModelCosts m = model_costs(c);
  auto model = mf::models::build_model(c, 0);
  EXPECT_EQ(m.total_params(), model->num_logical_parameters());
  const int64_t C = 32, F = 128, V = 300, T = 16;
  EXPECT_EQ(m.layers, 4);
  EXPECT_EQ(m.vocab, V);
  EXPECT_TRUE(m.tied);
  for (const ParamElements& p : m.layer_params) {
    // c_attn (C, 3C) + 3C, c_proj (C, C), c_fc (C, F) + F, mlp.c_proj (F, C) split; the norms and
    // the row-split biases replicated.
    EXPECT_EQ(p.split, 3 * C * C + 3 * C + C * C + C * F + F + F * C);
    EXPECT_EQ(p.replicated, 6 * C);
  }
  EXPECT_EQ(m.embedding.split, V * C);       // the vocabulary is split
  EXPECT_EQ(m.embedding.replicated, T * C);  // positions are not
  EXPECT_EQ(m.head.replicated, 2 * C);       // ln_f
  EXPECT_EQ(m.tied_copy.split, V * C);
  EXPECT_EQ(m.layer_params[0].on_rank(2), std::ceil(m.layer_params[0].split / 2) + 6 * C);
}

TEST(PlanModelCosts, UntiedHeadsAreTheirOwnParameters) {
  mf::Config c = gpt2_config({"model.name=llama", "model.num_key_value_heads=2", "model.ffn_hidden_size=64",
                               "model.embedding_dropout_prob=0", "model.output_dropout_prob=0"});
  ModelCosts m = model_costs(c);
  EXPECT_FALSE(m.tied);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_EQ(m.head.split, 300 * 32);  // lm_head
  EXPECT_EQ(m.total_params(), mf::models::build_model(c, 0)->num_logical_parameters());
  c.set("model.tie_word_embeddings", "true");
  EXPECT_TRUE(model_costs(c).tied);
}

// Every model's tiny config plans on two ranks (pipeline layouts included) with step times that
// are finite and positive and an MFU that can be true: a model without a token table (ViT) has its
// classifier as the head, not an empty one whose rate of nothing made every time NaN.
// BERT's masked-LM head projects the masked positions only (BertModel::mlm_loss): its logits are
// data.masked_lm_prob of the tokens' (measured: configs/bert/tiny.yaml's plans were predicted at
// up to +234% of their peak with every token's logits); a classifier's one row per sequence.
TEST(PlanModelCosts, BertsHeadProjectsTheMaskedPositionsOnly) {
  const mf::Config c = mf::Config::load(std::string(MESHFLOW_SOURCE_DIR) + "/configs/bert/tiny.yaml", {});
  const ModelCosts masked = model_costs(c);
  EXPECT_DOUBLE_EQ(masked.head_token_share, c.get_float("data.masked_lm_prob"));
  ModelCosts every = masked;
  every.head_token_share = 1.0;
  Layout l;
  l.micro_batch = 2;
  l.accumulation = 1;
  const std::vector<std::pair<int64_t, int64_t>> one_stage{{0, masked.layers}};
  const double tokens = 2.0 * static_cast<double>(masked.seq);
  const double logits_bytes = static_cast<double>(masked.vocab) * static_cast<double>(masked.act_bytes);
  EXPECT_DOUBLE_EQ(estimate_memory(every, l, one_stage).kept - estimate_memory(masked, l, one_stage).kept,
                   (tokens - std::ceil(tokens * masked.head_token_share)) * logits_bytes);
  EXPECT_DOUBLE_EQ(masked.head_flops, 2.0 * static_cast<double>(masked.vocab) * static_cast<double>(masked.hidden) *
                                          masked.head_token_share);
  const mf::Config classify = mf::Config::load(std::string(MESHFLOW_SOURCE_DIR) + "/configs/bert/tiny.yaml",
                                               {"model.task=classification", "model.num_labels=3"});
  EXPECT_DOUBLE_EQ(model_costs(classify).head_token_share, 1.0 / static_cast<double>(model_costs(classify).seq));
  EXPECT_DOUBLE_EQ(model_costs(gpt2_config()).head_token_share, 1.0);
}

// T5's head projects the decoder's positions only, and its eager attention keeps its
// probabilities (heads x keys per token: the softmax's and, with attention dropout, the
// dropout's) and the relative position bias with its ids; a layer's backward makes the scores'
// gradients beyond them (two at once, less the dropout's output released by then).
TEST(PlanModelCosts, T5sHeadAndEagerAttention) {
  const mf::Config c = mf::Config::load(std::string(MESHFLOW_SOURCE_DIR) + "/configs/t5/tiny.yaml", {});
  const ModelCosts m = model_costs(c);
  const double te = static_cast<double>(m.seq), td = static_cast<double>(c.get_int("model.decoder_seq_length"));
  const double heads = static_cast<double>(c.get_int("model.num_attention_heads"));
  EXPECT_DOUBLE_EQ(m.head_token_share, td / te);
  const mf::models::LayerActivations& enc = m.layer_acts.front();
  const mf::models::LayerActivations& dec = m.layer_acts.back();
  ASSERT_GT(c.get_float("model.attention_dropout_prob"), 0.0);
  EXPECT_DOUBLE_EQ(enc.core, 2 * heads * te);  // the softmax's output and the dropout's
  EXPECT_DOUBLE_EQ(enc.score_work, heads * te);
  EXPECT_DOUBLE_EQ(dec.core, 2 * heads * (td + te) * td / te);  // self- and cross-attention, per encoder token
  const mf::models::LayerActivations no_dropout =
      model_costs(mf::Config::load(std::string(MESHFLOW_SOURCE_DIR) + "/configs/t5/tiny.yaml",
                                   {"model.attention_dropout_prob=0"}))
          .layer_acts.front();
  EXPECT_DOUBLE_EQ(no_dropout.core, heads * te);
  EXPECT_DOUBLE_EQ(no_dropout.score_work, 2 * heads * te);
  EXPECT_DOUBLE_EQ(enc.bias_bytes, 4 * heads * te * te);
  EXPECT_DOUBLE_EQ(dec.bias_ids_bytes, 8 * td * td);
  // Full recomputation keeps a block's input: the joined encoder-and-decoder stream, whole.
  const double C = static_cast<double>(m.hidden);
  EXPECT_DOUBLE_EQ(enc.whole_input, (1 + td / te) * C);
  EXPECT_DOUBLE_EQ(dec.whole_input, (1 + td / te) * C);
  // A layer's scores are kept (the split region, / tp) and their gradients are its backward's work.
  ModelCosts none = m;
  for (mf::models::LayerActivations& a : none.layer_acts) a = {a.sequence, a.gathered, a.split - a.core, 0, 0, 0, 0, a.whole_input};
  Layout l;
  l.micro_batch = 2;
  l.accumulation = 1;
  const std::vector<std::pair<int64_t, int64_t>> one_stage{{0, m.layers}};
  EXPECT_GT(estimate_memory(m, l, one_stage).kept, estimate_memory(none, l, one_stage).kept);
  EXPECT_GT(estimate_memory(m, l, one_stage).peak, estimate_memory(none, l, one_stage).peak);
}

TEST(PlanTime, EveryModelsPlansAreFiniteAndBelowThePeak) {
  for (const char* family : {"gpt2", "llama", "gpt_neox", "bert", "t5", "vit"}) {
    SCOPED_TRACE(family);
    const mf::Config c = mf::Config::load(std::string(MESHFLOW_SOURCE_DIR) + "/configs/" + family + "/tiny.yaml", {});
    const PlanResult r = make_plan(c, plan_options(c, 2));
    ASSERT_FALSE(r.ranked.empty());
    EXPECT_GT(r.model.vocab, 0);
    bool pipelined = false;
    for (const Plan& p : r.ranked) {
      pipelined = pipelined || p.layout.pp() > 1;
      EXPECT_TRUE(std::isfinite(p.time.total()) && p.time.compute_s > 0) << p.layout.str();
      EXPECT_GT(p.mfu, 0.0) << p.layout.str();
      EXPECT_LE(p.mfu, 1.0) << p.layout.str();
    }
    EXPECT_TRUE(pipelined);
  }
}

TEST(PlanLayouts, EveryFeasibleLayoutIsOneTheRunAccepts) {
  const mf::Config c = gpt2_config({"train.global_batch_size=8"});
  const ModelCosts m = model_costs(c);
  for (int64_t ranks : {1, 2, 3, 4, 6, 8}) {
    const Candidates cand = enumerate_layouts(c, m, ranks);
    ASSERT_FALSE(cand.feasible.empty()) << ranks;
    for (const Layout& l : cand.feasible) {
      EXPECT_EQ(l.ranks(), ranks) << l.str();
      EXPECT_EQ(l.global_batch(), 8) << l.str();
      const mf::Config run = with_layout(c, m, l);
      EXPECT_NO_THROW(mf::runtime::train_options(run, static_cast<int>(ranks))) << l.str();
    }
  }
}

TEST(PlanLayouts, InfeasibleOnesAreRejectedWithTheirReason) {
  const mf::Config c = gpt2_config({"train.global_batch_size=6"});
  const Candidates three = enumerate_layouts(c, model_costs(c), 3);
  bool heads = false;
  for (const Rejected& r : three.rejected)
    heads = heads || (r.layout.tp() == 3 && r.reason == "tp 3 does not divide model.num_attention_heads 4");
  EXPECT_TRUE(heads);
  for (const Layout& l : three.feasible) EXPECT_NE(l.tp(), 3);
  const mf::Config eight = gpt2_config({"train.global_batch_size=8"});
  const Candidates c8 = enumerate_layouts(eight, model_costs(eight), 8);
  bool stages = false;
  for (const Rejected& r : c8.rejected) stages = stages || r.reason == "8 pipeline stages for 4 layers";
  EXPECT_TRUE(stages);
  // A global batch dp cannot split.
  const mf::Config odd = gpt2_config({"train.global_batch_size=3"});
  bool batch = false;
  for (const Rejected& r : enumerate_layouts(odd, model_costs(odd), 2).rejected)
    batch = batch || r.reason == "global batch 3 is not a multiple of dp 2";
  EXPECT_TRUE(batch);
}

TEST(PlanLayouts, TheUsersLayoutKeysAreKept) {
  const mf::Config c = gpt2_config({"train.global_batch_size=8", "train.dist.tensor_parallel_size=2",
                                    "train.zero_optimization.enabled=true", "train.zero_optimization.stage=2"});
  const Candidates cand = enumerate_layouts(c, model_costs(c), 8);
  ASSERT_FALSE(cand.feasible.empty());
  for (const Layout& l : cand.feasible) {
    EXPECT_EQ(l.tp(), 2) << l.str();
    EXPECT_EQ(l.zero_stage, 2) << l.str();
  }
}

// Context parallelism: each rank keeps its slice of every sequence (the kept activations halve at
// cp=2) and pays the ring's messages; a cp that does not divide the sequence, all_to_all with tp,
// and an unfused attention (T5) are rejected with their reasons.
TEST(PlanLayouts, ContextParallelismSplitsTheSequence) {
  const mf::Config c = gpt2_config({"train.global_batch_size=2", "data.seq_length=16"});
  const ModelCosts m = model_costs(c);
  const std::vector<std::pair<int64_t, int64_t>> one_stage{{0, m.layers}};
  Layout one, cp2;
  one.micro_batch = cp2.micro_batch = 2;
  cp2.dims.set("cp", 2);
  const MemoryEstimate m1 = estimate_memory(m, one, one_stage), m2 = estimate_memory(m, cp2, one_stage);
  EXPECT_NEAR(m2.kept, m1.kept / 2, 1e-9 * m1.kept);
  const HardwareProfile h = hardware_profile("a100-80gb", 4);
  EXPECT_EQ(estimate_step_time(m, one, h, one_stage).cp_comm_s, 0.0);
  EXPECT_GT(estimate_step_time(m, cp2, h, one_stage).cp_comm_s, 0.0);
  bool listed = false;
  for (const Layout& l : enumerate_layouts(c, m, 2).feasible) listed = listed || l.cp() == 2;
  EXPECT_TRUE(listed);
  auto reasons = [](const mf::Config& config, int64_t ranks) {
    std::string all;
    for (const Rejected& r : enumerate_layouts(config, model_costs(config), ranks).rejected)
      if (r.layout.cp() > 1) all += r.reason + "\n";
    return all;
  };
  const mf::Config odd = gpt2_config({"train.global_batch_size=2", "data.seq_length=15"});
  EXPECT_NE(reasons(odd, 2).find("cp 2 does not divide the sequence 15"), std::string::npos) << reasons(odd, 2);
  const mf::Config a2a = gpt2_config({"train.global_batch_size=2", "data.seq_length=16", "train.dist.context_parallel_mode=all_to_all"});
  EXPECT_NE(reasons(a2a, 4).find("all_to_all with tp 2"), std::string::npos) << reasons(a2a, 4);
}

TEST(PlanPipelineSim, ActionByActionAsTheSchedulesRun) {
  using mf::parallel::PipelineSchedule;
  auto run = [](PipelineSchedule schedule, std::vector<double> forward, int64_t m, int64_t v = 1) {
    PipelineRun r;
    r.schedule = schedule;
    r.stages = static_cast<int64_t>(forward.size()) / v;
    r.chunks = v;
    r.micro_batches = m;
    r.forward_s.assign(static_cast<size_t>(r.stages), {});
    r.backward_s.assign(static_cast<size_t>(r.stages), {});
    for (int64_t s = 0; s < r.stages; ++s)
      for (int64_t k = 0; k < v; ++k) {  // forward[j]: virtual stage j = k * stages + s
        r.forward_s[static_cast<size_t>(s)].push_back(forward[static_cast<size_t>(k * r.stages + s)]);
        r.backward_s[static_cast<size_t>(s)].push_back(2 * forward[static_cast<size_t>(k * r.stages + s)]);
      }
    return r;
  };
  // Equal stages: (m + p - 1) micro-batch slots of forward + backward, for GPipe and 1F1B; v chunks
  // a rank: the fill and drain 1/v of that (Megatron's interleaved bubble).
  for (PipelineSchedule sch : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B})
    EXPECT_NEAR(simulate_pipeline(run(sch, {1, 1, 1, 1}, 8)), (8 + 3) * 3.0, 1e-9);
  EXPECT_NEAR(simulate_pipeline(run(PipelineSchedule::kInterleaved1F1B, std::vector<double>(8, 0.5), 8, 2)),
              8 * 3.0 + 3 * 3.0 / 2, 1e-9);
  // Unequal stages, by hand: 2 stages (forward 1 and 3 s), GPipe, 2 micro-batches. Rank 1: F0 1-4,
  // F1 4-7, B0 7-13, B1 13-19; rank 0: F0 0-1, F1 1-2, B0 13-15, B1 19-21.
  EXPECT_NEAR(simulate_pipeline(run(PipelineSchedule::kGpipe, {1, 3}, 2)), 21, 1e-9);
  // 1F1B: the slow rank runs without a gap from the first forward's arrival (1 s) on, 9 s a
  // micro-batch, then the first rank's last backward (2 s) — also past 4p micro-batches, where the
  // steady state is extrapolated.
  for (int64_t m : {2, 8, 20, 100})
    EXPECT_NEAR(simulate_pipeline(run(PipelineSchedule::k1F1B, {1, 3}, m)), 9.0 * static_cast<double>(m) + 3, 1e-9) << m;
  // Four ranks on one core (one process at its own rate at once), one micro-batch: the stages one
  // after the other, each on the whole core; while three wait, taking 0.1 of it each, at 0.7.
  PipelineRun shared = run(PipelineSchedule::k1F1B, {1, 1, 1, 1}, 1);
  shared.capacity = 1;
  EXPECT_NEAR(simulate_pipeline(shared), 12, 1e-9);
  shared.waiting_load = 0.1;
  EXPECT_NEAR(simulate_pipeline(shared), 12 / 0.7, 1e-9);
  // Many micro-batches, no load from waiting: someone always computes, so the core never idles —
  // the whole work over the one core.
  shared.micro_batches = 64;
  shared.waiting_load = 0;
  EXPECT_NEAR(simulate_pipeline(shared), 64 * 4 * 3.0, 1e-6);
  // A core each (capacity 4 of 4): as if unshared.
  shared.capacity = 4;
  shared.waiting_load = 0.5;
  EXPECT_NEAR(simulate_pipeline(shared), (64 + 3) * 3.0, 1e-9);
}

TEST(PlanTime, ThePipelineBubbleIsTheSchedules) {
  const mf::Config c = gpt2_config({"model.num_layers=8"});
  const ModelCosts m = model_costs(c);
  const HardwareProfile h = hardware_profile("a100-80gb", 4);
  Layout l;
  l.dims.set("pp", 4);
  l.micro_batch = 1;
  l.accumulation = 8;
  auto time = [&](const Layout& x) {
    const auto ranges = mf::runtime::pipeline_layers(with_layout(c, m, x), x.pp() * x.virtual_stages);
    return estimate_step_time(m, x, h, ranges);
  };
  auto share = [&](const Layout& x) {
    const StepTime t = time(x);
    return t.bubble_s / (t.bubble_s + t.compute_s);
  };
  // The fill and drain run each other stage once, whatever the micro-batches: the bubble stays,
  // the compute grows with them (but for the gradients' accumulation: m - 1 of m micro-batches
  // add into .grad, 15/16 against 7/8 of a small memory-bound term).
  Layout more = l;
  more.accumulation = 16;
  EXPECT_NEAR(time(more).bubble_s, time(l).bubble_s, 1e-4 * time(l).bubble_s);
  EXPECT_NEAR(time(more).compute_s, 2 * time(l).compute_s, 1e-4 * time(l).compute_s);
  EXPECT_GT(time(more).compute_s, 2 * time(l).compute_s);
  // Stages nearly equal (the embedding's and the head's work on the end stages): about Megatron's
  // (p - 1) / (m + p - 1), and (p - 1) / (v m + p - 1) interleaved.
  EXPECT_NEAR(share(l), 3.0 / 11.0, 0.01);
  l.schedule = "interleaved_1f1b";
  l.virtual_stages = 2;
  EXPECT_NEAR(share(l), 3.0 / 19.0, 0.01);
  Layout one;
  one.accumulation = 8;
  const StepTime t = estimate_step_time(m, one, h, {{0, 8}});
  EXPECT_EQ(t.bubble_s, 0);
  EXPECT_EQ(t.tp_comm_s, 0);
  EXPECT_EQ(t.dp_comm_s, 0);
}

TEST(PlanTime, OversubscribedRanksLendTheirCoresWhileTheyWait) {
  // Four pipeline ranks on one core (a rank's share 1/4 when all compute): with one micro-batch
  // only one stage computes at a time, on the whole core — the stages' sum at 4x the shared rate.
  const mf::Config c = gpt2_config({"model.num_layers=8"});
  const ModelCosts m = model_costs(c);
  HardwareProfile h = hardware_profile("a100-80gb", 4);
  Layout l;
  l.dims.set("pp", 4);
  l.micro_batch = 1;
  l.accumulation = 1;
  const auto ranges = mf::runtime::pipeline_layers(with_layout(c, m, l), 4);
  auto pipeline_s = [&] {
    const StepTime t = estimate_step_time(m, l, h, ranges);
    return t.compute_s + t.bubble_s;
  };
  const double whole_cores = pipeline_s();
  h.core_share = 0.25;
  EXPECT_NEAR(pipeline_s(), 0.25 * whole_cores, 1e-12 * whole_cores);
  // Many micro-batches: never less than the busiest stage's work on a core of its own.
  l.accumulation = 64;
  const StepTime busy = estimate_step_time(m, l, h, ranges);
  h.core_share = 1;
  const StepTime own = estimate_step_time(m, l, h, ranges);
  EXPECT_GE(busy.compute_s + busy.bubble_s, 0.25 * own.compute_s);
  // One stage: the shared rates are the whole story.
  Layout flat;
  flat.accumulation = 4;
  const double flat_own = estimate_step_time(m, flat, h, {{0, 8}}).total();
  h.core_share = 0.25;
  EXPECT_NEAR(estimate_step_time(m, flat, h, {{0, 8}}).total(), flat_own, 1e-12 * flat_own);
}

TEST(PlanTime, AnUnfusedAttentionMovesAndKeepsItsScores) {
  // A runtime whose attention writes its scores (Megatron-LM's of 2021): 13 bytes per score
  // through memory in forward, 5 kept for backward. Every score: heads x seq per token per layer.
  const mf::Config c = gpt2_config();
  ModelCosts fused = model_costs(c);
  HardwareProfile h = hardware_profile("a100-80gb", 1);
  fused.set_runtime(h);
  h.attention_score_bytes = 13;
  h.attention_score_kept_bytes = 5;
  ModelCosts unfused = model_costs(c);
  unfused.set_runtime(h);
  Layout l;
  l.micro_batch = 2;
  l.accumulation = 1;
  const double scores = 4.0 * 2 * 16 * 4 * 16;  // layers x tokens x heads x seq
  auto compute_s = [&](const ModelCosts& m, const Layout& x) { return estimate_step_time(m, x, h, {{0, 4}}).compute_s; };
  // Forward and backward (twice the forward) move them; selective recomputation once more.
  EXPECT_NEAR(compute_s(unfused, l) - compute_s(fused, l), 3 * scores * 13 / h.memory_bandwidth, 1e-15);
  Layout selective = l;
  selective.recompute = Recompute::kSelective;
  selective.recompute_layers = 4;
  EXPECT_NEAR(compute_s(unfused, selective) - compute_s(fused, selective), 4 * scores * 13 / h.memory_bandwidth, 1e-15);
  // Backward keeps 5 bytes of every score, except where the layers are recomputed.
  const std::vector<std::pair<int64_t, int64_t>> one_stage{{0, 4}};
  EXPECT_DOUBLE_EQ(estimate_memory(unfused, l, one_stage).kept - estimate_memory(fused, l, one_stage).kept, scores * 5);
  EXPECT_DOUBLE_EQ(estimate_memory(unfused, selective, one_stage).kept, estimate_memory(fused, selective, one_stage).kept);
}

TEST(PlanTime, CollectivesAndCopiesAreCountedAsTheRuntimeRunsThem) {
  // Every collective of 2 ranks costs 1 ms, bytes are free: the counts show.
  const mf::Config c = gpt2_config();
  const ModelCosts m = model_costs(c);
  HardwareProfile h = hardware_profile("a100-80gb", 2);
  for (const char* op : {"all_reduce/2", "all_gather/2", "reduce_scatter/2"}) h.collectives[op] = {1e-3, 0};
  h.dp_overlap = 0;
  h.memory_bandwidth = 1e30;
  const double tensors = static_cast<double>(mf::models::parameter_shapes(c).size());
  const double units = 4 + 2;  // the embedding, each layer, the head
  Layout l;
  l.dims.set("dp", 2);
  l.micro_batch = 1;
  l.accumulation = 2;
  auto dp_s = [&](int zero) {
    Layout x = l;
    x.zero_stage = zero;
    return estimate_step_time(m, x, h, {{0, 4}}).dp_comm_s;
  };
  // One bucket's all-reduce; ZeRO-1/2 gather the updated parameters a tensor at a time; ZeRO-2/3
  // reduce-scatter unit by unit; ZeRO-3 gathers every unit forward and backward of each
  // micro-batch, and nothing after the step.
  EXPECT_NEAR(dp_s(0), 1e-3, 1e-12);
  EXPECT_NEAR(dp_s(1), 1e-3 + tensors * 1e-3, 1e-12);
  EXPECT_NEAR(dp_s(2), units * 1e-3 + tensors * 1e-3, 1e-12);
  EXPECT_NEAR(dp_s(3), units * 1e-3 + 2 * 2 * units * 1e-3, 1e-12);
  // The exchange's copies: the gradients into buckets (2 x their bytes) or a zeroed pack (3),
  // the gathered parameters into place (ZeRO-1/2: 2; ZeRO-3: 2 per gather).
  for (auto& [op, fit] : h.collectives) fit = {0, 0};
  h.memory_bandwidth = 1e9;
  const double bytes = static_cast<double>(m.total_params()) * 4 / 1e9;
  EXPECT_NEAR(dp_s(0), 2 * bytes, 1e-12);
  EXPECT_NEAR(dp_s(1), 4 * bytes, 1e-12);
  EXPECT_NEAR(dp_s(2), 5 * bytes, 1e-12);
  EXPECT_NEAR(dp_s(3), (3 + 4 * 2) * bytes, 1e-12);
  // Tensor parallelism: per layer two all-reduces forward, two backward, and one of each for the
  // embedding and the head; sequence parallel an all-gather and a reduce-scatter for each; a
  // fully recomputed layer's forward runs its two again.
  for (auto& [op, fit] : h.collectives) fit = {1e-3, 0};
  Layout t;
  t.dims.set("tp", 2);
  t.micro_batch = 1;
  t.accumulation = 2;
  auto tp_s = [&](const Layout& x) { return estimate_step_time(m, x, h, {{0, 4}}).tp_comm_s; };
  EXPECT_NEAR(tp_s(t), 2 * (4 * 4 + 2) * 1e-3, 1e-12);
  Layout sp = t;
  sp.sequence_parallel = true;
  EXPECT_NEAR(tp_s(sp), 2 * (4 * 4 + 2) * 2e-3, 1e-12);
  Layout remade = t;
  remade.recompute = Recompute::kFull;
  remade.recompute_layers = 3;
  EXPECT_NEAR(tp_s(remade), 2 * (4 * 4 + 2 * 3 + 2) * 1e-3, 1e-12);
  // Sequence parallel: the sequence-shaped elementwise ops (norms, dropout, residual adds) run on
  // 1/tp of the tokens — forward and twice that backward, 2 bytes moved per element kept, each
  // layer of each micro-batch.
  auto compute_s = [&](const Layout& x) { return estimate_step_time(m, x, h, {{0, 4}}).compute_s; };
  const double tokens = static_cast<double>(t.micro_batch * m.seq);
  EXPECT_NEAR(compute_s(t) - compute_s(sp), 2 * 4 * 3 * 2 * tokens * m.layer_acts[0].sequence / 2 * 4 / h.memory_bandwidth,
              1e-9 * compute_s(t));
  // Measured rates by size: a layer's elementwise ops run at the rate of a (tokens, C) tensor's
  // bytes (1/tp of it under sequence parallelism), the head's at its logits'; here every size up
  // to the tensor parallel one's rates twice the bandwidth, so their seconds halve.
  auto elementwise_s = [&](const HardwareProfile& x, const Layout& y) {
    HardwareProfile free_gemms = x;
    free_gemms.gemm_flops = free_gemms.peak_flops = 1e30;
    free_gemms.op_overhead_s = 0;
    return estimate_step_time(m, y, free_gemms, {{0, 4}}).compute_s;
  };
  HardwareProfile rated = h;
  const double sp_tensor = tokens * static_cast<double>(m.hidden) * 4 / 2;
  rated.memory_rates = {{sp_tensor, 2 * h.memory_bandwidth}, {2 * sp_tensor, h.memory_bandwidth}};
  Layout one = sp;
  one.accumulation = 1;
  Layout one_t = t;
  one_t.accumulation = 1;
  // The embedding's gradient (its table) and the optimizer stream from memory at any size; the
  // layers' elementwise ops of the sequence-parallel layout (tensors of sp_tensor bytes) halve,
  // those of the plain one (twice that) do not.
  const double layers_sp = elementwise_s(h, one) - elementwise_s(rated, one);
  EXPECT_GT(layers_sp, 0);
  const double kept_sp = m.layer_acts[0].sequence / 2 + m.layer_acts[0].gathered + m.layer_acts[0].split / 2;
  EXPECT_NEAR(layers_sp, 3 * 4 * 2 * tokens * kept_sp * 4 / h.memory_bandwidth / 2, 1e-9 * layers_sp);
  EXPECT_NEAR(elementwise_s(h, one_t), elementwise_s(rated, one_t), 1e-12);
}

TEST(PlanMeasure, PlansSpreadOverTheRankingAndKendallsTau) {
  EXPECT_EQ(plans_to_measure(10, 4), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(plans_to_measure(10, 1), (std::vector<int64_t>{0}));
  EXPECT_EQ(plans_to_measure(3, 0), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(plans_to_measure(3, 5), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(plans_to_measure(0, 3).empty());
  EXPECT_DOUBLE_EQ(kendall_tau({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(kendall_tau({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // (1,2)+ (1,3)+ (1,4)+ (2,3)- (2,4)+ (3,4)+: (5 - 1) / 6; a tie counts neither way.
  EXPECT_DOUBLE_EQ(kendall_tau({1, 2, 3, 4}, {1, 3, 2, 4}), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(kendall_tau({1, 1, 2}, {1, 2, 3}), 2.0 / 3.0);
  EXPECT_THROW(kendall_tau({1, 2}, {1}), mf::Error);
}

// --skip: a plan printed by --measure --json (its keys in the layout's order) is found again
// under the same key; another plan is not; a line that is no measured plan is named.
TEST(PlanMeasure, PlansMeasuredBeforeAreFoundByTheirKeys) {
  const mf::Config c = gpt2_config({"train.global_batch_size=8"});
  const PlanResult r = make_plan(c, plan_options(c, 4));
  ASSERT_GE(r.ranked.size(), 2u);
  nlohmann::ordered_json keys = nlohmann::ordered_json::object();
  for (const auto& [k, v] : r.ranked[1].layout.config_keys(r.model.layers)) keys[k] = v;
  const std::string text = nlohmann::ordered_json{{"rank", 2}, {"keys", keys}, {"measured_s", 1.0}}.dump() + "\n\n";
  const std::vector<std::string> done = measured_plan_keys(text, "f.jsonl");
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], plan_key(r.ranked[1], r.model.layers));
  EXPECT_NE(done[0], plan_key(r.ranked[0], r.model.layers));
  try {
    measured_plan_keys(text + "{\"rank\": 3}\n", "f.jsonl");
    FAIL() << "a line without keys";
  } catch (const mf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("f.jsonl line 3"), std::string::npos) << e.what();
  }
}

TEST(PlanHardware, ProfilesRoundTripAndBadOnesAreNamed) {
  HardwareProfile h = hardware_profile("h100-80gb", 8);
  h.collectives["all_reduce/2"] = {1e-5, 2e-10};
  h.collectives["all_reduce/4"] = {1e-5, 2e-10};
  h.loaded_alpha_s[4] = 3e-4;  // a call of 4 ranks while the others compute: at least 0.3 ms
  h.core_share = 0.5;
  h.waiting_load = 0.125;
  h.attention_score_bytes = 13;
  h.attention_score_kept_bytes = 5;
  const fs::path dir = fs::path(testing::TempDir()) / ("mf_plan_hw_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  mf::write_file_atomic((dir / "p.json").string(), profile_json(h));
  const HardwareProfile back = load_profile((dir / "p.json").string());
  EXPECT_EQ(back.peak_flops, h.peak_flops);
  EXPECT_EQ(back.intra.beta_s_per_b, h.intra.beta_s_per_b);
  EXPECT_DOUBLE_EQ(back.collective_seconds("all_reduce", 2, 1e6, false), 1e-5 + 2e-10 * 1e6);
  EXPECT_DOUBLE_EQ(back.collective_seconds("all_reduce", 4, 1e6, false), 3e-4 + 2e-10 * 1e6);
  EXPECT_EQ(back.core_share, 0.5);
  EXPECT_EQ(back.waiting_load, 0.125);
  EXPECT_EQ(back.attention_score_bytes, 13);
  EXPECT_EQ(back.attention_score_kept_bytes, 5);
  EXPECT_EQ(parse_profile(profile_json(h), "text").loaded_alpha_s, h.loaded_alpha_s);
  // Elementwise rates by tensor size: without them, the bandwidth at every size; with them,
  // interpolated in log size between the measured points and held at the ends.
  EXPECT_EQ(back.memory_rate(1e3), h.memory_bandwidth);
  h.memory_rates = {{65536, 40e9}, {1048576, 20e9}, {67108864, 5e9}};
  const HardwareProfile rated = parse_profile(profile_json(h), "text");
  EXPECT_EQ(rated.memory_rates, h.memory_rates);
  EXPECT_DOUBLE_EQ(rated.memory_rate(1000), 40e9);
  EXPECT_DOUBLE_EQ(rated.memory_rate(65536), 40e9);
  EXPECT_DOUBLE_EQ(rated.memory_rate(262144), 30e9);  // half way in log size from 64 KB to 1 MB
  EXPECT_DOUBLE_EQ(rated.memory_rate(8388608), 12.5e9);
  EXPECT_DOUBLE_EQ(rated.memory_rate(1e12), 5e9);
  EXPECT_THROW(parse_profile(std::string(profile_json(h)).replace(profile_json(h).find("\"65536\""), 7, "\"-1\""), "text"),
               mf::Error);
  mf::write_file_atomic((dir / "bad.json").string(), "{\"name\": \"x\"}");
  EXPECT_THROW(
      {
        try {
          load_profile((dir / "bad.json").string());
        } catch (const mf::Error& e) {
          EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
          throw;
        }
      },
      mf::Error);
  EXPECT_THROW(hardware_profile("tpu-v9", 1), mf::Error);
  fs::remove_all(dir);
}

TEST(PlanAutoParallel, OneProcessTakesTheBestPlanAndTurnsThePlannerOff) {
  mf::Config c = gpt2_config({"train.global_batch_size=8"});
  EXPECT_EQ(auto_parallel(c, nullptr, stdout), c);  // off: the config itself
  c.set("graph.auto_parallel.enabled", "true");
  const mf::Config chosen = auto_parallel(c, nullptr, stdout);
  EXPECT_FALSE(chosen.get_bool("graph.auto_parallel.enabled"));
  const PlanResult r = make_plan(c, plan_options(c, 1));
  for (const auto& [key, value] : r.ranked.front().layout.config_keys(4)) EXPECT_EQ(chosen.get_text(key), value) << key;
  // Nothing fits in 1 kB: the error names the reason.
  c.set("graph.auto_parallel.memory_per_rank_gb", "1e-6");
  try {
    auto_parallel(c, nullptr, stdout);
    FAIL() << "no plan fits";
  } catch (const mf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("memory ("), std::string::npos) << e.what();
  }
}

// `meshflow train` checks, before any weight exists, that a rank's parameters, gradients and
// optimizer state fit the host's memory: each bound to the byte, per layout.
TEST(PlanFit, AModelTheHostCannotHoldIsOneLineBeforeAnyWeight) {
  const mf::Config c = gpt2_config();
  const double P = static_cast<double>(model_costs(c).total_params());
  const auto host = [](double bytes) { return mf::HostMemory{bytes, "a test host's memory"}; };
  const auto npos = std::string::npos;
  // One rank, f32 AdamW: 4 + 4 + 8 bytes per parameter.
  EXPECT_EQ(model_state_fit(c, 1, 1, host(16 * P)), "");
  const std::string msg = model_state_fit(c, 1, 1, host(16 * P - 1));
  EXPECT_NE(msg.find("the model does not fit: GPT-2: layers 4, hidden 32"), npos) << msg;
  EXPECT_NE(msg.find("of parameters, gradients and AdamW state on each rank (dp 1, tp 1, pp 1: parameters"), npos) << msg;
  EXPECT_NE(msg.find("; this host has a test host's memory — spread it over more ranks"), npos) << msg;
  // SGD keeps no AdamW state: 8 bytes per parameter.
  const mf::Config sgd = gpt2_config({"optim.name=sgd"});
  EXPECT_EQ(model_state_fit(sgd, 1, 1, host(8 * P)), "");
  EXPECT_NE(model_state_fit(sgd, 1, 1, host(8 * P - 1)).find("of parameters and gradients on each rank"), npos);
  // Two ranks share the host: plain data parallelism holds everything twice, ZeRO-3 halves every part.
  EXPECT_EQ(model_state_fit(c, 2, 2, host(32 * P)), "");
  EXPECT_NE(model_state_fit(c, 2, 2, host(32 * P - 2)).find("a test host's memory for its 2 ranks"), npos);
  const mf::Config z3 = gpt2_config({"train.zero_optimization.enabled=true", "train.zero_optimization.stage=3"});
  EXPECT_EQ(model_state_fit(z3, 2, 2, host(16 * P)), "");
  EXPECT_NE(model_state_fit(z3, 2, 2, host(16 * P - 2)).find("(dp 2, tp 1, pp 1, ZeRO-3: "), npos);
  // The launcher's count of ranks on the host is capped by the job's.
  EXPECT_EQ(model_state_fit(c, 1, 8, host(16 * P)), "");
  // Pipeline stages differ: the largest one must fit the whole host.
  const mf::Config pp = gpt2_config({"train.dist.pipeline_parallel_size=2"});
  EXPECT_EQ(model_state_fit(pp, 2, 2, host(16 * P)), "");
  EXPECT_NE(model_state_fit(pp, 2, 2, host(8 * P)).find("AdamW state on pipeline stage "), npos);
  // Inference (generate, serve, eval) holds the parameters alone.
  EXPECT_EQ(model_state_fit(c, 1, 1, host(4 * P), ModelUse::kInference), "");
  EXPECT_NE(model_state_fit(c, 1, 1, host(4 * P - 1), ModelUse::kInference).find(" of parameters on each rank (tp 1, pp 1); "),
            npos);
  // A mesh the ranks cannot take is the run's own error.
  EXPECT_EQ(model_state_fit(gpt2_config({"train.dist.tensor_parallel_size=3"}), 2, 2, host(1)), "");
  // A layer count past what the memory holds is refused before the layers are listed.
  const std::string many = model_state_fit(gpt2_config({"model.num_layers=1000000000000"}), 1, 1, host(1e12));
  // (A GPT-2 block of hidden 32, MLP 128: 12704 parameters; 10^12 of them in f32: 50816000 GB.)
  EXPECT_NE(many.find(": 1000000000000 layers of at least 12704 parameters each need more than 50816000.0 GB "
                      "on each rank; this host has a test host's memory"),
            npos)
      << many;
  // bf16 is suggested for inference only where the model is not in it already.
  EXPECT_NE(model_state_fit(c, 1, 1, host(1), ModelUse::kInference).find("load it in bf16"), npos);
  EXPECT_EQ(model_state_fit(gpt2_config({"train.amp.enabled=true"}), 1, 1, host(1), ModelUse::kInference).find("load it in bf16"),
            npos);
  // A T5 whose encoder and decoder layers overflow int64 together is refused, not counted negative.
  MFT_EXPECT_ERROR(mf::models::model_layers(gpt2_config({"model.name=t5", "model.num_layers=4611686018427387904"})),
                   "t5: model.num_layers 4611686018427387904 and as many decoder layers are more layers than int64 counts");
}

// The memory model against the allocator: one process trains two steps of a byte-level GPT-2
// (a regime where the layers, not the vocabulary, hold the activations) under several plans;
// each predicted peak is within 10% of the measured one.
TEST(PlanMemory, PredictsTheMeasuredPeakOfRuns) {
  const fs::path dir = fs::path(testing::TempDir()) / ("mf_plan_mem_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string text;
  for (int d = 0; d < 200; ++d) text += "the cat sat on the mat and the dog ran far away home " + std::to_string(d) + "\n%\n";
  mf::write_file_atomic((dir / "corpus.txt").string(), text);
  mf::ByteTokenizer tok;
  const std::string prefix = mf::preprocess({(dir / "corpus.txt").string()}, (dir / "corpus").string(), tok).prefix;
  mf::Config c;
  for (const char* kv : {"model.num_layers=3", "model.hidden_size=64", "model.num_attention_heads=4",
                         "model.max_seq_length=64", "model.vocab_size=257", "train.train_iter=2",
                         "train.global_batch_size=8", "train.log_period=1", "train.evaluation.enabled=false",
                         "train.checkpointer.period=100", "tokenization.tokenizer=byte", "data.splits=90,10,0"})
    c.apply_override(kv);
  c.set("data.data_prefix", prefix);
  const ModelCosts m = model_costs(c);
  int64_t i = 0;
  for (const Layout& l : enumerate_layouts(c, m, 1).feasible) {
    if (i++ % 3 != 0) continue;  // a third of them: every micro-batch size and recomputation appears
    mf::Config run = with_layout(c, m, l);
    const std::string out = (dir / ("run" + std::to_string(i))).string();
    run.set("train.output_dir", out);
    std::FILE* quiet = std::fopen("/dev/null", "w");
    mf::train::run_training(run, quiet);
    std::fclose(quiet);
    double peak = 0;
    std::ifstream in(out + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) peak = std::max(peak, nlohmann::json::parse(line)["peak_bytes"].get<double>());
    const double predicted = estimate_memory(c, m, l).peak;
    EXPECT_NEAR(predicted / peak, 1.0, 0.10) << l.str() << ": predicted " << predicted << " measured " << peak;
  }
  EXPECT_GE(i, 6);
  fs::remove_all(dir);
}

}  // namespace
