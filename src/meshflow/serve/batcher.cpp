#include "meshflow/serve/batcher.h"

#include <chrono>

#include "meshflow/core/error.h"
#include "meshflow/infer/text_stream.h"

namespace mf::serve {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void fail(Job& job, int status, const std::string& message) {
  std::lock_guard lk(job.mu);
  job.status = status;
  job.error = message;
  job.done = true;
  job.cv.notify_all();
}

// Adds a choice's new text (and its end) to the job.
void emit(Job& job, TextDelta d) {
  std::lock_guard lk(job.mu);
  Choice& c = job.choices[static_cast<size_t>(d.index)];
  c.text += d.text;
  if (!d.finish_reason.empty()) c.finish_reason = d.finish_reason;
  if (job.stream) job.deltas.push_back(std::move(d));
  job.cv.notify_all();
}

}  // namespace

void Job::wait() {
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done; });
}

Batcher::Batcher(GenerateFn generate, std::shared_ptr<const Tokenizer> tok, BatcherOptions options,
                 comm::CommPtr world, std::function<void()> on_fatal)
    : generate_(std::move(generate)),
      tok_(std::move(tok)),
      options_(options),
      world_(std::move(world)),
      on_fatal_(std::move(on_fatal)) {
  MF_CHECK(generate_ && tok_, "serve: the batcher needs a generate function and a tokenizer");
  MF_CHECK(options_.max_batch >= 1, "serve: max_batch must be >= 1, got ", options_.max_batch);
  MF_CHECK(options_.batch_wait_ms >= 0, "serve: batch_wait_ms must be >= 0, got ", options_.batch_wait_ms);
  MF_CHECK(!world_ || world_->rank() == 0, "serve: the batcher runs on rank 0 (the others follow(), batch_wire.h)");
  worker_ = std::thread([this] { work(); });
}

Batcher::~Batcher() {
  stop();
  if (worker_.joinable()) worker_.join();
}

void Batcher::submit(const JobPtr& job) {
  const int64_t n = static_cast<int64_t>(job->rows.size());
  MF_CHECK(n >= 1 && n <= options_.max_batch, "serve: a job of ", n, " rows (1 to ", options_.max_batch, ")");
  {
    std::lock_guard lk(job->mu);
    job->choices.assign(static_cast<size_t>(n), Choice{});
  }
  std::lock_guard lk(mu_);
  if (stopping_) throw RequestError(503, "", "the server is shutting down");
  queue_.emplace_back(job, steady_seconds());
  ++stats_.jobs;
  cv_.notify_all();
}

void Batcher::stop() {
  std::lock_guard lk(mu_);
  if (stopping_) return;
  stopping_ = true;
  for (auto& [job, t] : queue_) fail(*job, 503, "the server is shutting down");
  queue_.clear();
  cv_.notify_all();
}

void Batcher::join() {
  if (worker_.joinable()) worker_.join();
  std::lock_guard lk(mu_);
  if (fatal_) std::rethrow_exception(std::exchange(fatal_, nullptr));
}

bool Batcher::stopping() const {
  std::lock_guard lk(mu_);
  return stopping_;
}

BatcherStats Batcher::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

std::vector<JobPtr> Batcher::take_batch() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
  const auto queued_rows = [&] {
    int64_t n = 0;
    for (const auto& [job, t] : queue_) n += static_cast<int64_t>(job->rows.size());
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double, std::milli>(options_.batch_wait_ms));
  while (!stopping_ && queued_rows() < options_.max_batch)
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout) break;
  std::vector<JobPtr> batch;
  int64_t rows = 0;
  const double now = steady_seconds();
  while (!queue_.empty()) {
    auto [job, submitted] = queue_.front();
    if (job->cancelled) {  // the client left while it waited
      queue_.pop_front();
      fail(*job, 499, "the client closed the connection");
      continue;
    }
    const int64_t n = static_cast<int64_t>(job->rows.size());
    if (rows + n > options_.max_batch) break;
    queue_.pop_front();
    rows += n;
    job->queued_s = now - submitted;
    batch.push_back(std::move(job));
  }
  return batch;
}

