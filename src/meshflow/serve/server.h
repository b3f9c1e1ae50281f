// `meshflow serve`: an HTTP server with OpenAI's completions API over a GenerateFn (the engine's
// generate, or a stand-in in tests).
//
//   GET  /health          {"status": "ok"}
//   GET  /v1/models       the served model
//   POST /v1/completions  openai.h; "stream": true answers with server-sent events
//
// Concurrent requests run as the rows of one batch (batcher.h). On several ranks this object lives
// on rank 0; the other ranks run follow() (batch_wire.h). One log line per request. Slow or idle
// clients cannot starve the others (http_guard.h: a deadline on a request's headers, a thread per
// connection up to a limit, a limit per client).
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "meshflow/comm/communicator.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/serve/batch_wire.h"
#include "meshflow/serve/batcher.h"
#include "meshflow/serve/http_guard.h"

namespace mf::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port (bind() says which)
  int64_t max_batch = 8;            // rows per engine call, and prompts per request
  double batch_wait_ms = 5.0;       // how long a batch waits for more requests after its first
  std::string model_name = "meshflow";
  int64_t max_sequence_length = 0;  // prompt + max_tokens must fit (the engine's)
  size_t max_body_bytes = 16u << 20;
  // Slow and idle clients (http_guard.h): connections served at once, a thread each (0:
  // max(256, 4 * max_batch)); of them from one IP address (0: a quarter of those); the time for a
  // request's line and headers in all; for each read; for an idle keep-alive connection.
  int64_t max_connections = 0;
  int64_t max_connections_per_client = 0;
  double header_timeout_s = 10;
  double read_timeout_s = 5;
  double keep_alive_s = 2;
};

// The HTTP limits `o` asks for, its zeros replaced by their defaults.
HttpLimits http_limits(const ServeOptions& o);

struct ServerStats {
  int64_t requests = 0;    // answered 200
  int64_t refused = 0;     // answered 4xx
  int64_t failed = 0;      // answered 5xx
  int64_t cancelled = 0;   // streams whose client went away before their end
  BatcherStats batches;
};

class Server {
 public:
  // world: null or one rank alone, or rank 0 of several. log: one line per request (null: none).
  Server(GenerateFn generate, std::shared_ptr<const Tokenizer> tok, ServeOptions options,
         comm::CommPtr world = nullptr, std::FILE* log = stdout);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Listens on host:port; returns the port. Throws when it cannot.
  int bind();
  // Serves until stop() (binding first if bind() was not called): then refuses new requests,
  // fails the queued ones (503), lets the running batch finish and its responses go out, shuts
  // the other ranks down and returns. Rethrows an engine failure that ended a multi-rank server.
  void run();
  // Any thread (not a signal handler: see signals.h); returns at once.
  void stop();

  ServerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::serve
