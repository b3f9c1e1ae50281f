#include "meshflow/global/ring_attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/autograd/node.h"
#include "meshflow/core/error.h"
#include "meshflow/core/trace.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"
#include "meshflow/random/batch_slice.h"
#include "meshflow/random/generator.h"

namespace mf::global {

namespace {
constexpr const char* kOp = "ring_attention";
// Point-to-point tags of the ring (the group's other traffic is collective).
constexpr int kKvTag = 7101, kGradTag = 7102, kMoveTag = 7110;

// Which stretches of the sequence a rank holds: pieces of `len` positions, by their index in
// positional order (the sequence is pieces 0, 1, ... of len positions each), one per slot.
struct Pieces {
  int64_t len;
  std::vector<int64_t> index;
};

// The ring's geometry. Contiguous: rank r holds piece r of the chunk length. Balanced (causal):
// pieces of half a chunk, rank r holding r and 2n-1-r, so that every rank has as many visible
// query-key pairs (Megatron's load balancing).
struct Ring {
  comm::Communicator* comm;
  int rank, size;
  int64_t chunk;
  bool balanced;
  int next() const { return (rank + 1) % size; }
  int prev() const { return (rank + size - 1) % size; }
  // The rank whose keys are held at step s (they started there and moved s ranks on).
  int source_at(int s) const { return (rank - s + size) % size; }
  Pieces of(int r) const {
    if (!balanced) return {chunk, {r}};
    return {chunk / 2, {r, 2 * static_cast<int64_t>(size) - 1 - r}};
  }
};

// Keys (0) or values (1) of a packed (2, B, H, c, D) buffer: a view.
Tensor part(const Tensor& kv, size_t i) { return unbind(kv, 0)[i]; }
// Positions [slot len, (slot + 1) len) of a (B, H, c, D) or (B, H, c) tensor: a view.
Tensor slot_of(const Tensor& t, int64_t slot, int64_t len) { return narrow(t, 2, slot * len, len); }

// Whether the queries of piece qp see any key of piece kp (pieces of len positions).
bool visible(const kernels::AttentionParams& p, int64_t qp, int64_t kp, int64_t len) {
  if (!p.causal) return true;
  if (kp > qp) return false;
  // The nearest pair: the piece's first query and the key piece's last key, (qp - kp) len - len + 1
  // apart.
  return p.window == 0 || (qp - kp) * len - len + 1 < p.window;
}

// The kernel's parameters for query piece qp against key piece kp.
kernels::AttentionParams block_params(const kernels::AttentionParams& base, int64_t qp, int64_t kp, int64_t len) {
  kernels::AttentionParams p = base;
  p.diagonal = (qp - kp) * len;
  p.q_start = qp * len;
  p.k_start = kp * len;
  return p;
}

// The mask's columns of key piece kp (undefined: none).
Tensor mask_of(const Tensor& mask, int64_t kp, int64_t len) {
  return mask.defined() ? contiguous(narrow(mask, 1, kp * len, len)) : Tensor();
}

// The output's storage: a contiguous (B, c, H, D) buffer seen as (B, H, c, D).
Tensor empty_out(int64_t B, int64_t H, int64_t c, int64_t D, DType dt, Device dev) {
  return permute(empty({B, c, H, D}, dt, dev), {0, 2, 1, 3});
}

// out/lse (the merged blocks so far) += block o/l by the log-sum-exp rule. out, o: (B, H, m, D),
// lse, l: (B, H, m), any strides with the last axis of out and o contiguous.
template <class T>
void merge(Tensor& out, Tensor& lse, const Tensor& o, const Tensor& l) {
  const int64_t B = out.shape(0), H = out.shape(1), m = out.shape(2), D = out.shape(3);
  T* po = out.data<T>();
  T* pl = lse.data<T>();
  const T* bo = o.data<T>();
  const T* bl = l.data<T>();
  const T ninf = -std::numeric_limits<T>::infinity();
#pragma omp parallel for if (B * H * m * D > (int64_t{1} << 16))
  for (int64_t row = 0; row < B * H * m; ++row) {
    const int64_t b = row / (H * m), h = row / m % H, i = row % m;
    const T lb = bl[b * l.stride(0) + h * l.stride(1) + i * l.stride(2)];
    if (lb == ninf) continue;
    T& la = pl[b * lse.stride(0) + h * lse.stride(1) + i * lse.stride(2)];
    T* x = po + b * out.stride(0) + h * out.stride(1) + i * out.stride(2);
    const T* y = bo + b * o.stride(0) + h * o.stride(1) + i * o.stride(2);
    if (la == ninf) {
      for (int64_t d = 0; d < D; ++d) x[d] = y[d];
      la = lb;
      continue;
    }
    const T mx = std::max(la, lb), wa = std::exp(la - mx), wb = std::exp(lb - mx), sum = wa + wb;
    const T fa = wa / sum, fb = wb / sum;
    for (int64_t d = 0; d < D; ++d) x[d] = x[d] * fa + y[d] * fb;
    la = mx + std::log(sum);
  }
}

// dst += src, both (B, H, m, D) with the last axis contiguous (dst a slot's view).
template <class T>
void accumulate(Tensor& dst, const Tensor& src) {
  const int64_t B = dst.shape(0), H = dst.shape(1), m = dst.shape(2), D = dst.shape(3);
  T* pd = dst.data<T>();
  const T* ps = src.data<T>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < m; ++i) {
        T* x = pd + b * dst.stride(0) + h * dst.stride(1) + i * dst.stride(2);
        const T* y = ps + b * src.stride(0) + h * src.stride(1) + i * src.stride(2);
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) x[d] += y[d];
      }
}
void accumulate(Tensor dst, const Tensor& src) {
  if (dst.dtype() == DType::kF32)
    accumulate<float>(dst, src);
  else
    accumulate<double>(dst, src);
}

