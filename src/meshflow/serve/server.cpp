#include "meshflow/serve/server.h"

#include <sys/socket.h>

#include <httplib.h>

#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "meshflow/core/error.h"

namespace mf::serve {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* error_type(int status) { return status >= 500 ? "server_error" : "invalid_request_error"; }

void reply_error(httplib::Response& res, int status, const std::string& message, const std::string& param = "") {
  res.status = status;
  res.set_content(error_body(message, param, error_type(status)), "application/json");
}

}  // namespace

struct Server::Impl {
  ServeOptions o;
  std::shared_ptr<const Tokenizer> tok;
  std::FILE* log;
  int64_t started = unix_seconds();
  std::unique_ptr<GuardedHttpServer> http_server;  // made once the options are known
  httplib::Server& http() { return *http_server; }
  std::unique_ptr<Batcher> batcher;

  std::mutex mu;
  std::condition_variable cv;
  bool stop_requested = false;
  bool bound = false;
  int port = -1;
  int64_t active = 0;  // requests whose response is not yet all sent
  ServerStats counts;
  std::mt19937_64 rng{std::random_device{}()};

  // Held by a request until its response is gone (stop() lets them all go out).
  struct Active {
    Impl* impl;
    explicit Active(Impl* i) : impl(i) {
      std::lock_guard lk(impl->mu);
      ++impl->active;
    }
    ~Active() {
      std::lock_guard lk(impl->mu);
      --impl->active;
      impl->cv.notify_all();
    }
  };

  // A streamed response: the job, what to send first, and the request's bookkeeping.
  struct Stream {
    JobPtr job;
    ResponseHeader header;
    std::vector<std::string> echo;  // each prompt's text (echo), sent first
    bool started = false;
    double t0 = 0;
    int64_t prompt_tokens = 0;
    std::shared_ptr<Active> active;
  };

  void request_stop() {
    std::lock_guard lk(mu);
    stop_requested = true;
    cv.notify_all();
  }

  void count(int status) {
    std::lock_guard lk(mu);
    (status < 400 ? counts.requests : status < 500 ? counts.refused : counts.failed) += 1;
  }

  void log_refused(int status, const std::string& message) {
    count(status);
    if (log) std::fprintf(log, "serve: refused %d: %s\n", status, message.c_str());
    if (log) std::fflush(log);
  }

  void log_done(const ResponseHeader& h, const Job& job, bool stream, double t0, int64_t prompt_tokens) {
    count(job.error.empty() ? 200 : job.status);
    if (!log) return;
    int64_t completion = 0;
    std::string reasons;
    for (const Choice& c : job.choices) {
      completion += c.completion_tokens;
      reasons += (reasons.empty() ? "" : ",") + (c.finish_reason.empty() ? std::string("-") : c.finish_reason);
    }
    if (!job.error.empty())
      std::fprintf(log, "serve: %s %d%s: %s\n", h.id.c_str(), job.status, stream ? " stream" : "", job.error.c_str());
    else
      std::fprintf(log, "serve: %s 200%s: %zu prompt(s), %lld+%lld tokens, finish %s, batch of %lld, queued %.3f s, "
                   "total %.3f s\n", h.id.c_str(), stream ? " stream" : "", job.rows.size(),
                   static_cast<long long>(prompt_tokens), static_cast<long long>(completion), reasons.c_str(),
                   static_cast<long long>(job.batch_rows), job.queued_s, steady_seconds() - t0);
    std::fflush(log);
  }

  std::string new_id() {
    std::lock_guard lk(mu);
    char buf[32];
    std::snprintf(buf, sizeof buf, "cmpl-%016llx", static_cast<unsigned long long>(rng()));
    return buf;
  }
  uint64_t fresh_seed() {
    std::lock_guard lk(mu);
    return rng();
  }

  void completions(const httplib::Request& req, httplib::Response& res);
  bool stream_step(Stream& s, httplib::DataSink& sink);
  void routes();
};