void Batcher::run_batch(const std::vector<JobPtr>& jobs) {
  struct Row {
    Job* job;
    int64_t index;
  };
  std::vector<infer::GenerationRequest> rows;
  std::vector<Row> where;
  std::vector<infer::TextStream> streams;
  size_t total = 0;
  for (const JobPtr& job : jobs) total += job->rows.size();
  streams.reserve(total);
  for (const JobPtr& job : jobs)
    for (size_t i = 0; i < job->rows.size(); ++i) {
      rows.push_back(job->rows[i]);
      where.push_back({job.get(), static_cast<int64_t>(i)});
      streams.emplace_back(*tok_, job->stop, job->rows[i].stop_tokens);
    }
  for (const JobPtr& job : jobs) job->batch_rows = static_cast<int64_t>(rows.size());

  const infer::TokenCallback on_token = [&](int64_t row, int64_t token) {
    MF_CHECK(row >= 0 && row < static_cast<int64_t>(rows.size()), "serve: a token for row ", row, " of a batch of ",
             rows.size());
    infer::TextStream& ts = streams[static_cast<size_t>(row)];
    if (ts.stopped()) return false;
    const Row w = where[static_cast<size_t>(row)];
    std::string text = ts.push(token);
    if (!text.empty()) emit(*w.job, {w.index, std::move(text), ""});
    return !ts.stopped() && !w.job->cancelled;
  };
  std::vector<infer::GenerationResult> results;
  try {
    if (world_ && world_->size() > 1) send_batch(*world_, &rows);
    results = generate_(rows, on_token);
    MF_CHECK(results.size() == rows.size(), "serve: the engine returned ", results.size(), " results for ",
             rows.size(), " rows");
  } catch (const std::exception& e) {
    for (const JobPtr& job : jobs) fail(*job, 500, std::string("generation failed: ") + e.what());
    std::lock_guard lk(mu_);
    ++stats_.failed_batches;
    if (world_ && world_->size() > 1) fatal_ = std::current_exception();
    return;
  }
  int64_t prompt = 0, completion = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    infer::TextStream& ts = streams[r];
    const bool stopped = ts.stopped() || results[r].finish_reason == "stop";
    std::string tail = ts.stopped() ? std::string() : ts.finish();
    const int64_t n = static_cast<int64_t>(results[r].tokens.size());
    {
      std::lock_guard lk(where[r].job->mu);
      where[r].job->choices[static_cast<size_t>(where[r].index)].completion_tokens = n;
    }
    emit(*where[r].job, {where[r].index, std::move(tail), stopped ? "stop" : "length"});
    prompt += static_cast<int64_t>(rows[r].prompt.size());
    completion += n;
  }
  for (const JobPtr& job : jobs) {
    std::lock_guard lk(job->mu);
    job->done = true;
    job->cv.notify_all();
  }
  std::lock_guard lk(mu_);
  ++stats_.batches;
  stats_.rows += static_cast<int64_t>(rows.size());
  stats_.prompt_tokens += prompt;
  stats_.completion_tokens += completion;
}

void Batcher::work() {
  for (;;) {
    const std::vector<JobPtr> batch = take_batch();
    if (batch.empty()) {
      if (stopping()) break;
      continue;
    }
    run_batch(batch);
    std::lock_guard lk(mu_);
    if (fatal_) break;
  }
  bool fatal = false;
  {
    std::lock_guard lk(mu_);
    fatal = fatal_ != nullptr;
  }
  if (fatal) {
    stop();  // fails what is queued
    if (on_fatal_) on_fatal_();
    return;
  }
  if (world_ && world_->size() > 1) {
    try {
      send_batch(*world_, nullptr);
    } catch (...) {
      std::lock_guard lk(mu_);
      fatal_ = std::current_exception();
    }
  }
}

}  // namespace mf::serve
