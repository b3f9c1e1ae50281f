// The commands of the `meshflow` executable, one object each: main.cpp declares them all on one
// CLI11 app, parses the command line and runs the one it chose. Each lives in a file of its own
// (train_command.cpp: train and eval; plan_command.cpp: plan and profile; ...).
#pragma once

#include <memory>

namespace CLI {
class App;
}
namespace mf::comm {
class Communicator;
using CommPtr = std::shared_ptr<Communicator>;
}  // namespace mf::comm

namespace mf::cli {

class Command {
 public:
  virtual ~Command() = default;
  // Declares the subcommand on app, its options and help text bound to this object; returns it.
  virtual CLI::App* add(CLI::App& app) = 0;
  // Runs it once the command line chose it and parsed: the exit code. A failure throws, and main
  // prints it as one line "meshflow: error: ...". world: the job's MPI world, null in one process.
  virtual int run(const comm::CommPtr& world) = 0;
};

std::unique_ptr<Command> train_command();
std::unique_ptr<Command> eval_command();
std::unique_ptr<Command> preprocess_command();
std::unique_ptr<Command> convert_command();
std::unique_ptr<Command> generate_command();
std::unique_ptr<Command> serve_command();
std::unique_ptr<Command> report_command();
std::unique_ptr<Command> launch_command();
std::unique_ptr<Command> plan_command();
std::unique_ptr<Command> profile_command();
std::unique_ptr<Command> devices_command();
std::unique_ptr<Command> config_command();

}  // namespace mf::cli