// Posts the exchange of `send` (to the next rank) for `recv` (from the previous one).
std::vector<comm::WorkPtr> exchange(const Ring& ring, const Tensor& send, Tensor& recv, int tag) {
  return {ring.comm->send(send, ring.next(), tag), ring.comm->recv(recv, ring.prev(), tag)};
}
void wait_all(std::vector<comm::WorkPtr>& works) {
  if (works.empty()) return;
  // The trace's "ring wait": what the transfer posted before the step's compute did not hide.
  const trace::Scope span = trace::enabled() ? trace::Scope("comm", "ring wait") : trace::Scope();
  for (comm::WorkPtr& w : works) w->wait();
  works.clear();
}

// t (B, H, c, D) or (B, H, c), this rank's piece in one layout, moved to the other (to_balanced:
// contiguous -> balanced, else back; Ring::of): each half chunk goes to the rank holding it there.
Tensor move_pieces(const Tensor& t, const Ring& ring, bool to_balanced) {
  Ring from = ring, to = ring;
  from.balanced = !to_balanced;
  to.balanced = to_balanced;
  const int64_t h = ring.chunk / 2;
  // Half piece j's holder and slot in a layout.
  auto holder = [&](const Ring& l, int64_t j) -> std::pair<int, int64_t> {
    if (!l.balanced) return {static_cast<int>(j / 2), j % 2};
    const int64_t n = l.size;
    return j < n ? std::pair<int, int64_t>{static_cast<int>(j), 0}
                 : std::pair<int, int64_t>{static_cast<int>(2 * n - 1 - j), 1};
  };
  auto halves = [&](const Ring& l) {  // this rank's half pieces, by slot
    const Pieces p = l.of(ring.rank);
    if (l.balanced) return p.index;
    return std::vector<int64_t>{2 * p.index[0], 2 * p.index[0] + 1};
  };
  Tensor src = contiguous(t);
  Tensor out = empty(src.shape(), src.dtype(), src.device());
  std::vector<comm::WorkPtr> works;
  std::vector<Tensor> keep;  // the messages, alive until sent
  keep.reserve(4);
  const std::vector<int64_t> mine_from = halves(from), mine_to = halves(to);
  for (int64_t slot = 0; slot < 2; ++slot) {  // receive the half each slot of `to` holds
    const int rank = holder(from, mine_to[static_cast<size_t>(slot)]).first;
    if (rank == ring.rank) continue;
    Tensor buf = contiguous(slot_of(out, slot, h));  // a fresh buffer, copied into place below
    keep.push_back(buf);
    works.push_back(ring.comm->recv(keep.back(), rank, kMoveTag + static_cast<int>(slot)));
  }
  const size_t received = keep.size();
  for (int64_t slot = 0; slot < 2; ++slot) {  // send each half of `from` to its holder in `to`
    const auto [rank, to_slot] = holder(to, mine_from[static_cast<size_t>(slot)]);
    Tensor piece = slot_of(src, slot, h);
    if (rank == ring.rank) {
      Tensor dst = slot_of(out, to_slot, h);
      copy_(dst, piece);
      continue;
    }
    keep.push_back(contiguous(piece));
    works.push_back(ring.comm->send(keep.back(), rank, kMoveTag + static_cast<int>(to_slot)));
  }
  wait_all(works);
  size_t r = 0;
  for (int64_t slot = 0; slot < 2; ++slot) {
    if (holder(from, mine_to[static_cast<size_t>(slot)]).first == ring.rank) continue;
    Tensor dst = slot_of(out, slot, h);
    copy_(dst, keep[r++]);
  }
  MF_CHECK(r == received, kOp, ": moved ", r, " of ", received, " received halves");
  return out;
}

