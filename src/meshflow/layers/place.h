// Where a model's layers live, and what every global-view layer shares. A Place is the placement
// of a layer's tensors as an n-D mesh of named dimensions — the parallel dimensions the layers
// are placed over (global/parallel_dims.h's `places_layers`: "tp" today; one rank in a single
// process) — with the SBP the activations between layers have there: B, or S(1) on "tp" (split on
// the sequence axis) when the run splits the sequence. A layer says which tensor axis goes on
// which named dimension (sbp({{"tp", S(k)}}), B on the others: the Mesh-TensorFlow / GSPMD idea),
// so a new dimension is a new name, not a new layer class. The layers' weights are split over
// Place::kWeights ("tp"; nn/param_layout.h). The runtime builds it (parallel/context.h; models/
// model.h hands it to the model, the model to its layers); the model never reads it.
// A model is built whole on every rank: the parts another rank holds (other pipeline stages) are
// built on a shape-only Place, whose layers declare their parameters (names, logical shapes,
// splits: nn::Module::declared_parameters()) without allocating them. The planner and the weight
// checks build the whole model so (Place::shape_only with the tensor-parallel size to plan).
// The data-parallel and pipeline dimensions are not part of it: each data-parallel rank runs its
// slice of the batch (random/batch_slice.h) and the runtime reduces the gradients
// (parallel/grad_sync.h); a pipeline stage is a set of layers (models/model.h).
//
// A layer declares its parameters' SBPs (layers/layers.h); its forward calls
// global ops (global/global_ops.h), which pick their signatures and box their inputs.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshflow/global/global_ops.h"
#include "meshflow/nn/mixed_precision.h"

namespace mf::layers {

using global::GlobalTensor;

// One named dimension of a Place and the ranks along it (null: one rank).
struct PlaceDim {
  std::string name;  // "tp"
  comm::CommPtr comm;
};

class Place {
 public:
  // The dimension the layers' weights are split over (Megatron's tensor parallelism).
  static constexpr const char* kWeights = "tp";
  // The dimension that splits every sequence (context parallelism): the activations between
  // layers are S(1) on it, attention runs around its ring (global/ring_attention.h).
  static constexpr const char* kSequence = "cp";

  Place() = default;  // one rank
  // The ranks along `dims` (outermost first), bound for global ops on the CPU and on CUDA. `all`:
  // the group of every rank of the Place, ordered row-major by the dims' indices (for one
  // dimension its own communicator; null when every dimension has one rank).
  // `sequence_parallel`: the activations between layers are S(1) on kWeights.
  Place(std::vector<PlaceDim> dims, comm::CommPtr all, bool sequence_parallel);
  // A shape-only Place whose weights are split as over `size` ranks (as rank 0), no communicator:
  // its layers declare parameters and hold none. kAnyRanks: every split a layer takes over
  // several ranks, unchecked (the planner's view: which parameters tensor parallelism splits).
  static constexpr int kAnyRanks = -1;
  static Place shape_only(int size);
  // The same ranks, shape-only: a part of the model another rank holds.
  Place elsewhere() const;
  // Whether this rank holds the layers built on it (false: shape-only).
  bool held() const { return held_; }
  // How attention runs over kSequence's ranks: around the ring (false), or with the sequence
  // traded for the heads by all-to-alls around the attention core (true: DeepSpeed-Ulysses).
  void set_sequence_to_heads(bool on) { sequence_to_heads_ = on; }
  // The SBP attention's q, k, v take for its core: `like` with the heads (axis 1) split on
  // kSequence instead of the sequence when the sequence is traded for the heads; else `like`.
  const global::NdSbp* attention_sbp(const global::NdSbp* like) const;

  // The named dimensions, outermost first (those of one rank included).
  const std::vector<PlaceDim>& dims() const { return dims_; }
  // Ranks along dimension `dim` and this rank's index there (1 and 0 for a name it lacks).
  int size(std::string_view dim) const;
  int rank(std::string_view dim) const;
  comm::Communicator* comm(std::string_view dim) const;

