#include "meshflow/infer/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "meshflow/core/error.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/philox.h"

namespace mf::infer {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Every rank's `local` (n values) side by side: (ranks * n), rank r's at [r * n, (r + 1) * n).
std::vector<double> gather(comm::Communicator* tp, const std::vector<double>& local) {
  if (!tp || tp->size() == 1) return local;
  const int64_t n = static_cast<int64_t>(local.size());
  Tensor in = from_vector(local, {n});
  Tensor out = empty({n * tp->size()}, DType::kF64);
  tp->all_gather(in, out)->wait();
  const double* p = out.data<double>();
  return std::vector<double>(p, p + out.numel());
}

std::vector<double> reduce(comm::Communicator* tp, std::vector<double> local, comm::ReduceOp op) {
  if (!tp || tp->size() == 1) return local;
  Tensor t = from_vector(local, {static_cast<int64_t>(local.size())});
  tp->all_reduce(t, op)->wait();
  const double* p = t.data<double>();
  return std::vector<double>(p, p + t.numel());
}

// Gumbel(0, 1) noise of vocabulary id `id` at draw `step` of a row seeded `seed`: a function of
// the three alone, so every layout draws the same for the same id.
double gumbel(uint64_t seed, int64_t step, int64_t id) {
  const Philox4x32 r = philox_block(seed, static_cast<uint64_t>(step), static_cast<uint64_t>(id) >> 1);
  const uint32_t a = r.v[(id & 1) * 2], b = r.v[(id & 1) * 2 + 1];
  const double u = (static_cast<double>(a >> 5) * 67108864.0 + static_cast<double>(b >> 6) + 0.5) * (1.0 / 9007199254740992.0);
  return -std::log(-std::log(u));  // u in (0, 1)
}

// The largest score over the group, its id (the lowest on ties): (score, id) pairs of every row.
std::vector<int64_t> argmax_over(comm::Communicator* tp, const std::vector<double>& best, const std::vector<int64_t>& id) {
  const size_t B = best.size();
  std::vector<double> mine(2 * B);
  for (size_t b = 0; b < B; ++b) {
    mine[2 * b] = best[b];
    mine[2 * b + 1] = static_cast<double>(id[b]);
  }
  const std::vector<double> all = gather(tp, mine);
  std::vector<int64_t> out(B);
  for (size_t b = 0; b < B; ++b) {
    double s = kNegInf;
    int64_t k = -1;
    for (size_t r = 0; r < all.size() / (2 * B); ++r) {
      const double v = all[r * 2 * B + 2 * b];
      const int64_t i = static_cast<int64_t>(all[r * 2 * B + 2 * b + 1]);
      if (i >= 0 && (k < 0 || v > s || (v == s && i < k))) {
        s = v;
        k = i;
      }
    }
    MF_CHECK(k >= 0, "sampling: row ", b, " has no token left to choose (every logit is -inf or NaN)");
    out[b] = k;
  }
  return out;
}

}  // namespace

void check_sampling(const SamplingParams& p) {
  MF_CHECK(p.temperature > 0 && std::isfinite(p.temperature), "sampling: temperature must be finite and > 0, got ", p.temperature,
           " (use greedy decoding for temperature 0)");
  MF_CHECK(p.top_k >= 0, "sampling: top_k must be >= 0 (0: off), got ", p.top_k);
  MF_CHECK(p.top_p > 0 && p.top_p <= 1, "sampling: top_p must be in (0, 1], got ", p.top_p);
  MF_CHECK(p.repetition_penalty > 0 && std::isfinite(p.repetition_penalty),
           "sampling: repetition_penalty must be finite and > 0, got ", p.repetition_penalty);
}

