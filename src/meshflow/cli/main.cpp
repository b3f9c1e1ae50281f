// The meshflow command line: `meshflow COMMAND ...`, the commands train, eval, preprocess, convert,
// generate, serve, report, launch, plan, profile, devices and config. Every failure prints one line
// "meshflow: error: ..." and exits non-zero.
//
// Started by a launcher (`mpirun -np N meshflow train ...`, or `srun` with PMIx), it joins the
// job's MPI world and trains on all its ranks; a failing rank prints its line prefixed with its
// rank and exits at once, without MPI_Finalize, so the launcher ends the job; a rank terminated
// by the launcher because another failed or died (SIGTERM) prints one line saying so. While the
// trainer trains, SIGTERM, SIGINT and SIGUSR1 instead stop every rank after the same step with a
// checkpoint and exit 0 (train/stop_signal.h).
//
// This file parses and dispatches; each command lives in a file of its own (commands.h), and
// what they share about the process (its MPI world) in process.h.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/cli/process.h"
#include "meshflow/comm/communicator.h"
#include "meshflow/core/error.h"

namespace {

// Every command, in the order `meshflow --help` lists them.
std::vector<std::unique_ptr<mf::cli::Command>> all_commands() {
  std::vector<std::unique_ptr<mf::cli::Command>> c;
  c.push_back(mf::cli::train_command());
  c.push_back(mf::cli::eval_command());
  c.push_back(mf::cli::preprocess_command());
  c.push_back(mf::cli::convert_command());
  c.push_back(mf::cli::generate_command());
  c.push_back(mf::cli::serve_command());
  c.push_back(mf::cli::report_command());
  c.push_back(mf::cli::launch_command());
  c.push_back(mf::cli::plan_command());
  c.push_back(mf::cli::profile_command());
  c.push_back(mf::cli::devices_command());
  c.push_back(mf::cli::config_command());
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  mf::cli::Process process;
  if (!process.start(&argc, &argv)) return 1;
  const mf::comm::CommPtr& world = process.world();
  const std::string who =
      world && world->size() > 1 ? mf::detail::cat("[rank ", world->rank(), "/", world->size(), "] ") : std::string();
  CLI::App app{"meshflow: train Transformer models on one device or many, from one model code"};
  app.require_subcommand(1);

  const std::vector<std::unique_ptr<mf::cli::Command>> commands = all_commands();
  std::vector<CLI::App*> subs;
  for (const auto& command : commands) subs.push_back(command->add(app));

  // An unknown command: one line naming it and the commands there are (CLI11 would say only that
  // a subcommand is required).
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (!names.empty()) names += ", ";
    names += sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "meshflow: error: unknown command '%s'; the commands are %s (meshflow --help)\n", argv[1],
                 names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // one line, as every other error: the command and what to fix
    std::string what = e.what();
    for (char& ch : what)
      if (ch == '\n') ch = ' ';
    const std::string cmd = argc > 1 && argv[1][0] != '-' ? std::string(" ") + argv[1] : std::string();
    std::fprintf(stderr, "meshflow: error: %s (meshflow%s --help)\n", what.c_str(), cmd.c_str());
    return e.get_exit_code();
  }
  try {
    for (size_t i = 0; i < commands.size(); ++i)
      if (*subs[i]) return commands[i]->run(world);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "meshflow: error: %s%s\n", who.c_str(), e.what());
    std::fflush(stderr);
    // Other ranks may wait in a collective for this one: leave without MPI_Finalize, so the
    // launcher ends the job instead of it hanging.
    if (world) std::_Exit(1);
    return 1;
  }
  return 0;
}