  // The placement of tensors on `device` (the same ranks whatever the device): one mesh axis per
  // dimension of more than one rank (a single rank: one axis of one rank).
  const global::Placement* placement(Device device) const;
  int world_rank() const { return world_rank_; }
  // The ranks the weights are split over (kWeights), and this rank's index among them.
  int size() const { return nominal_size_ > 0 ? nominal_size_ : size(kWeights); }
  int rank() const { return rank(kWeights); }
  // Whether the layers split their parameters here: more than one rank, or any number.
  bool splits() const { return size() > 1 || nominal_size_ == kAnyRanks; }
  // Every rank of the Place (the product of its dimensions' sizes): the ranks a B tensor's
  // gradient is a partial sum over.
  int ranks() const;
  bool any_ranks() const { return nominal_size_ == kAnyRanks; }

  // The SBP with `on`'s Sbp on each named dimension and B on the others (a dimension of one rank,
  // or one the Place lacks, has no mesh axis: its Sbp is dropped).
  const global::NdSbp* sbp(std::initializer_list<std::pair<std::string_view, global::Sbp>> on) const;
  // `like` with `s` on dimension `dim`, its other dimensions kept: what a layer changes of one
  // dimension (a column-split layer gathers its input on kWeights, whatever splits the batch).
  const global::NdSbp* with(const global::NdSbp* like, std::string_view dim, const global::Sbp& s) const;
  // `like` whole on kWeights: the input a column-split layer computes with.
  const global::NdSbp* gathered(const global::NdSbp* like) const { return with(like, kWeights, global::Sbp::broadcast()); }
  // The SBP of the activations between layers: S(1) on kSequence (when it has several ranks), and
  // on kWeights S(1) when sequence parallelism splits the sequence there, else B;
  // with `like`: on kWeights so, on the other dimensions like's (a layer's output keeps them).
  const global::NdSbp* hidden_sbp() const { return hidden_; }
  const global::NdSbp* hidden_sbp(const global::NdSbp* like) const;
  const global::NdSbp* broadcast() const { return broadcast_; }
  // The loss head's input: S(1) on kSequence (each rank's own tokens: layers/lm_loss.h), B on the
  // others.
  const global::NdSbp* head_sbp() const { return sbp({{kSequence, global::Sbp::split(1)}}); }
  // S(axis) on kWeights, B on the others.
  const global::NdSbp* split_on(int axis) const { return sbp({{kWeights, global::Sbp::split(axis)}}); }

  // `local` as this rank's piece of a global tensor with `sbp` and `logical` shape (throws when
  // its shape is not the piece's); B: the logical shape is its own.
  GlobalTensor wrap(const Tensor& local, const global::NdSbp* sbp, const Shape& logical) const;
  GlobalTensor wrap(const Tensor& local) const { return wrap(local, broadcast(), local.shape()); }

 private:
  std::vector<PlaceDim> dims_{{kWeights, nullptr}};
  std::vector<int> mesh_dims_;  // the index in dims_ of each mesh axis
  bool sequence_parallel_ = false;
  bool sequence_to_heads_ = false;
  // B on every mesh axis, and the activations' SBP between layers (made once: layers ask per call).
  const global::NdSbp* broadcast_ = global::nd_sbp({global::Sbp::broadcast()});
  const global::NdSbp* hidden_ = broadcast_;
  // The mesh axis of dimension `dim`: -1 for one of one rank or one the Place lacks (a Place of one
  // rank has one axis, which stands for kWeights).
  int axis_of(std::string_view dim) const;
  int world_rank_ = 0;
  bool held_ = true;
  int nominal_size_ = 0;  // a shape-only Place's weight ranks (0: the communicator's; kAnyRanks)
  const global::Placement* cpu_ = nullptr;
  const global::Placement* cuda_ = nullptr;
  std::shared_ptr<global::PlacementBinding> cpu_binding_, cuda_binding_;
};

// Mixed precision on global tensors (nn/mixed_precision.h): an activation leaving a layer rounded
// through the storage dtype; itself for f32/f64.
GlobalTensor round_to(const GlobalTensor& x, DType storage);
// Elementwise steps between layers, their result rounded so: dropout with probability p (x itself,
// no stream drawn, when p is 0) and a scale by s.
GlobalTensor dropout(const GlobalTensor& x, double p, DType storage);
GlobalTensor scale(const GlobalTensor& x, double s, DType storage);

}  // namespace mf::layers
