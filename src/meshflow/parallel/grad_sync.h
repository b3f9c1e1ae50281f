// Gradient synchronisation, the parallel runtime's half of a training step: what makes the
// local gradients of every layout the gradients of the single-process run, and the update the
// same update.
//
//  - Data parallelism: GradReducers overlapped with backward (the mean over dp; parameters
//    replicated over tp have partial-sum gradients there, so they are summed over dp x tp).
//  - ZeRO over dp (stage 1: the optimizer updates this rank's flat S(0) slice of each parameter,
//    then the slices are all-gathered; 2: the gradients are reduce-scattered into those slices;
//    3: the parameters too are kept as slices and gathered unit by unit, zero_shards.h).
//  - Tied parameters (a copy on the first and on the last pipeline stage): their gradients summed
//    over the two stages.
//  - The logical global gradient norm (L2 or infinity) over tp pieces, pp stages and ZeRO slices,
//    and clipping to it.
// The model's code takes no part: the trainer hands this its parameters, which of them are split
// over tp, its forward units and its tied parameters.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/nn/module.h"
#include "meshflow/nn/param_use_hooks.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/parallel/groups.h"

namespace mf::parallel {

class GradReducer;
class ZeroShards;

struct GradSyncOptions {
  int64_t bucket_bytes = int64_t{25} << 20;  // data-parallel gradient buckets
  int zero_stage = 0;                        // 0..3 (train.zero_optimization)
  double norm_type = 2.0;                    // 2 or infinity (optim.clip_grad_norm_type)
  Device device = cpu_device();              // where the parameters live
};

// A parameter as the optimizer updates it under ZeRO: this rank's flat slice `shard` (a view of
// the parameter, or at stage 3 of ZeRO's parameter segment) of parameter `index`,
// [start, start + numel) of its flat local tensor.
struct ParamShard {
  Tensor param, shard;
  int64_t start = 0, numel = 0;
  size_t index = 0;
};

class GradSync {
 public:
  // `named`: this rank's parameters (model order, on opts.device); `split[k]`: parameter k is
  // split over tp; `units`: the model's forward units (ZeRO-3 gathers by unit); `tied`: names of
  // parameters that several pipeline stages hold a copy of (a tied output embedding on the first
  // and the last stage, a table every stage of an encoder uses), the same list on every stage:
  // the copies are one parameter — their gradients are summed over the stages holding one, and
  // the lowest such stage's copy is the one saved and counted. Collective over the groups (the
  // stages agree which of them hold each tied parameter; ZeRO-3 releases the parameters here).
  GradSync(nn::NamedTensors named, std::vector<bool> split, std::vector<nn::ParamUnit> units,
           std::vector<std::string> tied, NamedGroups groups, GradSyncOptions opts);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // The optimizer's parameter groups: `groups` with each parameter replaced by its ZeRO slice
  // (unchanged without ZeRO); the slices are cut in the groups' order. Called once, before
  // training.
  std::vector<optim::ParamGroup> optimizer_groups(std::vector<optim::ParamGroup> groups);
  // ZeRO-3's hooks around the model's units (install with Model::set_param_use_hooks), or null.
  nn::ParamUseHooks* param_use_hooks() const;

  void prepare();  // before the step's last backward: arms the overlapped reductions
  // After backward: completes the reductions, sums the tied copies. Returns the seconds of
  // gradient communication that backward did not hide (the buckets' and ZeRO's waits after
  // backward, and the tied sum, which runs after it).
  double finish();
  // The logical gradient norm of gradients that hold grad_scale x the true ones (before
  // clipping), and the factor clipping to max_norm (<= 0: none) multiplies every gradient by
  // (optim::clip_factor). The gradients stay as they are: the optimizer applies the factor as it
  // reads them (Optimizer::set_grad_scale).
  struct Clipping {
    double norm, factor;
  };
  Clipping clip(double max_norm, double grad_scale) const;
  // The optimizer step: on the slices and then the all-gather under ZeRO, else opt.step().
  void update(optim::Optimizer& opt);

  // Memory: bytes of parameters (ZeRO slices included) and of gradients (the reduced slices'
  // buffers under ZeRO 2/3), each storage counted once through `count`; the peak of ZeRO's
  // communication buffers since reset_buffer_peak().
  void count_memory(const std::function<void(const Tensor&, int64_t&)>& count, int64_t& params, int64_t& grads) const;
  int64_t buffer_peak_bytes() const;
  void reset_buffer_peak();
  // Bytes a ring algorithm sends for this rank's collectives and sends so far, over every group
  // it uses (each once), estimated from the message sizes (CommStats).
  uint64_t comm_bytes() const;

  // Checkpoint layout: parameter k's ZeRO slice, or null without ZeRO; whether ZeRO-3 holds the
  // parameters only as slices; whether parameter k is split over tp; whether this stage's
  // parameter k is the copy of a tied parameter whose copy on a lower stage is the one saved.
  const ParamShard* shard_of(size_t k) const;
  bool params_sliced() const { return opts_.zero_stage >= 3 && zero_shards_ != nullptr; }
  int zero_stage() const { return zero_.empty() ? 0 : opts_.zero_stage; }  // in effect (0 without dp)
  bool split(size_t k) const { return split_[k]; }
  bool tied_copy(size_t k) const { return tied_copy_[k]; }
  const NamedGroups& groups() const { return g_; }
  // The reducer of the data-parallel gradients (of every parameter when tp == 1), or null.
  const parallel::GradReducer* grad_reducer() const { return reducer_.get(); }

 private:
  void set_zero();
  void set_tied(std::vector<std::string> tied);
  void sum_tied_gradients();
  std::vector<Tensor> params() const;

  nn::NamedTensors named_;
  std::vector<bool> split_, tied_copy_;  // tied_copy_: a tied parameter a lower stage also holds
  // Tied parameters this rank holds that other stages hold too, in the order of the sorted tied
  // names (the same on every stage): the parameter and the group of the stages holding it.
  std::vector<std::pair<size_t, comm::CommPtr>> tied_sums_;
  std::vector<nn::ParamUnit> units_;
  NamedGroups g_;
  GradSyncOptions opts_;
  std::unique_ptr<parallel::GradReducer> reducer_, replicated_reducer_;
  std::vector<ParamShard> zero_;
  std::unique_ptr<parallel::ZeroShards> zero_shards_;  // stages 2 and 3
};

}  // namespace mf::parallel
