// The meshflow command line: `meshflow train|eval|preprocess|convert|generate|serve|report|plan|profile ...`. Every failure prints one
// line "meshflow: error: ..." and exits non-zero.
//
// Started by a launcher (`mpirun -np N meshflow train ...`, or `srun` with PMIx), it joins the
// job's MPI world and trains on all its ranks; a failing rank prints its line prefixed with its
// rank and exits at once, without MPI_Finalize, so the launcher ends the job; a rank terminated
// by the launcher because another failed or died (SIGTERM) prints one line saying so. While the
// trainer trains, SIGTERM, SIGINT and SIGUSR1 instead stop every rank after the same step with a
// checkpoint and exit 0 (train/stop_signal.h).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

#include "meshflow/comm/watchdog.h"
#include "meshflow/config/config.h"
#include "meshflow/data/image_folder.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/core/device.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/infer/run.h"
#include "meshflow/infer/load.h"
#include "meshflow/launch/supervisor.h"
#include "meshflow/plan/fit.h"
#include "meshflow/plan/profile.h"
#include "meshflow/plan/run.h"
#include "meshflow/report/report.h"
#include "meshflow/serve/server.h"
#include "meshflow/serve/signals.h"
#include "meshflow/runtime/build.h"
#include "meshflow/runtime/components.h"
#include "meshflow/runtime/device_select.h"
#include "meshflow/runtime/pretrained.h"
#include "meshflow/train/run.h"
#if MESHFLOW_WITH_MPI
#include "meshflow/comm/mpi/mpi_communicator.h"
#endif
#if MESHFLOW_WITH_NCCL
#include "meshflow/comm/nccl/nccl_communicator.h"
#endif
#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/device_info.h"
#endif

