#include "meshflow/parallel/groups.h"

#include "meshflow/ops/ops.h"

namespace mf::parallel {

Groups make_groups(comm::CommPtr dp, comm::CommPtr tp, comm::CommPtr all, comm::CommPtr pp, comm::CommPtr world,
                   double timeout_seconds) {
  Groups g;
  auto keep = [&](comm::CommPtr c) -> comm::CommPtr {
    if (!c) return nullptr;
    c->set_timeout_seconds(timeout_seconds);
    return c->size() > 1 ? std::move(c) : nullptr;
  };
  // The tp group's timeout is set even with one rank: the model's layers hold it.
  if (tp) tp->set_timeout_seconds(timeout_seconds);
  g.dp = keep(std::move(dp));
  g.tp = tp && tp->size() > 1 ? std::move(tp) : nullptr;
  g.all = keep(std::move(all));
  g.pp = keep(std::move(pp));
  g.world = keep(std::move(world));
  if (g.pp) {
    MF_CHECK(g.world != nullptr, "parallel groups: pipeline parallelism needs the world group");
    g.tied = g.pp->sub_group({0, g.pp->size() - 1});
  }
  return g;
}

double sum_over(comm::Communicator* group, double local) {
  if (!group) return local;
  Tensor t = full({1}, local, DType::kF64);
  group->all_reduce(t)->wait();
  return t.data<double>()[0];
}

std::vector<double> sum_over(comm::Communicator* group, const std::vector<double>& local) {
  if (!group || local.empty()) return local;
  Tensor t = from_vector(local, {static_cast<int64_t>(local.size())});
  group->all_reduce(t)->wait();
  return std::vector<double>(t.data<double>(), t.data<double>() + local.size());
}

double mean_over(comm::Communicator* group, double local) {
  return group ? sum_over(group, local) / static_cast<double>(group->size()) : local;
}

bool any_over(comm::Communicator* group, bool local) {
  if (!group) return local;
  Tensor t = full({1}, local ? 1.0 : 0.0, DType::kF64);
  group->all_reduce(t, comm::ReduceOp::kMax)->wait();
  return t.data<double>()[0] > 0;
}

double max_over(comm::Communicator* group, double local) {
  if (!group) return local;
  Tensor t = full({1}, local, DType::kF64);
  group->all_reduce(t, comm::ReduceOp::kMax)->wait();
  return t.data<double>()[0];
}

void barrier(comm::Communicator* group) {
  if (group) group->barrier()->wait();
}

std::string text_from_rank0(comm::Communicator* group, const std::string& text) {
  if (!group || group->size() == 1) return text;
  const auto size = static_cast<int64_t>(sum_over(group, group->rank() == 0 ? static_cast<double>(text.size()) : 0.0));
  Tensor t = zeros({size}, DType::kI32);
  if (group->rank() == 0)
    for (int64_t i = 0; i < size; ++i) t.data<int32_t>()[i] = static_cast<unsigned char>(text[static_cast<size_t>(i)]);
  group->broadcast(t, 0)->wait();
  std::string out(static_cast<size_t>(size), ' ');
  for (int64_t i = 0; i < size; ++i) out[static_cast<size_t>(i)] = static_cast<char>(t.data<int32_t>()[i]);
  return out;
}

}  // namespace mf::parallel
