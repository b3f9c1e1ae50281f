#include "meshflow/serve/batch_wire.h"

#include <bit>

#include "meshflow/core/error.h"

namespace mf::serve {
namespace {

constexpr int64_t kMagic = 0x6d66736276;  // "mfsbv": a batch of this format
enum : int64_t { kShutdown = 0, kBatch = 1 };

// Reads words in order, checking there are enough.
struct Reader {
  const std::vector<int64_t>& w;
  size_t at = 0;
  int64_t next() {
    MF_CHECK(at < w.size(), "serve: a batch message ends early (", w.size(), " words)");
    return w[at++];
  }
  int64_t count(const char* what) {
    const int64_t n = next();
    MF_CHECK(n >= 0 && static_cast<size_t>(n) <= w.size() - at, "serve: a batch message has a bad ", what, " (",
             n, ")");
    return n;
  }
};

}  // namespace

std::vector<int64_t> encode_batch(const std::vector<infer::GenerationRequest>& rows) {
  std::vector<int64_t> w{kMagic, static_cast<int64_t>(rows.size())};
  for (const infer::GenerationRequest& r : rows) {
    w.push_back(static_cast<int64_t>(r.prompt.size()));
    w.insert(w.end(), r.prompt.begin(), r.prompt.end());
    const infer::SamplingParams& s = r.sampling;
    w.insert(w.end(), {r.max_new_tokens, s.do_sample ? 1 : 0, std::bit_cast<int64_t>(s.temperature), s.top_k,
                       std::bit_cast<int64_t>(s.top_p), std::bit_cast<int64_t>(s.repetition_penalty),
                       std::bit_cast<int64_t>(s.seed)});
    w.push_back(static_cast<int64_t>(r.stop_tokens.size()));
    w.insert(w.end(), r.stop_tokens.begin(), r.stop_tokens.end());
  }
  return w;
}

std::vector<infer::GenerationRequest> decode_batch(const std::vector<int64_t>& words) {
  Reader in{words};
  MF_CHECK(in.next() == kMagic, "serve: a batch message of another format (the ranks run different builds?)");
  const int64_t n = in.count("row count");
  std::vector<infer::GenerationRequest> rows(static_cast<size_t>(n));
  for (infer::GenerationRequest& r : rows) {
    const int64_t len = in.count("prompt length");
    r.prompt.assign(words.begin() + in.at, words.begin() + in.at + len);
    in.at += len;
    r.max_new_tokens = in.next();
    infer::SamplingParams& s = r.sampling;
    s.do_sample = in.next() != 0;
    s.temperature = std::bit_cast<double>(in.next());
    s.top_k = in.next();
    s.top_p = std::bit_cast<double>(in.next());
    s.repetition_penalty = std::bit_cast<double>(in.next());
    s.seed = std::bit_cast<uint64_t>(in.next());
    const int64_t stops = in.count("stop token count");
    r.stop_tokens.assign(words.begin() + in.at, words.begin() + in.at + stops);
    in.at += stops;
  }
  MF_CHECK(in.at == words.size(), "serve: a batch message has ", words.size() - in.at, " words left over");
  return rows;
}

void send_batch(comm::Communicator& world, const std::vector<infer::GenerationRequest>* rows) {
  MF_CHECK(world.rank() == 0, "serve: send_batch on rank ", world.rank(), " (rank 0 sends)");
  const std::vector<int64_t> words = rows ? encode_batch(*rows) : std::vector<int64_t>{};
  Tensor header = from_vector<int64_t>({rows ? kBatch : kShutdown, static_cast<int64_t>(words.size())}, {2});
  world.broadcast(header, 0)->wait();
  if (words.empty()) return;
  Tensor body = from_vector<int64_t>(words, {static_cast<int64_t>(words.size())});
  world.broadcast(body, 0)->wait();
}

std::optional<std::vector<infer::GenerationRequest>> receive_batch(comm::Communicator& world) {
  MF_CHECK(world.rank() != 0, "serve: receive_batch on rank 0 (it sends)");
  Tensor header = zeros({2}, DType::kI64);
  world.broadcast(header, 0)->wait();
  const std::vector<int64_t> h = header.to_vector<int64_t>();
  if (h[0] == kShutdown) return std::nullopt;
  MF_CHECK(h[0] == kBatch && h[1] > 0, "serve: an unknown message from rank 0 (kind ", h[0], ", ", h[1], " words)");
  Tensor body = zeros({h[1]}, DType::kI64);
  world.broadcast(body, 0)->wait();
  return decode_batch(body.to_vector<int64_t>());
}

int64_t follow(const GenerateFn& generate, comm::Communicator& world) {
  int64_t batches = 0;
  const infer::TokenCallback go_on = [](int64_t, int64_t) { return true; };
  while (auto rows = receive_batch(world)) {
    generate(*rows, go_on);
    ++batches;
  }
  return batches;
}

}  // namespace mf::serve