namespace {

struct PreprocessArgs {
  std::vector<std::string> inputs;
  std::string config;  // its tokenization.* keys are the defaults of the flags below
  std::string output_prefix, tokenizer, vocab_file, merges_file, tokenizer_file, eod_token, extra_ids;
  std::string format = "auto", json_key = "text", split = "separator", separator = "%";
  bool append_eod = false, no_eod = false, split_sentences = false;
  int64_t shuffle_seed = -1;
  std::string images;        // an image folder to pack (instead of --input)
  int64_t image_size = 224;  // --images: the packed squares' side
  int threads = 2;           // --images: decoding threads
};

// `preprocess --images ROOT`: the packed image dataset (data/image_folder.h).
int run_preprocess_images(const PreprocessArgs& a) {
  const mf::PackImagesResult r = mf::pack_image_folder(a.images, a.output_prefix, a.image_size, a.threads);
  std::printf("wrote %s and %s: %lld images of %lldx%lld RGB in %lld classes (%lld bytes)\n", r.bin.c_str(),
              r.json.c_str(), static_cast<long long>(r.images), static_cast<long long>(a.image_size),
              static_cast<long long>(a.image_size), static_cast<long long>(r.classes), static_cast<long long>(r.bytes));
  return 0;
}

int run_preprocess(const PreprocessArgs& a) {
  MF_CHECK(!a.images.empty() || !a.inputs.empty(), "preprocess: give --input (text to tokenize) or --images (an image "
           "folder to pack)");
  MF_CHECK(a.images.empty() || a.inputs.empty(), "preprocess: give --input or --images, not both");
  const std::string prefix_name = std::filesystem::path(a.output_prefix).filename().string();
  MF_CHECK(!prefix_name.empty() && prefix_name != "." && prefix_name != "..", "preprocess: --output-prefix '",
           a.output_prefix, "' names no file prefix (e.g. data/my: data/my_text_document.bin)");
  for (const std::string& in : a.inputs)
    MF_CHECK(!std::filesystem::is_directory(in), "preprocess: --input ", in, " is a folder; give its files");
  if (!a.images.empty()) return run_preprocess_images(a);
  // The tokenization section (of --config, else the defaults document), then the flags given.
  mf::Config c = a.config.empty() ? mf::Config::defaults() : mf::Config::load(a.config);
  if (!a.tokenizer.empty()) c.set("tokenization.tokenizer", a.tokenizer, "--tokenizer");
  if (!a.vocab_file.empty()) c.set("tokenization.vocab_file", a.vocab_file, "--vocab-file");
  if (!a.merges_file.empty()) c.set("tokenization.merges_file", a.merges_file, "--merges-file");
  if (!a.tokenizer_file.empty()) c.set("tokenization.tokenizer_file", a.tokenizer_file, "--tokenizer-file");
  if (!a.eod_token.empty()) c.set("tokenization.eod_token", a.eod_token, "--eod-token");
  if (!a.extra_ids.empty()) c.set("tokenization.extra_ids", a.extra_ids, "--extra-ids");
  if (a.append_eod) c.set("tokenization.append_eod", "true", "--append-eod");
  if (a.no_eod) c.set("tokenization.append_eod", "false", "--no-eod");
  auto tok = mf::runtime::tokenizer_from_config(c);
  mf::PreprocessOptions o;
  o.format = a.format == "jsonl" ? mf::InputFormat::kJsonl : a.format == "text" ? mf::InputFormat::kText : mf::InputFormat::kAuto;
  o.json_key = a.json_key;
  o.text_split = a.split == "blank" ? mf::TextSplit::kBlankLine
                 : a.split == "file" ? mf::TextSplit::kWholeFile
                                     : mf::TextSplit::kSeparatorLine;
  o.separator = a.separator;
  o.append_eod = c.get_bool("tokenization.append_eod");
  if (a.shuffle_seed >= 0) o.shuffle_seed = static_cast<uint64_t>(a.shuffle_seed);
  o.split_sentences = a.split_sentences;
  mf::PreprocessResult r = mf::preprocess(a.inputs, a.output_prefix, *tok, o);
  const std::string dropped =
      r.dropped_empty == 0 ? std::string()
                           : mf::detail::cat("; ", r.dropped_empty, " document", r.dropped_empty == 1 ? "" : "s",
                                             " left out: they tokenize to no ids");
  std::printf("wrote %s.bin/.idx: %lld documents, %lld tokens (%s tokenizer, %lld bytes of text)%s\n", r.prefix.c_str(),
              static_cast<long long>(r.documents), static_cast<long long>(r.tokens), tok->name().c_str(),
              static_cast<long long>(r.bytes_in), dropped.c_str());
  return 0;
}

// `meshflow devices`: the build's backends and the GPUs this process sees. The first line is
// machine-readable ("cuda_devices N"); scripts skip GPU tests on 0.
int run_devices() {
  const int n = mf::cuda_device_count();
  std::printf("cuda_devices %d\n", n);
  std::printf("cuda backend: %s\n", mf::cuda_backend_compiled() ? "compiled" : "not compiled (configure with the CUDA toolkit)");
#if MESHFLOW_WITH_CUDA
  for (int i = 0; i < n; ++i) {
    const mf::cuda::DeviceInfo d = mf::cuda::device_info(i);
    std::printf("cuda:%d %s, sm_%d%d, %d SMs, %.1f GiB\n", i, d.name.c_str(), d.major, d.minor, d.multiprocessors,
                static_cast<double>(d.total_bytes) / (1024.0 * 1024.0 * 1024.0));
  }
#endif
#if MESHFLOW_WITH_NCCL
  std::printf("nccl: compiled\n");
#else
  std::printf("nccl: not compiled\n");
#endif
  return 0;
}

// A GPU run of several processes talks through NCCL (host tensors through its MPI group). Picks
// this rank's GPU first: the NCCL communicator lives on the current device.
mf::comm::CommPtr device_world(const mf::Config& c, const mf::comm::CommPtr& world) {
  if (!world || world->size() == 1 || mf::global::device_type_from_config(c) != mf::DeviceType::kCUDA) return world;
  mf::runtime::select_run_device(c);  // fails with the one-line device errors
#if MESHFLOW_WITH_NCCL
  auto mpi = std::dynamic_pointer_cast<mf::comm::MpiCommunicator>(world);
  MF_CHECK(mpi != nullptr, "train.dist.device_type=cuda: the world communicator is not MPI's");
  return mf::comm::NcclCommunicator::create(mpi);
#else
  return world;  // run_training refuses it with its own message
#endif
}

// True when a launcher started this process as one rank of a job.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

char g_term_line[160];
size_t g_term_len = 0;

extern "C" void on_terminate(int) {
  // A running failure watchdog explains the termination itself (names the rank that died).
  if (mf::comm::Watchdog::forward_signal(SIGTERM)) return;
  // Async-signal-safe: a prepared line, write(2), _exit.
  ssize_t n = write(STDERR_FILENO, g_term_line, g_term_len);
  (void)n;
  _exit(128 + SIGTERM);
}

void install_termination_handler(int rank, int size) {
  std::snprintf(g_term_line, sizeof g_term_line,
                "meshflow: error: [rank %d/%d] terminated by the launcher: another rank of the job failed or died "
                "(see its message above)\n",
                rank, size);
  g_term_len = std::strlen(g_term_line);
  struct sigaction sa {};
  sa.sa_handler = on_terminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

CLI::App* add_preprocess_command(CLI::App& app, PreprocessArgs& pa) {
  auto* pre = app.add_subcommand("preprocess", "Tokenize jsonl or text into a Megatron indexed dataset (.bin/.idx), "
                                  "or pack an image folder (--images)");
  pre->add_option("--input", pa.inputs, "input files (jsonl, or text)");
  pre->add_option("--output-prefix", pa.output_prefix,
                  "writes <prefix>_<json-key>_document.bin/.idx (--images: <prefix>.bin and <prefix>.json)")
      ->required();
  pre->add_option("--images", pa.images,
                  "an image folder ROOT/<class>/<image>.png|jpg|jpeg to pack instead: each image decoded, its shorter "
                  "side resized to --image-size and the centre square cropped, RGB bytes in <prefix>.bin, labels and "
                  "class names in <prefix>.json (data.train_folder / data.validation_folder read either)");
  pre->add_option("--image-size", pa.image_size, "--images: the side of the packed squares (model.image_size)")
      ->capture_default_str()
      ->check(CLI::Range(1, 16384));
  pre->add_option("--threads", pa.threads, "--images: decoding threads")->capture_default_str()->check(CLI::Range(1, 1024));
  pre->add_option("--config", pa.config,
                  "a run's YAML config: its tokenization.* keys (tokenizer, vocab_file, merges_file, tokenizer_file, "
                  "eod_token, extra_ids, do_lower_case, append_eod) are the defaults of the flags below");
  pre->add_option("--tokenizer", pa.tokenizer,
                  "gpt2_bpe, hf_bpe, sentencepiece, wordpiece or byte (default: tokenization.tokenizer, gpt2_bpe)");
  pre->add_option("--vocab-file", pa.vocab_file, "GPT-2 vocab.json or encoder.json (default: tokenization.vocab_file)");
  pre->add_option("--merges-file", pa.merges_file, "GPT-2 merges.txt or vocab.bpe (default: tokenization.merges_file)");
  pre->add_option("--tokenizer-file,--tokenizer-model", pa.tokenizer_file,
                  "hf_bpe: tokenizer.json; sentencepiece: tokenizer.model or spiece.model (T5); wordpiece: vocab.txt; or "
                  "the folder holding it (default: tokenization.tokenizer_file)");
  pre->add_option("--eod-token", pa.eod_token,
                  "hf_bpe / sentencepiece: the end-of-document token's text (default: tokenization.eod_token)");
  pre->add_option("--extra-ids", pa.extra_ids,
                  "sentencepiece: T5's sentinel tokens <extra_id_0>.. after the model's pieces, written in the text "
                  "as single tokens (T5: 100; default: tokenization.extra_ids, 0)")
      ->type_name("INT");
  pre->add_option("--format", pa.format, "auto (by extension), jsonl or text")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "jsonl", "text"}));
  pre->add_option("--json-key", pa.json_key, "jsonl key holding the document text")->capture_default_str();
  pre->add_option("--split", pa.split, "text documents: separator (a line equal to --separator), blank, or file")
      ->capture_default_str()
      ->check(CLI::IsMember({"separator", "blank", "file"}));
  pre->add_option("--separator", pa.separator, "document separator line for --split separator")->capture_default_str();
  auto* eod = pre->add_flag("--append-eod", pa.append_eod,
                            "append the end-of-document token to every document (default: tokenization.append_eod, true)");
  pre->add_flag("--no-eod", pa.no_eod, "do not append the end-of-document token")->excludes(eod);
  pre->add_flag("--split-sentences", pa.split_sentences,
                "one sequence per sentence (BERT's sentence pairs); writes <prefix>_<json-key>_sentence.bin/.idx");
  pre->add_option("--shuffle-seed", pa.shuffle_seed,
                  "write documents in a seeded random order, so that data.splits ranges mix all inputs");
  return pre;
}