std::vector<int64_t> choose_tokens(const Tensor& logits_any, int64_t offset, int64_t vocab,
                                   const std::vector<SamplingParams>& params,
                                   const std::vector<std::vector<int64_t>>& seen, const std::vector<int64_t>& step,
                                   comm::Communicator* tp) {
  const Tensor logits = contiguous(cast(to(logits_any.detach(), cpu_device()), DType::kF64));
  MF_CHECK(logits.ndim() == 2, "sampling: logits ", logits.str(), " must be (rows, vocabulary here)");
  const int64_t B = logits.shape(0), V = logits.shape(1);
  MF_CHECK(static_cast<int64_t>(params.size()) == B && static_cast<int64_t>(seen.size()) == B &&
               static_cast<int64_t>(step.size()) == B && offset >= 0 && offset + V <= vocab,
           "sampling: ", params.size(), " parameter sets, ", seen.size(), " histories and ", step.size(), " steps for logits ",
           logits.str(), " of ids [", offset, ", ", offset + V, ") of ", vocab);
  std::vector<std::vector<double>> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const SamplingParams& p = params[static_cast<size_t>(b)];
    check_sampling(p);
    std::vector<double>& l = rows[static_cast<size_t>(b)];
    l.assign(logits.data<double>() + b * V, logits.data<double>() + (b + 1) * V);
    if (p.repetition_penalty != 1.0) {
      const std::unordered_set<int64_t> ids(seen[static_cast<size_t>(b)].begin(), seen[static_cast<size_t>(b)].end());
      for (int64_t id : ids)
        if (id >= offset && id < offset + V) {
          double& x = l[static_cast<size_t>(id - offset)];
          x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
        }
    }
    if (p.do_sample)
      for (double& x : l) x /= p.temperature;
  }
  // top-k: the k-th largest logit over the group, from every rank's k largest.
  int64_t k_max = 0;
  for (const SamplingParams& p : params)
    if (p.do_sample && p.top_k > 0 && p.top_k < vocab) k_max = std::max(k_max, p.top_k);
  if (k_max > 0) {
    std::vector<double> mine(static_cast<size_t>(B * k_max), kNegInf);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> l = rows[static_cast<size_t>(b)];
      const int64_t n = std::min<int64_t>(k_max, V);
      std::partial_sort(l.begin(), l.begin() + n, l.end(), std::greater<double>());
      std::copy(l.begin(), l.begin() + n, mine.begin() + b * k_max);
    }
    const std::vector<double> all = gather(tp, mine);
    const size_t ranks = all.size() / mine.size();
    for (int64_t b = 0; b < B; ++b) {
      const SamplingParams& p = params[static_cast<size_t>(b)];
      if (!p.do_sample || p.top_k <= 0 || p.top_k >= vocab) continue;
      std::vector<double> cand;
      for (size_t r = 0; r < ranks; ++r)
        cand.insert(cand.end(), all.begin() + static_cast<int64_t>(r * mine.size()) + b * k_max,
                    all.begin() + static_cast<int64_t>(r * mine.size()) + (b + 1) * k_max);
      std::nth_element(cand.begin(), cand.begin() + (p.top_k - 1), cand.end(), std::greater<double>());
      const double kth = cand[static_cast<size_t>(p.top_k - 1)];
      for (double& x : rows[static_cast<size_t>(b)])
        if (x < kth) x = kNegInf;
    }
  }
  // top-p: keep the tokens with less than p of the probability above them (Hugging Face's rule),
  // from every rank's candidates (its tokens with less than p of its own mass above them).
  const bool any_top_p = std::any_of(params.begin(), params.end(), [](const SamplingParams& p) { return p.do_sample && p.top_p < 1; });
  if (any_top_p) {
    std::vector<double> mx(static_cast<size_t>(B), kNegInf);
    for (int64_t b = 0; b < B; ++b)
      for (double x : rows[static_cast<size_t>(b)]) mx[static_cast<size_t>(b)] = std::max(mx[static_cast<size_t>(b)], x);
    mx = reduce(tp, mx, comm::ReduceOp::kMax);
    std::vector<double> z(static_cast<size_t>(B), 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (double x : rows[static_cast<size_t>(b)]) z[static_cast<size_t>(b)] += std::exp(x - mx[static_cast<size_t>(b)]);
    z = reduce(tp, z, comm::ReduceOp::kSum);
    std::vector<std::vector<double>> cand(static_cast<size_t>(B));
    double longest = 0;
    for (int64_t b = 0; b < B; ++b) {
      const SamplingParams& p = params[static_cast<size_t>(b)];
      if (!p.do_sample || p.top_p >= 1) continue;
      std::vector<double> l = rows[static_cast<size_t>(b)];
      std::sort(l.begin(), l.end(), std::greater<double>());
      double above = 0;
      for (double x : l) {
        if (x == kNegInf || above >= p.top_p) break;
        cand[static_cast<size_t>(b)].push_back(x);
        above += std::exp(x - mx[static_cast<size_t>(b)]) / z[static_cast<size_t>(b)];
      }
      longest = std::max(longest, static_cast<double>(cand[static_cast<size_t>(b)].size()));
    }
    const int64_t L = static_cast<int64_t>(reduce(tp, {longest}, comm::ReduceOp::kMax)[0]);
    std::vector<double> mine(static_cast<size_t>(B * L), kNegInf);
    for (int64_t b = 0; b < B; ++b)
      std::copy(cand[static_cast<size_t>(b)].begin(), cand[static_cast<size_t>(b)].end(), mine.begin() + b * L);
    const std::vector<double> all = L > 0 ? gather(tp, mine) : mine;
    const size_t ranks = L > 0 ? all.size() / mine.size() : 0;
    for (int64_t b = 0; b < B; ++b) {
      const SamplingParams& p = params[static_cast<size_t>(b)];
      if (!p.do_sample || p.top_p >= 1) continue;
      std::vector<double> c;
      for (size_t r = 0; r < ranks; ++r)
        for (int64_t j = 0; j < L; ++j) {
          const double x = all[r * mine.size() + static_cast<size_t>(b * L + j)];
          if (x != kNegInf) c.push_back(x);
        }
      std::sort(c.begin(), c.end(), std::greater<double>());
      double above = 0, threshold = c.empty() ? kNegInf : c[0];
      for (double x : c) {
        if (above >= p.top_p) break;
        threshold = x;
        above += std::exp(x - mx[static_cast<size_t>(b)]) / z[static_cast<size_t>(b)];
      }
      for (double& x : rows[static_cast<size_t>(b)])
        if (x < threshold) x = kNegInf;
    }
  }
  // The choice: the largest logit (greedy) or the largest logit + Gumbel noise (a draw from the
  // softmax of the kept logits), over the group.
  std::vector<double> best(static_cast<size_t>(B), kNegInf);
  std::vector<int64_t> id(static_cast<size_t>(B), -1);
  for (int64_t b = 0; b < B; ++b) {
    const SamplingParams& p = params[static_cast<size_t>(b)];
    const std::vector<double>& l = rows[static_cast<size_t>(b)];
    for (int64_t i = 0; i < V; ++i) {
      const double x = l[static_cast<size_t>(i)];
      if (!(x > kNegInf)) continue;  // removed, or NaN
      const double s = p.do_sample ? x + gumbel(p.seed, step[static_cast<size_t>(b)], offset + i) : x;
      if (s > best[static_cast<size_t>(b)] || id[static_cast<size_t>(b)] < 0) {
        best[static_cast<size_t>(b)] = s;
        id[static_cast<size_t>(b)] = offset + i;
      }
    }
  }
  return argmax_over(tp, best, id);
}