// One ring step's blocks, inside the trace span `name`: fn(query slot, key slot, key piece, the
// block's kernel parameters) for each of this rank's query pieces against each key piece held at
// step s that the mask leaves visible.
template <class Fn>
void for_each_block(const Ring& ring, const kernels::AttentionParams& base, int s, const char* name, Fn&& fn) {
  const Pieces mine = ring.of(ring.rank), theirs = ring.of(ring.source_at(s));
  const trace::Scope span = trace::enabled() ? trace::Scope("op", name) : trace::Scope();
  for (size_t i = 0; i < mine.index.size(); ++i)
    for (size_t j = 0; j < theirs.index.size(); ++j) {
      const int64_t qp = mine.index[i], kp = theirs.index[j];
      if (visible(base, qp, kp, mine.len))
        fn(static_cast<int64_t>(i), static_cast<int64_t>(j), kp, block_params(base, qp, kp, mine.len));
    }
}

// The attention of this rank's queries against every key, around the ring: out (B, H, c, D) and
// lse (B, H, c) in the ring's layout. q (B, H, c, D), kv0 (2, B, H, c, D) packed.
void ring_forward(const Ring& ring, const kernels::AttentionParams& base, const Tensor& q, const Tensor& kv0,
                  const Tensor& mask, Tensor& out, Tensor& lse) {
  const int64_t B = q.shape(0), H = q.shape(1), D = q.shape(3);
  const Pieces mine = ring.of(ring.rank);
  const int64_t len = mine.len;
  auto forward_kernel = kernel<kernels::AttentionForward>("attention_forward", q.device(), q.dtype());
  Tensor block_out = empty_out(B, H, len, D, q.dtype(), q.device()),
         block_lse = empty({B, H, len}, q.dtype(), q.device());
  Tensor kv = kv0;
  for (int s = 0; s < ring.size; ++s) {
    std::vector<comm::WorkPtr> works;
    Tensor next;
    if (s + 1 < ring.size) {  // the next keys travel while these are used
      next = empty(kv.shape(), kv.dtype(), kv.device());
      works = exchange(ring, kv, next, kKvTag);
    }
    for_each_block(ring, base, s, "ring step",
                   [&](int64_t si, int64_t sj, int64_t kp, const kernels::AttentionParams& p) {
                     forward_kernel(slot_of(q, si, len), slot_of(part(kv, 0), sj, len), slot_of(part(kv, 1), sj, len),
                                    mask_of(mask, kp, len), p, block_out, block_lse);
                     Tensor o = slot_of(out, si, len), l = slot_of(lse, si, len);
                     if (q.dtype() == DType::kF32)
                       merge<float>(o, l, block_out, block_lse);
                     else
                       merge<double>(o, l, block_out, block_lse);
                   });
    wait_all(works);
    if (next.defined()) kv = next;
  }
}

