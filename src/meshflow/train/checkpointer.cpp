#include "meshflow/train/checkpointer.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/core/trace.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/random/generator.h"
#include "meshflow/train/state_slots.h"
#include "meshflow/train/stop_signal.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

namespace fs = std::filesystem;

void save_checkpoint(const TrainingStateRefs& run) {
  // Every rank writes its own pieces, in parallel; nothing is gathered (io/checkpoint.h).
  std::vector<io::ShardPiece> mine;
  for (const StateSlot& s : state_slots(run.model, run.sync, run.optimizer))
    if (s.writer) mine.push_back({s.name, s.local, s.logical, s.region});
  io::TrainingState st;
  st.iter = run.iter;
  st.optimizer_steps = run.optimizer.step_count();
  st.data_position = run.train_data.position();
  st.rng = default_generator().state();
  if (run.scaler.enabled()) st.loss_scaler = run.scaler.state();
  st.skipped_iters = run.skipped_iters;
  st.run = io::RunConstants{run.opts.seq_length, run.global_batch_size, run.opts.seed};
  std::map<std::string, int64_t> layout = run.groups.dims().named();  // {"dp": 2, "pp": 1, "tp": 2}
  layout["virtual_pp"] = run.model.stage().num_chunks();
  layout["zero_stage"] = run.sync.zero_stage();
  io::write_checkpoint_shards(run.groups.everyone(), run.opts.output_dir, st, run.opts.config_yaml, layout, mine,
                              run.opts.max_to_keep);
}

namespace {
// Opens and verifies the latest checkpoint (none: nullopt). A damaged newest checkpoint: the
// error names the complete one before it, which a resume can use.
std::optional<io::CheckpointReader> open_latest_verified(const std::string& output_dir, comm::Communicator* everyone) {
  std::optional<io::CheckpointReader> reader;
  try {
    if (auto found = io::CheckpointReader::open_latest(output_dir)) reader.emplace(std::move(*found));
    if (reader) reader->verify(everyone);
  } catch (const Error& e) {
    const std::vector<std::string> complete = io::complete_checkpoints(output_dir);
    std::string bad = reader ? fs::path(reader->dir()).filename().string() : std::string();
    const fs::path latest = fs::path(output_dir) / "checkpoints" / "latest";
    if (bad.empty() && fs::exists(latest)) {  // the metadata of the checkpoint `latest` names failed (or is gone)
      bad = read_file(latest.string());
      while (!bad.empty() && (bad.back() == '\n' || bad.back() == ' ')) bad.pop_back();
      if (!io::is_checkpoint_name(bad) || !fs::is_directory(fs::path(output_dir) / "checkpoints" / bad)) bad.clear();
    }
    std::string previous;
    for (const std::string& n : complete)
      if (!bad.empty() && n != bad && std::stoll(n.substr(5)) < std::stoll(bad.substr(5))) {
        previous = n;
        break;
      }
    if (previous.empty()) throw;
    throw Error(std::string(e.what()) + "; the previous complete checkpoint is " + previous +
                ": to resume from it, write its name into " + latest.string());
  }
  return reader;
}

// A checkpoint of another model (fewer layers: its tensors are a subset of this model's names
// only where they match) is refused, not read in part: every parameter it holds is this model's.
void check_same_model(const io::CheckpointReader& reader, const models::Model& model) {
  std::set<std::string> params;
  for (const auto& [name, shape] : model.parameter_shapes()) params.insert("model/" + name);
  for (const std::string& name : reader.names())
    MF_CHECK(name.rfind("model/", 0) != 0 || params.count(name) != 0, "checkpoint ", reader.dir(), ": tensor '",
             name.substr(6), "' is not a parameter of this model (", model.describe(),
             "): train.resume continues the run the checkpoint's config.yaml describes; its model.* keys must not "
             "change");
}

// Throws naming the key when this run's sequence length, global batch or seed is not the one
// the checkpoint at `dir` recorded (a resume continues that run's data).
void check_run_continues(const TrainingStateRefs& run, const std::string& dir, const io::TrainingState& st) {
  if (!st.run) return;  // a tool's checkpoint, or an earlier version's: nothing recorded
  const io::RunConstants& was = *st.run;
  const TrainOptions& o = run.opts;
  auto refuse = [&](const std::string& key, const std::string& now, const std::string& then) {
    MF_THROW("train.resume: ", key, " ", now, " differs from ", then, " in checkpoint ", dir,
             ": a resumed run continues the data of the run it resumes; set ", key, "=", then,
             ", or start a new run in another train.output_dir");
  };
  if (o.seq_length != was.seq_length) refuse("data.seq_length", std::to_string(o.seq_length), std::to_string(was.seq_length));
  if (run.global_batch_size != was.global_batch_size)
    refuse("train.global_batch_size",
           detail::cat(run.global_batch_size, " (train_micro_batch_size ", o.micro_batch, " x num_accumulation_steps ",
                       o.accumulation_steps, " x data_parallel_size ", run.groups.size("dp"), ")"),
           std::to_string(was.global_batch_size));
  if (o.seed != was.seed) refuse("train.seed", std::to_string(o.seed), std::to_string(was.seed));
}
}  // namespace

