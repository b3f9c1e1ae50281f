// The request queue of the server: concurrent requests run together as the rows of one batch.
// A worker thread takes every waiting request (up to max_batch rows, waiting batch_wait_ms after
// the first for more to arrive) and runs one GenerateFn call for them; each row's tokens turn into
// text (text_stream.h) handed to its request as they come, for the HTTP side to stream.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/serve/batch_wire.h"
#include "meshflow/serve/openai.h"

namespace mf::serve {

// New text of one choice; a non-empty finish_reason marks its last piece.
struct TextDelta {
  int64_t index = 0;
  std::string text;
  std::string finish_reason;
};

// One HTTP request's rows and what the worker produced for them so far.
struct Job {
  std::vector<infer::GenerationRequest> rows;  // one per prompt
  std::vector<std::string> stop;               // stop strings
  bool stream = false;                         // keep the deltas (else only the choices)

  std::mutex mu;
  std::condition_variable cv;  // notified on every delta and when done
  std::vector<Choice> choices;
  std::deque<TextDelta> deltas;
  bool done = false;
  int status = 200;         // 503 (refused at shutdown), 500 (the engine failed)
  std::string error;        // non-empty when it failed
  int64_t batch_rows = 0;   // rows of the batch it ran in
  double queued_s = 0.0;    // from submission to the start of its batch
  std::atomic<bool> cancelled{false};  // the client went away: its rows end at their next token

  // Blocks until done.
  void wait();
};
using JobPtr = std::shared_ptr<Job>;

struct BatcherOptions {
  int64_t max_batch = 8;        // rows per GenerateFn call
  double batch_wait_ms = 5.0;   // after the first waiting request, how long to wait for more
};

struct BatcherStats {
  int64_t jobs = 0, rows = 0, batches = 0, prompt_tokens = 0, completion_tokens = 0, failed_batches = 0;
};

class Batcher {
 public:
  // world: null or one rank alone, or rank 0 of several (each batch is sent to the others first,
  // batch_wire.h). Starts the worker.
  // on_fatal: called on the worker thread when an engine failure ends it (several ranks).
  Batcher(GenerateFn generate, std::shared_ptr<const Tokenizer> tok, BatcherOptions options,
          comm::CommPtr world = nullptr, std::function<void()> on_fatal = {});
  ~Batcher();  // stop() and join()

  // Queues a job (its rows at most max_batch); throws RequestError (503) once stopping.
  void submit(const JobPtr& job);
  // Refuses new jobs, fails the queued ones (503) and lets the running batch finish; the worker
  // then sends the other ranks the shutdown message and ends. Any thread; returns at once.
  void stop();
  // Waits for the worker to end; rethrows an engine failure that ended it (several ranks: an
  // engine error is fatal, the ranks may no longer agree on what comes next).
  void join();
  bool stopping() const;

  BatcherStats stats() const;

 private:
  std::vector<JobPtr> take_batch();
  void run_batch(const std::vector<JobPtr>& jobs);
  void work();

  GenerateFn generate_;
  std::shared_ptr<const Tokenizer> tok_;
  BatcherOptions options_;
  comm::CommPtr world_;
  std::function<void()> on_fatal_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<JobPtr, double>> queue_;  // with the submission time (steady seconds)
  bool stopping_ = false;
  BatcherStats stats_;
  std::exception_ptr fatal_;
  std::thread worker_;
};

}  // namespace mf::serve
