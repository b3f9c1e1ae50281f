#include "meshflow/serve/http_guard.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "meshflow/core/error.h"
#include "meshflow/serve/openai.h"

namespace mf::serve {
namespace {

using Clock = std::chrono::steady_clock;

thread_local std::string t_headers_timeout;  // why the last request's headers were cut; empty: they were not

int to_ms(double seconds) { return static_cast<int>(std::clamp(seconds * 1e3, 0.0, 2e9)); }

// poll() for `events`, again after a signal; > 0 ready, 0 timed out, < 0 failed.
int wait_for(int sock, short events, int timeout_ms) {
  pollfd p{sock, events, 0};
  const Clock::time_point end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r >= 0 || errno != EINTR) return r;
    timeout_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count()));
  }
}

// The peer (or the local end) as numeric host and port.
void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int r = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                     : ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(serv);
}

// A connection's stream for one request: httplib's socket stream (a read buffer, a timeout per
// read and per write) with a deadline on the request line and headers together.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int sock, const HttpLimits& l)
      : sock_(sock),
        read_ms_(to_ms(l.read_timeout_s)),
        write_ms_(to_ms(l.write_timeout_s)),
        read_s_(l.read_timeout_s),
        header_s_(l.header_timeout_s),
        header_deadline_(Clock::now() + std::chrono::milliseconds(to_ms(l.header_timeout_s))) {}

  bool is_readable() const override { return wait_for(sock_, POLLIN, read_ms_) > 0; }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, write_ms_) > 0 && alive(); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < len_) {
      const size_t n = std::min(size, len_ - pos_);
      std::memcpy(ptr, buf_ + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!readable()) return -1;
    if (size >= sizeof buf_) {
      const ssize_t n = receive(ptr, size);
      if (n > 0) note(ptr, static_cast<size_t>(n));
      return n;
    }
    const ssize_t n = receive(buf_, sizeof buf_);
    if (n <= 0) return n;
    note(buf_, static_cast<size_t>(n));
    len_ = static_cast<size_t>(n);
    pos_ = std::min(size, len_);
    std::memcpy(ptr, buf_, pos_);
    return static_cast<ssize_t>(pos_);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    wrote_ = true;
    for (;;) {
      const ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

  const std::string& headers_timeout() const { return timeout_; }  // empty: the headers were not cut
  bool wrote() const { return wrote_; }  // whether a response (or part) went out

 private:
  // Waits for bytes: a read's timeout, and until the headers are in, their deadline. A wait that
  // ends on neither (the deadline rounded to whole ms) waits again; one that ends on either while
  // the headers are not in ends the request with the reason.
  bool readable() {
    for (;;) {
      int timeout_ms = read_ms_;
      bool deadline_first = false;
      if (!headers_done_) {
        const auto left_us =
            std::chrono::duration_cast<std::chrono::microseconds>(header_deadline_ - Clock::now()).count();
        if (left_us <= 0) return expire(detail::cat("the request's headers did not arrive within ", header_s_, " s (--header-timeout-s)"));
        const int64_t left_ms = (left_us + 999) / 1000;  // rounded up: the wait ends at or past the deadline
        if (left_ms < timeout_ms) timeout_ms = static_cast<int>(left_ms), deadline_first = true;
      }
      const int r = wait_for(sock_, POLLIN, timeout_ms);
      if (r != 0) return r > 0;
      if (deadline_first) continue;  // the deadline's turn: checked above
      if (!headers_done_) return expire(detail::cat("the request's headers stopped: no bytes for ", read_s_, " s (--read-timeout-s)"));
      return false;
    }
  }
  bool expire(std::string why) {
    t_headers_timeout = why;
    timeout_ = std::move(why);
    return false;
  }
  ssize_t receive(char* into, size_t size) {
    for (;;) {
      const ssize_t n = ::recv(sock_, into, size, 0);
      if (n >= 0 || errno != EINTR) return n;
    }
  }
  // Watches the bytes for the blank line that ends the headers ("\r\n\r\n", or "\n\n").
  void note(const char* p, size_t n) {
    for (size_t i = 0; i < n && !headers_done_; ++i) {
      window_ = (window_ << 8) | static_cast<unsigned char>(p[i]);
      headers_done_ = window_ == 0x0D0A0D0Au || (window_ & 0xFFFFu) == 0x0A0Au;
    }
  }
  // httplib's test: a readable socket whose peek reads nothing has been closed by the client.
  bool alive() const {
    if (wait_for(sock_, POLLIN, 0) <= 0) return true;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  int sock_;
  int read_ms_, write_ms_;
  double read_s_, header_s_;
  Clock::time_point header_deadline_;
  char buf_[4096];
  size_t pos_ = 0, len_ = 0;
  uint32_t window_ = 0;
  bool headers_done_ = false;
  std::string timeout_;
  bool wrote_ = false;
};

// Ends the sending side and reads what the client still sends for a moment (bounded), so that
// closing with unread bytes does not reset the connection before the client reads the answer.
void close_gently(int sock) {
  ::shutdown(sock, SHUT_WR);
  char sink[4096];
  for (int i = 0; i < 16 && wait_for(sock, POLLIN, 100) > 0 && ::recv(sock, sink, sizeof sink, 0) > 0; ++i) {
  }
}

// Answers `status` with OpenAI's error body and closes the connection gently.
void refuse_connection(int sock, int status, const std::string& message) {
  const std::string body = error_body(message, "", "invalid_request_error");
  const std::string head = detail::cat("HTTP/1.1 ", status, status == 429 ? " Too Many Requests" : status == 408 ? " Request Timeout" : " Error",
                                       "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                                       "\r\nConnection: close\r\n\r\n");
  const std::string all = head + body;
  if (wait_for(sock, POLLOUT, 1000) > 0) (void)::send(sock, all.data(), all.size(), MSG_NOSIGNAL);
  close_gently(sock);
}

}  // namespace

void check_http_limits(const HttpLimits& l) {
  MF_CHECK(l.max_connections >= 1, "serve: --max-connections must be >= 1, got ", l.max_connections);
  MF_CHECK(l.max_per_client >= 1, "serve: --max-connections-per-client must be >= 1, got ", l.max_per_client);
  for (const auto& [flag, v] : {std::pair<const char*, double>{"--header-timeout-s", l.header_timeout_s},
                                {"--read-timeout-s", l.read_timeout_s},
                                {"keep-alive timeout", l.keep_alive_s}})
    MF_CHECK(std::isfinite(v) && v > 0 && v <= 86400, "serve: ", flag, " must be in (0, 86400] seconds, got ", v);
}

const std::string& request_headers_timeout() { return t_headers_timeout; }

ConnectionThreads::ConnectionThreads(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::lock_guard lk(mu_);
  tasks_.push_back(std::move(fn));
  if (tasks_.size() > idle_ && threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
  cv_.notify_one();
}

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lk(mu_);
    shutdown_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

void ConnectionThreads::work() {
  std::unique_lock lk(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lk, [&] { return !tasks_.empty() || shutdown_; });
    --idle_;
    if (tasks_.empty()) return;  // shut down, nothing left
    std::function<void()> fn = std::move(tasks_.front());
    tasks_.pop_front();
    lk.unlock();
    fn();
    lk.lock();
  }
}

GuardedHttpServer::GuardedHttpServer(HttpLimits limits, std::function<void(int, const std::string&)> refused)
    : limits_(limits), refused_(std::move(refused)) {
  check_http_limits(limits_);
  const size_t threads = static_cast<size_t>(limits_.max_connections);
  new_task_queue = [threads] { return new ConnectionThreads(threads); };
}

bool GuardedHttpServer::take_slot(const std::string& ip) {
  std::lock_guard lk(mu_);
  int64_t& n = per_client_[ip];
  if (n >= limits_.max_per_client) return false;
  ++n;
  return true;
}

void GuardedHttpServer::release_slot(const std::string& ip) {
  std::lock_guard lk(mu_);
  if (--per_client_[ip] <= 0) per_client_.erase(ip);
}

bool GuardedHttpServer::wait_for_request(socket_t sock) const {
  const Clock::time_point end = Clock::now() + std::chrono::milliseconds(to_ms(limits_.keep_alive_s));
  while (svr_sock_ != INVALID_SOCKET) {  // slices of 100 ms: a stopping server closes it sooner
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) return false;
    const int r = wait_for(sock, POLLIN, static_cast<int>(std::min<int64_t>(left, 100)));
    if (r != 0) return r > 0;
  }
  return false;
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  std::string ip = "?";
  int port = 0;
  address_of(sock, true, ip, port);
  bool ret = false;
  if (!take_slot(ip)) {
    const std::string message =
        detail::cat("too many connections from ", ip, " (at most ", limits_.max_per_client,
                    " at once: --max-connections-per-client); close idle ones or retry later");
    refuse_connection(sock, 429, message);
    if (refused_) refused_(429, message);
  } else {
    for (size_t left = std::max<size_t>(1, keep_alive_max_count_); left > 0 && wait_for_request(sock); --left) {
      DeadlineStream strm(sock, limits_);
      t_headers_timeout.clear();
      bool closed = false;
      ret = process_request(strm, left == 1, closed, nullptr);
      if (!strm.headers_timeout().empty()) {
        const std::string message = detail::cat(strm.headers_timeout(), " from ", ip, "; connection closed");
        // Headers cut short got httplib's answer (made a 408 by the server's error handler); a
        // request line cut short got none.
        if (strm.wrote()) close_gently(sock);
        else refuse_connection(sock, 408, message);
        if (refused_) refused_(408, message);
        break;
      }
      if (!ret || closed) break;
    }
    release_slot(ip);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace mf::serve