bool load_latest_checkpoint(const TrainingStateRefs& run) {
  std::optional<io::CheckpointReader> reader = open_latest_verified(run.opts.output_dir, run.groups.everyone());
  if (!reader) {
    manual_seed(run.opts.seed);
    return false;
  }
  if (!reader->note().empty() && run.groups.main_rank())
    std::fprintf(stderr, "meshflow: warning: resuming from %s (%s)\n", reader->dir().c_str(), reader->note().c_str());
  check_same_model(*reader, run.model);
  check_run_continues(run, reader->dir(), reader->state());
  MF_CHECK(reader->state().iter <= run.opts.train_iter, "train.resume: checkpoint ", reader->dir(), " is at iteration ",
           reader->state().iter, ", past train.train_iter=", run.opts.train_iter,
           ": raise train.train_iter to train on from it");
  // Each rank reads the regions it holds, whatever layout wrote them.
  NoGradGuard ng;
  for (StateSlot& s : state_slots(run.model, run.sync, run.optimizer)) {
    MF_CHECK(reader->has(s.name), "checkpoint ", reader->dir(), ": no tensor '", s.name, "' (this model and the ",
             run.optimizer.name(), " optimizer need it)");
    MF_CHECK(reader->shape(s.name) == s.logical, "checkpoint ", reader->dir(), ": tensor '", s.name, "' is ",
             shape_str(reader->shape(s.name)), ", this model's is ", shape_str(s.logical));
    reader->read(s.name, s.region, s.local);
  }
  const io::TrainingState& st = reader->state();
  run.optimizer.set_step_count(st.optimizer_steps);
  run.iter = st.iter;
  run.train_data.set_position(st.data_position);
  default_generator().set_state(st.rng);
  if (st.loss_scaler) run.scaler.set_state(*st.loss_scaler);
  run.skipped_iters = st.skipped_iters;
  return true;
}

void resume_or_seed(const TrainingStateRefs& run) {
  if (!run.opts.resume)
    manual_seed(run.opts.seed);
  else if (!load_latest_checkpoint(run) && run.groups.main_rank())
    std::fprintf(stderr, "meshflow: train.resume: no checkpoint in %s: starting from step 0\n",
                 (fs::path(run.opts.output_dir) / "checkpoints").string().c_str());
}

void save_at_stop(const TrainingStateRefs& run, int signal) {
  {
    const trace::Scope phase = trace::enabled() ? trace::Scope("checkpoint", "checkpoint save") : trace::Scope();
    save_checkpoint(run);
  }
  if (!run.groups.main_rank()) return;
  std::fflush(stdout);
  std::fprintf(stderr, "meshflow: received %s at step %lld: saved checkpoint %s, exiting\n", signal_name(signal).c_str(),
               static_cast<long long>(run.iter),
               (fs::path(run.opts.output_dir) / "checkpoints" / io::checkpoint_name(run.iter)).string().c_str());
  std::fflush(stderr);
}

}  // namespace mf::train