struct ConvertArgs {
  std::string from_hf, to_hf, output;
};

CLI::App* add_convert_command(CLI::App& app, ConvertArgs& ca) {
  auto* conv = app.add_subcommand("convert", "Convert model weights between Hugging Face and meshflow checkpoints");
  conv->add_option("--from-hf", ca.from_hf,
                   "Hugging Face model to import (a registered model_type, e.g. gpt2): a folder with config.json and "
                   "model.safetensors, or the .safetensors file");
  conv->add_option("--to-hf", ca.to_hf,
                   "meshflow checkpoint to export: a run's output_dir, a converted checkpoint, or a checkpoints/iter_N folder");
  conv->add_option("--output", ca.output,
                   "folder to write: a meshflow checkpoint (--from-hf), or config.json + model.safetensors (--to-hf)")
      ->required();
  conv->footer("Examples:\n  meshflow convert --from-hf gpt2/ --output ckpt/gpt2   # then: meshflow train CONFIG model.pretrained=ckpt/gpt2\n"
               "  meshflow convert --to-hf output/gpt2_tiny --output hf/gpt2_tiny");
  return conv;
}

struct ServeArgs {
  std::string host = "127.0.0.1";
  int port = 8000;
  int64_t max_batch = 8;
  double batch_wait_ms = 5.0;
  std::string model_name;  // default: model.name
  int64_t max_connections = 0, max_connections_per_client = 0;  // 0: the server's defaults
  double header_timeout_s = 10, read_timeout_s = 5;
};

