// `meshflow launch`: runs a training job under an MPI launcher (`mpirun -np N meshflow train
// CONFIG ...`) and restarts it when it fails, from the latest complete checkpoint
// (train.resume=true), up to a number of restarts — torchrun's elastic agent for MPI jobs.
//
// Restart policy: a restart runs on the same number of processes, except that with min_nproc
// below it, a failure that lost a rank (a rank killed by a signal: SIGKILL, the OOM killer, a
// crash) or a second failure in a row at the same size moves the job to the largest count in
// [min_nproc, current) that holds its layout — tensor and pipeline sizes kept, the data-parallel
// size shrunk and the accumulation steps raised so that the global batch stays the same
// (layout.h). It never grows back. Each attempt is one JSON line of <train.output_dir>/launch.jsonl
// (its size, times, resume point, exit status, cause and what followed) and each restart one line
// on stderr.
#pragma once
#include <string>
#include <vector>

namespace mf::launch {

struct LaunchOptions {
  std::string config;                  // the run's YAML config
  std::vector<std::string> overrides;  // key=value, passed to every attempt
  int nproc = 1;                       // processes of the first attempt
  int min_nproc = 0;                   // the fewest a restart may use; 0 = nproc (never fewer)
  int max_restarts = 3;                // restarts after the first attempt before giving up
  std::string launcher;                // the launcher and its flags, split on spaces ("mpirun
                                       // --oversubscribe"); "" = mpirun on PATH. `-np N` follows.
  std::string program;                 // the meshflow executable the ranks run; "" = this one
};

// The argv of one attempt: launcher words (with --allow-run-as-root added for Open MPI's mpirun
// run as root without OMPI_ALLOW_RUN_AS_ROOT set), -np N, the program, `train`, the config, the
// overrides, then `extra` (resume and layout overrides).
std::vector<std::string> attempt_argv(const LaunchOptions& o, const std::string& launcher_path, int nproc,
                                      const std::vector<std::string>& extra);

// Supervises the job to its end. Returns 0 when an attempt finishes, or when SIGINT, SIGTERM or
// SIGUSR1 stopped it cleanly (passed on to the job as SIGUSR1: every rank saves the same step and
// exits 0; no restart follows); 1 after max_restarts restarts failed too (one "meshflow: error:
// launch: ..." line on stderr); 128 + the signal when the job did not stop cleanly on it. A
// failure whose error says the newest checkpoint is damaged and names the previous complete one
// points `latest` at that one before the restart (with a line saying so). Throws mf::Error before
// any attempt for a config that cannot run (the trainer's checks), a min_nproc that cannot hold its
// layout, an output_dir holding a run without train.resume=true, a train.resume=true output_dir
// that does not exist, an output_dir in use (another launch holds <output_dir>/.launch.lock, or a
// run <output_dir>/.lock), or no launcher.
int run_launch(const LaunchOptions& o);

}  // namespace mf::launch