std::vector<std::vector<BeamCandidate>> beam_candidates(const Tensor& logits_any, int64_t offset, int64_t vocab, int64_t beams,
                                                        const std::vector<double>& beam_scores, int64_t keep,
                                                        comm::Communicator* tp) {
  const Tensor logits = contiguous(cast(to(logits_any.detach(), cpu_device()), DType::kF64));
  MF_CHECK(logits.ndim() == 2 && beams > 0 && logits.shape(0) % beams == 0 &&
               static_cast<int64_t>(beam_scores.size()) == logits.shape(0) && keep > 0 && offset + logits.shape(1) <= vocab,
           "beam search: logits ", logits.str(), " of ids [", offset, ", ", offset + logits.shape(1), ") of ", vocab, " for ",
           beams, " beams with ", beam_scores.size(), " scores");
  const int64_t R = logits.shape(0), V = logits.shape(1), G = R / beams;
  const double* l = logits.data<double>();
  // log_softmax over the whole vocabulary: the max and the sum of exponentials over the group.
  std::vector<double> mx(static_cast<size_t>(R), kNegInf), z(static_cast<size_t>(R), 0.0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < V; ++i) mx[static_cast<size_t>(r)] = std::max(mx[static_cast<size_t>(r)], l[r * V + i]);
  mx = reduce(tp, mx, comm::ReduceOp::kMax);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < V; ++i) z[static_cast<size_t>(r)] += std::exp(l[r * V + i] - mx[static_cast<size_t>(r)]);
  z = reduce(tp, z, comm::ReduceOp::kSum);
  auto better = [](const BeamCandidate& a, const BeamCandidate& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.beam != b.beam ? a.beam < b.beam : a.token < b.token;
  };
  // Each rank's `keep` best per group as (score, beam, token) triples, padded with -inf.
  std::vector<double> mine(static_cast<size_t>(G * keep * 3), kNegInf);
  for (int64_t g = 0; g < G; ++g) {
    std::vector<BeamCandidate> c;
    c.reserve(static_cast<size_t>(beams * V));
    for (int64_t j = 0; j < beams; ++j) {
      const int64_t r = g * beams + j;
      const double base = beam_scores[static_cast<size_t>(r)] - mx[static_cast<size_t>(r)] - std::log(z[static_cast<size_t>(r)]);
      for (int64_t i = 0; i < V; ++i) c.push_back({l[r * V + i] + base, j, offset + i});
    }
    const int64_t n = std::min<int64_t>(keep, static_cast<int64_t>(c.size()));
    std::partial_sort(c.begin(), c.begin() + n, c.end(), better);
    for (int64_t k = 0; k < n; ++k) {
      double* t = mine.data() + (g * keep + k) * 3;
      t[0] = c[static_cast<size_t>(k)].score;
      t[1] = static_cast<double>(c[static_cast<size_t>(k)].beam);
      t[2] = static_cast<double>(c[static_cast<size_t>(k)].token);
    }
  }
  const std::vector<double> all = gather(tp, mine);
  const size_t ranks = all.size() / mine.size();
  std::vector<std::vector<BeamCandidate>> out(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) {
    std::vector<BeamCandidate> c;
    for (size_t r = 0; r < ranks; ++r)
      for (int64_t k = 0; k < keep; ++k) {
        const double* t = all.data() + r * mine.size() + static_cast<size_t>((g * keep + k) * 3);
        if (t[0] > kNegInf) c.push_back({t[0], static_cast<int64_t>(t[1]), static_cast<int64_t>(t[2])});
      }
    std::sort(c.begin(), c.end(), better);
    if (static_cast<int64_t>(c.size()) > keep) c.resize(static_cast<size_t>(keep));
    out[static_cast<size_t>(g)] = std::move(c);
  }
  return out;
}

}  // namespace mf::infer