CLI::App* add_serve_command(CLI::App& app, std::string& config, std::vector<std::string>& overrides, ServeArgs& sa) {
  auto* srv = app.add_subcommand("serve", "Serve a model over HTTP with OpenAI's completions API (POST /v1/completions, "
                                 "GET /v1/models, GET /health)");
  srv->add_option("config", config,
                  "the run's YAML config: the latest checkpoint in train.output_dir, or model.pretrained")
      ->required();
  srv->add_option("overrides", overrides, "key=value overrides");
  srv->add_option("--host", sa.host, "address to listen on")->capture_default_str();
  srv->add_option("--port", sa.port, "port to listen on (0: any free one)")->capture_default_str()->check(CLI::Range(0, 65535));
  srv->add_option("--max-batch", sa.max_batch, "concurrent requests run together as the rows of one batch, up to this "
                  "many rows")->capture_default_str()->check(CLI::Range(1, 4096));
  srv->add_option("--batch-wait-ms", sa.batch_wait_ms, "how long a batch waits for more requests after its first")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  srv->add_option("--served-model-name", sa.model_name, "the model's name in responses (default: model.name)");
  // Slow or idle clients must not starve the others (a thread serves each connection).
  srv->add_option("--max-connections", sa.max_connections, "connections served at once, a thread each; more wait "
                  "(0: max(256, 4 x --max-batch))")->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
  srv->add_option("--max-connections-per-client", sa.max_connections_per_client, "connections one IP address may "
                  "hold at once; more are answered 429 (0: a quarter of --max-connections)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
  srv->add_option("--header-timeout-s", sa.header_timeout_s, "seconds for a request's line and headers in all; "
                  "past them it is answered 408 and the connection closed")->capture_default_str()->check(CLI::Range(0.001, 86400.0));
  srv->add_option("--read-timeout-s", sa.read_timeout_s, "seconds each read of a request (its body too) may wait")
      ->capture_default_str()->check(CLI::Range(0.001, 86400.0));
  srv->footer("Example:\n  meshflow serve configs/gpt2/tiny.yaml --port 8000 &\n"
              "  curl localhost:8000/v1/completions -H 'Content-Type: application/json' \\\n"
              "       -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 32, \"stream\": true}'\n"
              "Several ranks (mpirun -np N, train.dist.*_parallel_size): rank 0 serves HTTP, the others follow.");
  return srv;
}

CLI::App* add_launch_command(CLI::App& app, std::string& config, std::vector<std::string>& overrides,
                             mf::launch::LaunchOptions& lo) {
  auto* l = app.add_subcommand("launch", "Run `meshflow train` under mpirun and restart it from the latest complete "
                               "checkpoint when it fails (optionally on fewer processes)");
  l->add_option("config", config, "the run's YAML config")->required();
  l->add_option("overrides", overrides, "key=value overrides, passed to every attempt");
  l->add_option("--nproc", lo.nproc, "processes of the job (mpirun -np)")->required()->check(CLI::Range(1, 1 << 20));
  l->add_option("--min-nproc", lo.min_nproc, "the fewest processes a restart may use after a failure that lost a rank "
                "(or a second failure at one size): tensor and pipeline sizes kept, data parallelism shrunk, "
                "accumulation raised to keep the global batch (default: --nproc)")->check(CLI::Range(1, 1 << 20));
  l->add_option("--max-restarts", lo.max_restarts, "restarts before giving up")->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  l->add_option("--launcher", lo.launcher, "the launcher and its flags, split on spaces; -np N follows "
                "(default: mpirun on PATH)");
  l->footer("Example:\n  meshflow launch --nproc 4 --min-nproc 2 --launcher \"mpirun --oversubscribe\" "
            "configs/gpt2/tiny.yaml\nEach attempt is a line of <train.output_dir>/launch.jsonl.");
  return l;
}

struct ReportArgs {
  std::vector<std::string> runs;
  std::string output;  // default: RUN_DIR/report (one run)
};

CLI::App* add_report_command(CLI::App& app, ReportArgs& ra) {
  auto* rep = app.add_subcommand("report", "Write an HTML report of training runs (self-contained, works offline) "
                                 "with each figure also as an SVG file");
  rep->add_option("runs", ra.runs, "run folders written by meshflow train (metrics.jsonl, config.yaml, and "
                  "trace.json when profiled); several are overlaid in the curves")
      ->required();
  rep->add_option("--output", ra.output,
                  "folder for index.html and the figures' .svg files (default for one run: RUN_DIR/report; "
                  "required for several)");
  rep->footer("The page: loss and validation loss, learning rate, gradient norm, tokens/s and MFU over steps; each "
              "rank's memory by kind and step time in parts (the last training line); with trace.json, the "
              "pipeline timeline of the first profiled step and the measured bubble beside the schedule's; the "
              "config.\nExamples:\n  meshflow report output/gpt2_tiny-X   # -> output/gpt2_tiny-X/report/index.html\n"
              "  meshflow report runs/a runs/b --output compare/");
  return rep;
}

int run_report(const ReportArgs& a) {
  const std::string out = a.output.empty() ? mf::report::default_output_dir(a.runs) : a.output;
  const mf::report::ReportFiles files = mf::report::write_report(a.runs, out);
  for (const std::string& w : files.warnings) std::fprintf(stderr, "meshflow: warning: %s\n", w.c_str());
  std::printf("wrote %s and %zu figures (.svg) beside it\n", files.index_html.c_str(), files.svg_files.size());
  return 0;
}

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

}  // namespace

