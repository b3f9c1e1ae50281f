// The communicators of one rank in a parallel run, and the scalar reductions the training loop
// makes over them. A group of one rank is null: every helper is then the identity.
#pragma once
#include <string>

#include "meshflow/comm/communicator.h"

namespace mf::parallel {

struct Groups {
  comm::CommPtr dp;     // the data-parallel group (same stage and tp index)
  comm::CommPtr tp;     // the tensor-parallel group (the model's split layers)
  comm::CommPtr all;    // this pipeline stage's dp x tp ranks
  comm::CommPtr pp;     // the pipeline stages (same dp and tp index), ordered by stage
  comm::CommPtr world;  // every rank of the run
  comm::CommPtr tied;   // the first and the last pipeline stage (tied parameters' copies)

  int dp_size() const { return dp ? dp->size() : 1; }
  int dp_rank() const { return dp ? dp->rank() : 0; }
  int tp_size() const { return tp ? tp->size() : 1; }
  int tp_rank() const { return tp ? tp->rank() : 0; }
  int pp_size() const { return pp ? pp->size() : 1; }
  int pp_rank() const { return pp ? pp->rank() : 0; }
  bool last_stage() const { return pp_rank() == pp_size() - 1; }
  // Every rank of the run (null: one process).
  comm::Communicator* everyone() const { return world ? world.get() : all ? all.get() : dp.get(); }
  bool main_rank() const { return everyone() == nullptr || everyone()->rank() == 0; }
};

// Drops groups of one rank, sets every group's collective timeout, and makes `tied` over the first
// and the last stage when there are stages.
Groups make_groups(comm::CommPtr dp, comm::CommPtr tp, comm::CommPtr all, comm::CommPtr pp, comm::CommPtr world,
                   double timeout_seconds);

double sum_over(comm::Communicator* group, double local);   // identity without a group
std::vector<double> sum_over(comm::Communicator* group, const std::vector<double>& local);  // elementwise, one all-reduce
double mean_over(comm::Communicator* group, double local);  // the mean over the group's ranks
bool any_over(comm::Communicator* group, bool local);       // true on every rank when true on one
double max_over(comm::Communicator* group, double local);  // the largest over the group's ranks
void barrier(comm::Communicator* group);
// Rank 0's text on every rank of the group (a short line or document; identity without a group).
std::string text_from_rank0(comm::Communicator* group, const std::string& text);

}  // namespace mf::parallel
