// Keeps slow or idle clients from starving `meshflow serve`'s HTTP server. cpp-httplib serves a
// connection on one thread for as long as it lasts and bounds each read alone: a client sending a
// header line every 2 s held its thread for good, and 14 such connections held all 12 threads of
// a server with --max-batch 4 (/health got no answer). GuardedHttpServer:
// - runs connections on threads made as they come (ConnectionThreads), up to max_connections, so
//   that slow connections do not hold back others while threads remain;
// - gives a request's line and headers header_timeout_s in all (a per-read timeout does not stop
//   a client that dribbles them): past it the request is answered 408 and the connection closed;
//   each read has read_timeout_s (in the headers, past it: 408 and closed too), an idle
//   keep-alive connection keep_alive_s;
// - lets one client (IP address) hold at most max_per_client connections: more are answered 429
//   and closed at once, so one client cannot take every thread.
#pragma once
#include <httplib.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace mf::serve {

struct HttpLimits {
  int64_t max_connections = 256;  // connections served at once (a thread each); more wait
  int64_t max_per_client = 64;    // of them from one IP address
  double header_timeout_s = 10;   // a request's line and headers, all of them
  double read_timeout_s = 5;      // each read (the body's included)
  double write_timeout_s = 5;     // each write
  double keep_alive_s = 2;        // an idle connection between requests
};

// Checks the limits; throws naming the flag (`--max-connections`, ...) of a bad one.
void check_http_limits(const HttpLimits& l);

// Why the last request this thread read lost its headers: their deadline (--header-timeout-s) or
// a read's timeout (--read-timeout-s) before the blank line; empty when neither. The server's
// error handler turns httplib's 400 into a 408 with it; the connection is then closed (what the
// client sends next is the rest of those headers, not a request).
const std::string& request_headers_timeout();

// httplib::TaskQueue that starts a thread for each task while every thread is busy, up to
// `max_threads`; tasks past that wait for one. Threads end at shutdown().
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads);
  ~ConnectionThreads() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  void work();

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

class GuardedHttpServer final : public httplib::Server {
 public:
  // `refused(status, message)`: called for each connection refused (429) or request timed out
  // (408), for the server's log and counts.
  GuardedHttpServer(HttpLimits limits, std::function<void(int, const std::string&)> refused);
  const HttpLimits& limits() const { return limits_; }

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool wait_for_request(socket_t sock) const;  // false: the keep-alive time passed or the server stops
  bool take_slot(const std::string& ip);
  void release_slot(const std::string& ip);

  HttpLimits limits_;
  std::function<void(int, const std::string&)> refused_;
  std::mutex mu_;
  std::unordered_map<std::string, int64_t> per_client_;
};

}  // namespace mf::serve
