#include "meshflow/train/trace_hook.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/trace.h"
#include "meshflow/global/parallel_dims.h"
#include "meshflow/ops/ops.h"
#include "meshflow/parallel/pipeline_schedule.h"
#include "meshflow/tensor/allocator.h"

namespace mf::train {

namespace {

namespace fs = std::filesystem;

Device g_probe_device = cpu_device();
int64_t allocated_bytes() { return allocator_for(g_probe_device).stats().current_bytes; }

// A string as an i64 tensor (zero-padded to whole elements) for point-to-point messages.
Tensor pack(const std::string& s) {
  Tensor t = zeros({static_cast<int64_t>((s.size() + 7) / 8)}, DType::kI64);
  if (!s.empty()) std::memcpy(t.data<int64_t>(), s.data(), s.size());
  return t;
}

std::string wrap(const std::string& events, const nlohmann::ordered_json& other) {
  return "{\"traceEvents\":[\n" + events + "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" + other.dump() + "}\n";
}

}  // namespace

void TraceHook::before_step(Trainer& t) {
  const TrainOptions::Profile& p = t.options().profile;
  const int64_t next = t.iter() + 1;
  if (recording_ && next >= first_step_ + p.num_steps) finish(t);
  if (recording_ || done_ || next < p.start_step || next >= p.start_step + p.num_steps) return;
  parallel::barrier(t.groups().everyone());  // a common time zero
  g_probe_device = t.device();
  trace::set_memory_probe(&allocated_bytes);
  trace::start();
  recording_ = true;
  first_step_ = next;
}

void TraceHook::after_train(Trainer& t) {
  if (recording_) finish(t);
}

void TraceHook::finish(Trainer& t) {
  const std::vector<trace::Event> events = trace::stop();
  trace::set_memory_probe(nullptr);
  recording_ = false;
  done_ = true;
  const parallel::NamedGroups& g = t.groups();
  comm::Communicator* everyone = g.everyone();
  const int rank = everyone ? everyone->rank() : 0, n = everyone ? everyone->size() : 1;
  // "rank 3 (stage 1, dp 0, tp 1)": the pipeline stage, then the index along each other dimension.
  std::string name = "rank " + std::to_string(rank) + " (stage " + std::to_string(g.rank("pp"));
  for (const global::DimSpec& d : global::dim_specs())
    if (std::string_view(d.name) != "pp") name += ", " + std::string(d.name) + " " + std::to_string(g.rank(d.name));
  name += ")";
  const std::string mine = trace::to_json(events, rank, name);
  const TrainOptions& o = t.options();
  nlohmann::ordered_json other = {{"pipeline_schedule", g.ptr("pp") ? o.pipeline_schedule : std::string("1f1b")},
                                  {"pipeline_stages", g.size("pp")},
                                  {"micro_batches", o.accumulation_steps},
                                  {"virtual_stages", t.model().stage().num_chunks()},
                                  {"world_size", n},
                                  {"start_step", first_step_},
                                  {"num_steps", t.iter() - first_step_ + 1}};
  for (const global::DimSpec& d : global::dim_specs()) other[d.name] = g.size(d.name);
  const fs::path dir = fs::path(o.output_dir) / "trace";
  fs::create_directories(dir);
  char file[32];
  std::snprintf(file, sizeof file, "rank_%05d.json", rank);
  write_file_atomic((dir / file).string(), wrap(mine, other));
  // Rank 0 receives every other rank's events (its length, then the text) and writes them merged.
  std::string merged = mine;
  for (int r = 1; r < n; ++r) {
    if (rank == r) {
      Tensor len = full({1}, static_cast<double>(mine.size()), DType::kI64);
      everyone->send(len, 0, 1)->wait();
      everyone->send(pack(mine), 0, 2)->wait();
    } else if (rank == 0) {
      Tensor len = zeros({1}, DType::kI64);
      everyone->recv(len, r, 1)->wait();
      const auto size = static_cast<size_t>(len.data<int64_t>()[0]);
      Tensor text = zeros({static_cast<int64_t>((size + 7) / 8)}, DType::kI64);
      everyone->recv(text, r, 2)->wait();
      merged += ",\n";
      merged.append(reinterpret_cast<const char*>(text.data<int64_t>()), size);
    }
  }
  if (rank == 0) write_file_atomic((fs::path(o.output_dir) / "trace.json").string(), wrap(merged, other));
}

}  // namespace mf::train