void Server::Impl::completions(const httplib::Request& req, httplib::Response& res) {
  auto active = std::make_shared<Active>(this);
  const double t0 = steady_seconds();
  auto job = std::make_shared<Job>();
  CompletionRequest r;
  try {
    r = parse_completion_request(req.body);
    job->rows = to_generation_requests(r, *tok, {o.max_sequence_length, o.max_batch}, fresh_seed());
    job->stop = r.stop;
    job->stream = r.stream;
    batcher->submit(job);
  } catch (const RequestError& e) {
    reply_error(res, e.status(), e.what(), e.param());
    log_refused(e.status(), e.what());
    return;
  }
  const ResponseHeader h{new_id(), unix_seconds(), o.model_name};
  int64_t prompt_tokens = 0;
  for (const infer::GenerationRequest& g : job->rows) prompt_tokens += static_cast<int64_t>(g.prompt.size());
  if (!r.stream) {
    job->wait();
    log_done(h, *job, false, t0, prompt_tokens);
    if (!job->error.empty()) return reply_error(res, job->status, job->error);
    std::vector<Choice> choices = job->choices;
    if (r.echo)
      for (size_t i = 0; i < choices.size(); ++i) choices[i].text = r.prompts[i] + choices[i].text;
    res.set_content(completion_body(h, choices, prompt_tokens), "application/json");
    return;
  }
  auto s = std::make_shared<Stream>();
  s->job = job;
  s->header = h;
  if (r.echo) s->echo = r.prompts;
  s->t0 = t0;
  s->prompt_tokens = prompt_tokens;
  s->active = std::move(active);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, s](size_t, httplib::DataSink& sink) { return stream_step(*s, sink); },
      [this, s](bool success) {
        if (success) return;
        s->job->cancelled = true;  // the client went away: its rows end at their next token
        {
      std::lock_guard lk(mu);
      ++counts.cancelled;
    }
        if (log) std::fprintf(log, "serve: %s stream: the client closed the connection\n", s->header.id.c_str());
        if (log) std::fflush(log);
      });
}

// Sends the events that are ready (waiting for some), and the end once the job is done.
bool Server::Impl::stream_step(Stream& s, httplib::DataSink& sink) {
  Job& job = *s.job;
  std::string out;
  if (!s.started) {
    s.started = true;
    for (size_t i = 0; i < s.echo.size(); ++i) out += completion_chunk_event(s.header, static_cast<int64_t>(i), s.echo[i], "");
  }
  bool end = false;
  {
    std::unique_lock lk(job.mu);
    while (out.empty() && job.deltas.empty() && !job.done) {
      job.cv.wait_for(lk, std::chrono::milliseconds(250));
      if (job.deltas.empty() && !job.done && !sink.is_writable()) {
        job.cancelled = true;
        return false;
      }
    }
    for (; !job.deltas.empty(); job.deltas.pop_front()) {
      const TextDelta& d = job.deltas.front();
      out += completion_chunk_event(s.header, d.index, d.text, d.finish_reason);
    }
    if (job.done) {
      end = true;
      if (!job.error.empty()) out += "data: " + error_body(job.error, "", error_type(job.status)) + "\n\n";
    }
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) {
    job.cancelled = true;
    return false;
  }
  if (end) {
    sink.write(kDoneEvent.data(), kDoneEvent.size());
    sink.done();
    log_done(s.header, job, true, s.t0, s.prompt_tokens);
  }
  return true;
}

