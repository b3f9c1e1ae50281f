// Ordered background computation: item k = fn(k) for k = 0, 1, 2, ..., computed by `threads`
// worker threads (std::thread) at most `capacity` items ahead of the consumer, and handed out by
// next() strictly in order. fn must be a pure function of k (safe to call from several threads),
// so the items are exactly those of calling fn(0), fn(1), ... on one thread, whatever the thread
// count or timing. threads == 0 computes fn(k) inside next().
//
// An exception thrown by fn(k) is kept and re-thrown by the next() that reaches item k (on the
// consumer's thread; the message is fn's, so it names the file it was decoding). The workers
// are stopped and joined by the destructor (RAII): a worker finishes the item it is computing
// and takes no other.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "meshflow/core/error.h"

namespace mf {

template <class T>
class OrderedPrefetcher {
 public:
  using Fn = std::function<T(int64_t)>;

  OrderedPrefetcher(Fn fn, int threads, int64_t capacity)
      : fn_(std::move(fn)), capacity_(capacity < 1 ? 1 : capacity), slots_(static_cast<size_t>(capacity_)) {
    MF_CHECK(threads >= 0, "prefetch: thread count ", threads, " must be >= 0");
    workers_.reserve(static_cast<size_t>(threads));
    try {
      for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
    } catch (const std::exception& e) {  // the system's thread limit: stop those started, then say so
      const size_t started = workers_.size();
      stop_workers();
      MF_THROW("prefetch: cannot start thread ", started + 1, " of ", threads, " (", e.what(),
               "): ask for fewer threads");
    }
  }
  ~OrderedPrefetcher() { stop_workers(); }
  OrderedPrefetcher(const OrderedPrefetcher&) = delete;
  OrderedPrefetcher& operator=(const OrderedPrefetcher&) = delete;

  // Item `consumed()`; re-throws fn's exception for it.
  T next() {
    if (workers_.empty()) return fn_(next_out_++);
    std::unique_lock<std::mutex> lock(mu_);
    Slot& s = slots_[static_cast<size_t>(next_out_ % capacity_)];
    ready_.wait(lock, [&] { return s.done; });
    s.done = false;
    ++next_out_;
    std::exception_ptr err = std::exchange(s.error, nullptr);
    std::optional<T> v = std::exchange(s.value, std::nullopt);
    lock.unlock();
    room_.notify_all();
    if (err) std::rethrow_exception(err);
    return std::move(*v);
  }
  int64_t consumed() const { return next_out_; }
  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    room_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }
  struct Slot {
    bool done = false;
    std::optional<T> value;
    std::exception_ptr error;
  };

  void work() {
    for (;;) {
      int64_t k;
      {
        std::unique_lock<std::mutex> lock(mu_);
        room_.wait(lock, [&] { return stop_ || next_in_ < next_out_ + capacity_; });
        if (stop_) return;
        k = next_in_++;
      }
      std::optional<T> v;
      std::exception_ptr err;
      try {
        v.emplace(fn_(k));
      } catch (...) {
        err = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        Slot& s = slots_[static_cast<size_t>(k % capacity_)];
        s.value = std::move(v);
        s.error = err;
        s.done = true;
      }
      ready_.notify_all();
    }
  }

  Fn fn_;
  const int64_t capacity_;
  std::vector<Slot> slots_;  // item k in slot k % capacity while next_out <= k < next_out + capacity
  std::mutex mu_;
  std::condition_variable ready_, room_;
  int64_t next_in_ = 0, next_out_ = 0;  // the next item a worker takes; the next the consumer takes
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace mf
