#include "meshflow/parallel/groups.h"

#include "meshflow/core/error.h"
#include "meshflow/ops/ops.h"

namespace mf::parallel {

NamedGroups::NamedGroups() {
  for (const global::DimSpec& d : global::dim_specs()) groups_.emplace_back(d.name, nullptr);
  for (const char* name : {"stage", "dp_cp", "tied", "world"}) groups_.emplace_back(name, nullptr);
}

const comm::CommPtr& NamedGroups::slot(std::string_view name) const {
  for (const auto& [n, c] : groups_)
    if (n == name) return c;
  std::string known;
  for (const auto& g : groups_) known += (known.empty() ? "" : ", ") + g.first;
  MF_THROW("parallel groups: no group named '", name, "' (the groups: ", known, ")");
}

comm::CommPtr& NamedGroups::slot(std::string_view name) {
  return const_cast<comm::CommPtr&>(static_cast<const NamedGroups&>(*this).slot(name));
}

int NamedGroups::size(std::string_view name) const {
  const comm::Communicator* c = get(name);
  return c ? c->size() : 1;
}

int NamedGroups::rank(std::string_view name) const {
  const comm::Communicator* c = get(name);
  return c ? c->rank() : 0;
}

global::ParallelDims NamedGroups::dims() const {
  global::ParallelDims d;
  for (size_t i = 0; i < d.count(); ++i) d.set(d.name(i), size(d.name(i)));
  return d;
}

std::vector<int64_t> NamedGroups::coordinate() const {
  std::vector<int64_t> c;
  for (const global::DimSpec& d : global::dim_specs()) c.push_back(rank(d.name));
  return c;
}

comm::Communicator* NamedGroups::everyone() const {
  for (const char* name : {"world", "stage", "dp"})
    if (comm::Communicator* c = get(name)) return c;
  return nullptr;
}

void NamedGroups::set(std::string_view name, comm::CommPtr group) {
  slot(name) = group && group->size() > 1 ? std::move(group) : nullptr;
}

NamedGroups make_groups(const std::vector<std::pair<std::string, comm::CommPtr>>& named, double timeout_seconds) {
  NamedGroups g;
  for (const auto& [name, c] : named) {
    // Set even on a group of one rank: the model's layers may hold it (the tp group).
    if (c) c->set_timeout_seconds(timeout_seconds);
    g.set(name, c);
  }
  // Without context parallelism the ranks holding the same parameter pieces are dp's.
  if (!g.get("dp_cp") && !g.get("cp")) g.set("dp_cp", g.ptr("dp"));
  MF_CHECK(!g.get("cp") || g.get("dp_cp"), "parallel groups: context parallelism needs the dp_cp group");
  if (comm::Communicator* pp = g.get("pp")) {
    MF_CHECK(g.get("world") != nullptr, "parallel groups: pipeline parallelism needs the world group");
    g.set("tied", pp->sub_group({0, pp->size() - 1}));
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