// The gradients of ring_forward's inputs from go (B, H, c, D), all in the ring's layout: dq, and
// dkv (2, B, H, c, D) of this rank's own keys and values (each key piece's accumulator travels
// with it and returns to its owner after the last rank's turn).
void ring_backward(const Ring& ring, const kernels::AttentionParams& base, const Tensor& q, const Tensor& kv0,
                   const Tensor& mask, const Tensor& out, const Tensor& lse, const Tensor& go, Tensor& dq,
                   Tensor& dkv) {
  const int64_t B = q.shape(0), H = q.shape(1), D = q.shape(3);
  const Pieces mine = ring.of(ring.rank);
  const int64_t len = mine.len;
  auto backward_kernel = kernel<kernels::AttentionBackward>("attention_backward", q.device(), q.dtype());
  const Shape piece{B, H, len, D};
  Tensor tdq = empty(piece, q.dtype(), q.device()), tdk = empty(piece, q.dtype(), q.device()),
         tdv = empty(piece, q.dtype(), q.device());
  std::vector<Tensor> lse_of;  // each slot's lse, contiguous as the kernel reads it
  for (size_t i = 0; i < mine.index.size(); ++i)
    lse_of.push_back(contiguous(slot_of(lse, static_cast<int64_t>(i), len)));
  dq = zeros(q.shape(), q.dtype(), q.device());
  dkv = zeros(kv0.shape(), q.dtype(), q.device());
  Tensor kv = kv0;
  for (int s = 0; s < ring.size; ++s) {
    std::vector<comm::WorkPtr> works;
    Tensor next;
    if (s + 1 < ring.size) {
      next = empty(kv.shape(), kv.dtype(), kv.device());
      works = exchange(ring, kv, next, kKvTag);
    }
    for_each_block(ring, base, s, "ring step backward",
                   [&](int64_t si, int64_t sj, int64_t kp, const kernels::AttentionParams& p) {
                     backward_kernel(slot_of(go, si, len), slot_of(q, si, len), slot_of(part(kv, 0), sj, len),
                                     slot_of(part(kv, 1), sj, len), slot_of(out, si, len),
                                     lse_of[static_cast<size_t>(si)], mask_of(mask, kp, len), p, tdq, tdk, tdv);
                     accumulate(slot_of(dq, si, len), tdq);
                     accumulate(slot_of(part(dkv, 0), sj, len), tdk);
                     accumulate(slot_of(part(dkv, 1), sj, len), tdv);
                   });
    // The keys' gradient goes on with them; after the last step, back to their owner (the next rank).
    Tensor dnext = empty(dkv.shape(), dkv.dtype(), dkv.device());
    std::vector<comm::WorkPtr> grads = exchange(ring, dkv, dnext, kGradTag);
    wait_all(works);
    wait_all(grads);
    if (next.defined()) kv = next;
    dkv = dnext;
  }
}
}  // namespace

Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts,
                      comm::Communicator& comm) {
  MF_CHECK(q.device().type == DeviceType::kCPU, kOp, ": context parallelism runs on the CPU (the CUDA flash kernels ",
           "take no block offsets yet), got q ", q.str());
  MF_CHECK((q.dtype() == DType::kF32 || q.dtype() == DType::kF64) && k.dtype() == q.dtype() && v.dtype() == q.dtype(),
           kOp, ": q ", q.str(), ", k ", k.str(), ", v ", v.str(), " must be f32 or f64 alike");
  MF_CHECK(q.ndim() == 4 && k.shape() == q.shape() && v.shape() == q.shape(), kOp, ": q ", q.str(), ", k ", k.str(),
           ", v ", v.str(), " must be equal (batch, heads, chunk, head_dim) pieces (rank ", comm.rank(), " of ",
           comm.group_str(), ")");
  MF_CHECK(opts.window >= 0 && (opts.window == 0 || opts.causal), kOp, ": a sliding window needs causal attention");
  const int64_t B = q.shape(0), H = q.shape(1), c = q.shape(2), D = q.shape(3), T = c * comm.size();
  // Causal attention without a window is load-balanced when the chunk halves (a window already
  // bounds every query's keys).
  const Ring ring{&comm, comm.rank(), comm.size(), c, opts.causal && opts.window == 0 && c % 2 == 0 && comm.size() > 1};
  Tensor mask;
  if (opts.key_padding_mask.defined()) {
    mask = contiguous(opts.key_padding_mask.detach());
    MF_CHECK(mask.dtype() == DType::kBool && mask.shape() == Shape({B, T}), kOp, ": key_padding_mask ", mask.str(),
             " must be bool (batch, keys) = (", B, ", ", T, ")");
  }
  kernels::AttentionParams base;
  base.causal = opts.causal;
  base.window = opts.window;
  base.scale = opts.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(D)) : opts.scale;
  base.logical_heads = opts.logical_heads > 0 ? opts.logical_heads : H;
  base.head_offset = opts.head_offset;
  base.logical_q = base.logical_k = T;
  base.dropout_p = opts.dropout_p;
  if (base.dropout_p > 0.0) {
    Generator& g = opts.gen ? *opts.gen : default_generator();
    base.seed = g.seed();
    base.stream = g.take_stream();
    const BatchSlice& bs = current_batch_slice();
    if (bs.active()) base.dropout_offset = static_cast<uint64_t>(bs.start * base.logical_heads * T * T);
  }

  const DType dt = q.dtype();
  auto arrange = [&ring](const Tensor& t) { return ring.balanced ? move_pieces(t, ring, true) : contiguous(t); };
  const Tensor qr = arrange(q.detach());
  // This rank's keys and values, packed (2, B, H, c, D): one message per ring step.
  Tensor kv0 = empty({2, B, H, c, D}, dt, q.device());
  {
    Tensor k0 = part(kv0, 0), v0 = part(kv0, 1);
    copy_(k0, arrange(k.detach()));
    copy_(v0, arrange(v.detach()));
  }
  Tensor out = empty_out(B, H, c, D, dt, q.device());
  fill_(out, 0.0);
  Tensor lse = full({B, H, c}, -std::numeric_limits<double>::infinity(), dt, q.device());
  ring_forward(ring, base, qr, kv0, mask, out, lse);
  Tensor result = ring.balanced ? move_pieces(out, ring, false) : out;
  if (!any_requires_grad({q, k, v})) return result;

  const Tensor so = out.detach();
  record(kOp, {q, k, v}, {result},
         [ring, qr, kv0, so, lse, mask, base](const std::vector<Tensor>& g) -> std::vector<Tensor> {
           const Tensor go = ring.balanced ? move_pieces(g[0], ring, true) : contiguous(g[0]);
           Tensor dq, dkv;
           ring_backward(ring, base, qr, kv0, mask, so, lse, go, dq, dkv);
           if (!ring.balanced) return {dq, part(dkv, 0), part(dkv, 1)};
           return {move_pieces(dq, ring, false), move_pieces(part(dkv, 0), ring, false),
                   move_pieces(part(dkv, 1), ring, false)};
         });
  return result;
}

}  // namespace mf::global
