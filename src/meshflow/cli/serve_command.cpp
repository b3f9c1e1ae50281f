// `meshflow serve`: a model over HTTP with OpenAI's completions API.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/cli/process.h"
#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/infer/load.h"
#include "meshflow/serve/server.h"
#include "meshflow/serve/signals.h"
#include "meshflow/runtime/device_select.h"

namespace mf::cli {
namespace {

struct ServeArgs {
  std::string host = "127.0.0.1";
  int port = 8000;
  int64_t max_batch = 8;
  double batch_wait_ms = 5.0;
  std::string model_name;  // default: model.name
  int64_t max_connections = 0, max_connections_per_client = 0;  // 0: the server's defaults
  double header_timeout_s = 10, read_timeout_s = 5;
};

// `meshflow serve`: rank 0 answers HTTP until SIGINT/SIGTERM; the other ranks run the batches it
// sends them.
int run_serve(const mf::Config& c, const mf::comm::CommPtr& world, const ServeArgs& a) {
  const mf::comm::CommPtr run_world = device_world(c, world);
  const mf::infer::LoadedModel m = mf::infer::load_for_inference(c, run_world);
  const std::shared_ptr<mf::infer::Engine> engine = m.engine;
  // Rank 0 generates on the server's worker thread: the run's GPU must be current there too (CUDA's
  // current device belongs to a thread).
  const mf::serve::GenerateFn generate = [engine, c](const std::vector<mf::infer::GenerationRequest>& rows,
                                                     const mf::infer::TokenCallback& on_token) {
    thread_local bool device_set = false;
    if (!device_set) mf::runtime::select_run_device(c);
    device_set = true;
    return engine->generate(rows, on_token);
  };
  const bool several = run_world && run_world->size() > 1;
  if (!m.main_rank) {
    // The launcher's SIGTERM (mpirun passes its own on to every rank) stops rank 0, which drains its
    // streams and then sends the followers the shutdown message: they wait for it rather than end
    // as a failed rank. A rank 0 that dies instead ends the job through MPI.
    std::signal(SIGTERM, SIG_IGN);
    std::signal(SIGINT, SIG_IGN);
    mf::serve::follow(generate, *run_world);
    return 0;
  }
  mf::serve::ServeOptions o;
  o.host = a.host;
  o.port = a.port;
  o.max_batch = a.max_batch;
  o.batch_wait_ms = a.batch_wait_ms;
  o.model_name = a.model_name.empty() ? c.get_string("model.name") : a.model_name;
  o.max_sequence_length = engine->max_sequence_length();
  o.max_connections = a.max_connections;
  o.max_connections_per_client = a.max_connections_per_client;
  o.header_timeout_s = a.header_timeout_s;
  o.read_timeout_s = a.read_timeout_s;
  mf::serve::Server server(generate, m.tokenizer, o, several ? run_world : nullptr, stdout);
  const int port = server.bind();
  const std::string ranks = several ? mf::detail::cat(" over ", run_world->size(), " ranks") : std::string();
  std::printf("%s\nserving %s on http://%s:%d (POST /v1/completions, GET /v1/models, GET /health): up to %lld "
              "tokens a row, batches of up to %lld rows%s; Ctrl-C stops\n",
              m.description.c_str(), o.model_name.c_str(), o.host.c_str(), port,
              static_cast<long long>(o.max_sequence_length), static_cast<long long>(o.max_batch),
              ranks.c_str());
  std::fflush(stdout);
  mf::serve::StopOnSignals signals([&server] { server.stop(); });
  server.run();
  return 0;
}

class ServeCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* srv = app.add_subcommand("serve", "Serve a model over HTTP with OpenAI's completions API (POST /v1/completions, "
                                   "GET /v1/models, GET /health)");
    srv->add_option("config", config_,
                    "the run's YAML config: the latest checkpoint in train.output_dir, or model.pretrained")
        ->required();
    srv->add_option("overrides", overrides_, "key=value overrides");
    srv->add_option("--host", a_.host, "address to listen on")->capture_default_str();
    srv->add_option("--port", a_.port, "port to listen on (0: any free one)")->capture_default_str()->check(CLI::Range(0, 65535));
    srv->add_option("--max-batch", a_.max_batch, "concurrent requests run together as the rows of one batch, up to this "
                    "many rows")->capture_default_str()->check(CLI::Range(1, 4096));
    srv->add_option("--batch-wait-ms", a_.batch_wait_ms, "how long a batch waits for more requests after its first")
        ->capture_default_str()
        ->check(CLI::Range(0, 60000));
    srv->add_option("--served-model-name", a_.model_name, "the model's name in responses (default: model.name)");
    // Slow or idle clients must not starve the others (a thread serves each connection).
    srv->add_option("--max-connections", a_.max_connections, "connections served at once, a thread each; more wait "
                    "(0: max(256, 4 x --max-batch))")->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
    srv->add_option("--max-connections-per-client", a_.max_connections_per_client, "connections one IP address may "
                    "hold at once; more are answered 429 (0: a quarter of --max-connections)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
    srv->add_option("--header-timeout-s", a_.header_timeout_s, "seconds for a request's line and headers in all; "
                    "past them it is answered 408 and the connection closed")->capture_default_str()->check(CLI::Range(0.001, 86400.0));
    srv->add_option("--read-timeout-s", a_.read_timeout_s, "seconds each read of a request (its body too) may wait")
        ->capture_default_str()->check(CLI::Range(0.001, 86400.0));
    srv->footer("Example:\n  meshflow serve configs/gpt2/tiny.yaml --port 8000 &\n"
                "  curl localhost:8000/v1/completions -H 'Content-Type: application/json' \\\n"
                "       -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 32, \"stream\": true}'\n"
                "Several ranks (mpirun -np N, train.dist.*_parallel_size): rank 0 serves HTTP, the others follow.");
    return srv;
  }

  int run(const comm::CommPtr& world) override { return run_serve(mf::Config::load(config_, overrides_), world, a_); }

 private:
  std::string config_;
  std::vector<std::string> overrides_;
  ServeArgs a_;
};

}  // namespace

std::unique_ptr<Command> serve_command() { return std::make_unique<ServeCommand>(); }

}  // namespace mf::cli