int main(int argc, char** argv) {
  mf::comm::CommPtr world;
#if MESHFLOW_WITH_MPI
  std::unique_ptr<mf::comm::MpiRuntime> mpi;
  if (launched_by_mpi()) {
    try {
      mpi = std::make_unique<mf::comm::MpiRuntime>(&argc, &argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "meshflow: error: %s\n", e.what());
      return 1;
    }
    world = mpi->world();
    install_termination_handler(world->rank(), world->size());
  }
#else
  if (launched_by_mpi())
    std::fprintf(stderr, "meshflow: warning: started by an MPI launcher, but this build has no MPI "
                         "(configure with -DMESHFLOW_WITH_MPI=ON); running as a single process\n");
#endif
  const std::string who =
      world && world->size() > 1 ? mf::detail::cat("[rank ", world->rank(), "/", world->size(), "] ") : std::string();
  CLI::App app{"meshflow: train Transformer models on one device or many, from one model code"};
  app.require_subcommand(1);

  std::string config;
  std::vector<std::string> overrides;
  auto* train = app.add_subcommand("train", "Train a model from a YAML config (LiBai key names)");
  train->add_option("config", config, "YAML config file, e.g. configs/gpt2/tiny.yaml")->required();
  train->add_option("overrides", overrides, "key=value overrides, e.g. train.train_iter=100 optim.lr=3e-4");

  auto* eval = app.add_subcommand("eval", "Evaluate the latest checkpoint of a run on its validation split");
  eval->add_option("config", config, "the run's YAML config (or <output_dir>/config.yaml)")->required();
  eval->add_option("overrides", overrides, "key=value overrides");
  std::string eval_output;
  eval->add_option("--output", eval_output, "the JSON file of the result in full precision (val_loss, val_ppl, step, "
                   "tokens; default: <train.output_dir>/eval_results.json)");

  PreprocessArgs pa;
  auto* pre = add_preprocess_command(app, pa);
  ConvertArgs ca;
  auto* conv = add_convert_command(app, ca);
  mf::infer::GenerateArgs ga;
  auto* gen = app.add_subcommand("generate", "Generate text from a trained or pretrained causal language model");
  gen->add_option("config", config, "the run's YAML config (its latest checkpoint) or one with model.pretrained=...")->required();
  gen->add_option("overrides", overrides, "key=value overrides, e.g. model.pretrained=hf/gpt2 train.dist.tensor_parallel_size=2");
  // One text per --prompt: a key=value after it is a setting (it once became a second prompt).
  gen->add_option("--prompt", ga.prompts, "prompt text (repeat the flag for a batch)")->allow_extra_args(false);
  gen->add_option("--prompt-file", ga.prompt_file, "a file of prompts, one per line, generated as one batch");
  gen->add_option("--max-new-tokens", ga.max_new_tokens, "tokens to generate per prompt")->check(CLI::Range(1, 1 << 30));
  gen->add_flag("--do-sample", ga.sampling.do_sample, "sample (default: greedy)");
  gen->add_option("--temperature", ga.sampling.temperature, "sampling temperature (> 0)");
  gen->add_option("--top-k", ga.sampling.top_k, "keep the k most likely tokens (0: all)");
  gen->add_option("--top-p", ga.sampling.top_p, "keep the most likely tokens up to this probability mass (1: all)");
  gen->add_option("--repetition-penalty", ga.sampling.repetition_penalty, "divide the logits of tokens already seen (1: off)");
  gen->add_option("--seed", ga.sampling.seed, "sampling seed: the same seed draws the same tokens in any layout");
  gen->add_option("--num-beams", ga.num_beams, "beam search with this many beams (1: greedy or sampling)")->check(CLI::Range(1, 1024));
  gen->add_option("--length-penalty", ga.length_penalty, "beam search: hypotheses score log-probability / length^this");
  gen->add_flag("--ignore-eos", ga.ignore_eos, "do not stop at the end-of-text token");
  gen->add_flag("--print-ids", ga.print_ids, "print the new token ids of each prompt");
  ServeArgs sa;
  auto* serve = add_serve_command(app, config, overrides, sa);
  ReportArgs ra;
  auto* report = add_report_command(app, ra);
  mf::launch::LaunchOptions lo;
  auto* launch = add_launch_command(app, config, overrides, lo);
  mf::plan::PlanArgs pla;
  pla.train = mf::train::run_training;
  auto* plan = app.add_subcommand("plan", "Rank every parallel layout of a config's model on N ranks by predicted step time, "
                                  "with memory per rank and why the others are out (graph.auto_parallel.enabled=true "
                                  "trains with the first)");
  plan->add_option("config", config, "YAML config file, e.g. configs/gpt2/tiny.yaml")->required();
  plan->add_option("overrides", overrides, "key=value overrides; a layout key set to other than its default is kept");
  plan->add_option("--nproc", pla.nproc, "processes (ranks) to plan for")->check(CLI::Range(1, 1 << 20));
  plan->add_option("--memory-per-rank", pla.memory_per_rank_gb, "GB a rank may use (default: the hardware profile's)")
      ->check(CLI::Range(0.0, 1e9));
  plan->add_option("--hardware", pla.hardware, "host (this machine), a100-80gb, h100-80gb, or a file written by meshflow profile");
  plan->add_option("--top", pla.top, "plans to print (0: all)")->check(CLI::Range(0, 1 << 30));
  plan->add_flag("--rejected", pla.rejected, "also print every rejected layout with its reason");
  plan->add_flag("--json", pla.json, "print every feasible plan as a JSON line (layout keys, predicted time and memory)");
  plan->add_option("--measure", pla.measure, "train N plans (0: all), spread over the ranking with the first included, "
                   "each for --steps steps in this job, and print their measured step time and peak memory beside the "
                   "predicted (under mpirun -np --nproc)")->check(CLI::Range(0, 1 << 30));
  plan->add_option("--steps", pla.steps, "--measure: steps per plan; the median of those after the first two is its time")->check(CLI::Range(1, 1000000));
  plan->add_option("--skip", pla.skip, "--measure: leave out the plans of this file (lines --measure --json printed "
                   "before), to resume an interrupted sweep");
  plan->footer("Example: meshflow plan configs/gpt2/tiny.yaml --nproc 8; mpirun -np 8 meshflow plan configs/gpt2/tiny.yaml "
               "--measure 20 (--nproc defaults to the job's size)");
  mf::plan::ProfileOptions pro;
  auto* profile = app.add_subcommand("profile", "Measure this machine for the planner (GEMM, attention, memory, each "
                                     "collective per group size; every rank at once): a file for meshflow plan --hardware");
  profile->add_option("--output", pro.output, "the profile file to write (JSON)");
  profile->add_option("--repeats", pro.repeats, "timed repeats per measurement (the median counts)")->check(CLI::Range(1, 10000));
  profile->add_option("--published", pro.published, "write this published profile (a100-80gb, h100-80gb) instead of "
                      "measuring: a file to edit for another cluster or runtime");
  profile->footer("Example: mpirun -np 8 meshflow profile --output host8.json; meshflow plan CONFIG --nproc 8 --hardware host8.json");
  auto* devices = app.add_subcommand("devices", "Print the CUDA devices this process sees (first line: cuda_devices N)");

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
    if (*train) {
      const mf::Config c = mf::plan::auto_parallel(mf::Config::load(config, overrides), world, stdout);
      mf::plan::check_model_state_fits(c, world);
      const mf::comm::CommPtr run_world = device_world(c, world);
      mf::train::run_training(c, stdout, run_world);
    } else if (*profile) {
      mf::plan::measure_profile(world, pro, stdout);
    } else if (*plan) {
      if (plan->count("--nproc") == 0 && world) pla.nproc = world->size();
      return mf::plan::run_plan(mf::Config::load(config, overrides), pla, stdout, world);
    } else if (*gen) {
      const mf::Config c = mf::Config::load(config, overrides);
      mf::infer::run_generation(c, ga, stdout, device_world(c, world));
    } else if (*report) {
      return run_report(ra);
    } else if (*launch) {
      MF_CHECK(!world, "launch starts the job's processes itself: run it directly, not under mpirun");
      lo.config = config;
      lo.overrides = overrides;
      return mf::launch::run_launch(lo);
    } else if (*devices) {
      return run_devices();
    } else if (*eval) {
      MF_CHECK(!world || world->size() == 1, "eval runs in one process (it reads the checkpoint of any layout): run "
               "it without mpirun, not on ", world ? world->size() : 1, " ranks");
      const mf::Config c = mf::Config::load(config, overrides);
      // The check on the layout eval runs with (one process), not the one that trained the run.
      mf::plan::check_model_state_fits(mf::runtime::one_process_config(c), nullptr, mf::plan::ModelUse::kInference);
      mf::train::run_evaluation(c, stdout, eval_output);
    } else if (*serve) {
      return run_serve(mf::Config::load(config, overrides), world, sa);
    } else if (*pre) {
      return run_preprocess(pa);
    } else if (*conv) {
      MF_CHECK(ca.from_hf.empty() != ca.to_hf.empty(), "convert: give one of --from-hf and --to-hf");
      const std::string done = ca.from_hf.empty() ? mf::runtime::convert_to_hf(ca.to_hf, ca.output)
                                                  : mf::runtime::convert_from_hf(ca.from_hf, ca.output);
      std::printf("%s\n", done.c_str());
    }
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
