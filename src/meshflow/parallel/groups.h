// The communicators of one rank in a parallel run, by name, and the scalar reductions the
// training loop makes over them. The names: each parallel dimension (global/parallel_dims.h:
// "pp", "dp", "tp" — the ranks that differ from this one only along it, ordered by it), "stage"
// (every dimension but pp: the ranks of this rank's pipeline stage), "dp_cp" (dp x cp: the ranks
// holding the same piece of every parameter, whose gradients are reduced together), "tied" (the first and the
// last pipeline stage: the tied parameters' copies) and "world" (every rank). A group of one rank
// is null: every helper is then the identity.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/global/parallel_dims.h"

namespace mf::parallel {

class NamedGroups {
 public:
  NamedGroups();  // every group null: one process

  // The group `name` (null: one rank); throws naming the groups for an unknown name.
  comm::Communicator* get(std::string_view name) const { return slot(name).get(); }
  const comm::CommPtr& ptr(std::string_view name) const { return slot(name); }
  int size(std::string_view name) const;
  int rank(std::string_view name) const;

  // The sizes of the dimensions' groups, and this rank's index along each.
  global::ParallelDims dims() const;
  std::vector<int64_t> coordinate() const;
  bool last_stage() const { return rank("pp") == size("pp") - 1; }
  // Every rank of the run (null: one process).
  comm::Communicator* everyone() const;
  bool main_rank() const { return everyone() == nullptr || everyone()->rank() == 0; }

  // Sets a group; one of one rank is kept null.
  void set(std::string_view name, comm::CommPtr group);

 private:
  comm::CommPtr& slot(std::string_view name);
  const comm::CommPtr& slot(std::string_view name) const;

  std::vector<std::pair<std::string, comm::CommPtr>> groups_;
};

// The groups from each dimension's, the stage's and the world's communicator (`named`: by name,
// missing ones null): sets every group's collective timeout, drops groups of one rank, makes
// `tied` over the first and the last stage when there are stages, and `dp_cp` dp's group when
// there is no cp.
NamedGroups make_groups(const std::vector<std::pair<std::string, comm::CommPtr>>& named, double timeout_seconds);

double sum_over(comm::Communicator* group, double local);   // identity without a group
std::vector<double> sum_over(comm::Communicator* group, const std::vector<double>& local);  // elementwise, one all-reduce
double mean_over(comm::Communicator* group, double local);  // the mean over the group's ranks
bool any_over(comm::Communicator* group, bool local);       // true on every rank when true on one
double max_over(comm::Communicator* group, double local);  // the largest over the group's ranks
void barrier(comm::Communicator* group);
// Rank 0's text on every rank of the group (a short line or document; identity without a group).
std::string text_from_rank0(comm::Communicator* group, const std::string& text);

}  // namespace mf::parallel