void Server::Impl::routes() {
  http().Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http().Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const nlohmann::json j{{"object", "list"},
                           {"data", nlohmann::json::array({{{"id", o.model_name},
                                                            {"object", "model"},
                                                            {"created", started},
                                                            {"owned_by", "meshflow"},
                                                            {"max_model_len", o.max_sequence_length}}})}};
    res.set_content(j.dump(), "application/json");
  });
  http().Post("/v1/completions",
            [this](const httplib::Request& req, httplib::Response& res) { completions(req, res); });
  // Errors httplib answers itself (no route, a body over the limit) get OpenAI's shape too.
  http().set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (!request_headers_timeout().empty()) {  // httplib answers headers it could not read with a 400
      res.status = 408;
      res.set_content(error_body(request_headers_timeout(), "", error_type(res.status)), "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }
    const std::string what = res.status == 404 ? detail::cat("no route ", req.method, " ", req.path)
                              : res.status == 413 ? std::string("the request body is too large")
                                                  : detail::cat("HTTP ", res.status);
    res.set_content(error_body(what, "", error_type(res.status)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http().set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply_error(res, 500, what);
  });
}

HttpLimits http_limits(const ServeOptions& o) {
  HttpLimits l;
  l.max_connections = o.max_connections > 0 ? o.max_connections : std::max<int64_t>(256, 4 * o.max_batch);
  l.max_per_client = o.max_connections_per_client > 0 ? o.max_connections_per_client
                                                      : std::max<int64_t>(1, l.max_connections / 4);
  l.header_timeout_s = o.header_timeout_s;
  l.read_timeout_s = o.read_timeout_s;
  l.keep_alive_s = o.keep_alive_s;
  return l;
}

Server::Server(GenerateFn generate, std::shared_ptr<const Tokenizer> tok, ServeOptions options, comm::CommPtr world,
               std::FILE* log)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.o = std::move(options);
  m.tok = tok;
  m.log = log;
  MF_CHECK(m.o.max_sequence_length > 0, "serve: max_sequence_length must be positive, got ", m.o.max_sequence_length);
  MF_CHECK(m.o.max_batch >= 1, "serve: --max-batch must be >= 1, got ", m.o.max_batch);
  // A client that closes its connection must not kill the server (httplib writes with send()).
  std::signal(SIGPIPE, SIG_IGN);
  const HttpLimits limits = http_limits(m.o);
  m.http_server = std::make_unique<GuardedHttpServer>(
      limits, [&m](int status, const std::string& message) { m.log_refused(status, message); });
  m.http().set_payload_max_length(m.o.max_body_bytes);
  m.routes();
  m.batcher = std::make_unique<Batcher>(std::move(generate), std::move(tok),
                                        BatcherOptions{m.o.max_batch, m.o.batch_wait_ms}, std::move(world),
                                        [this] { impl_->request_stop(); });
}

Server::~Server() {
  stop();
  impl_->batcher.reset();  // joins the worker
}

int Server::bind() {
  Impl& m = *impl_;
  MF_CHECK(!m.bound, "serve: bind() called twice");
  // SO_REUSEADDR only (a restart binds at once over the last server's TIME_WAIT sockets), not the
  // library's default SO_REUSEPORT: that let a second server bind the same port and take half of
  // its requests.
  m.http().set_socket_options([](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const int port = m.o.port == 0 ? m.http().bind_to_any_port(m.o.host) : (m.http().bind_to_port(m.o.host, m.o.port) ? m.o.port : -1);
  MF_CHECK(port > 0, "serve: cannot listen on ", m.o.host, ":", m.o.port, " (", std::strerror(errno),
           "; another server on that port?)");
  m.bound = true;
  m.port = port;
  return port;
}

void Server::run() {
  Impl& m = *impl_;
  if (!m.bound) bind();
  std::atomic<bool> listening_ended{false};
  std::thread http([&] {
    m.http().listen_after_bind();
    listening_ended = true;
    m.request_stop();
  });
  {
    std::unique_lock lk(m.mu);
    m.cv.wait(lk, [&] { return m.stop_requested; });
  }
  m.batcher->stop();
  std::exception_ptr fatal;
  try {
    m.batcher->join();
  } catch (...) {
    fatal = std::current_exception();
  }
  {  // the last responses go out
    std::unique_lock lk(m.mu);
    m.cv.wait_for(lk, std::chrono::seconds(30), [&] { return m.active == 0; });
  }
  while (!m.http().is_running() && !listening_ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  m.http().stop();
  http.join();
  if (m.log) {
    const ServerStats s = stats();
    std::fprintf(m.log, "serve: stopped: %lld requests answered, %lld refused, %lld failed; %lld prompt + %lld "
                 "completion tokens in %lld batches\n", static_cast<long long>(s.requests),
                 static_cast<long long>(s.refused), static_cast<long long>(s.failed),
                 static_cast<long long>(s.batches.prompt_tokens), static_cast<long long>(s.batches.completion_tokens),
                 static_cast<long long>(s.batches.batches));
    std::fflush(m.log);
  }
  if (fatal) std::rethrow_exception(fatal);
}

void Server::stop() { impl_->request_stop(); }

ServerStats Server::stats() const {
  ServerStats s;
  {
    std::lock_guard lk(impl_->mu);
    s = impl_->counts;
  }
  s.batches = impl_->batcher->stats();
  return s;
}

}  // namespace mf::serve
