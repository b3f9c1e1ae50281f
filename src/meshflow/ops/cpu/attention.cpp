// CPU kernels: fused scaled-dot-product attention, forward and backward (flash-style).
// Work is split into blocks of query rows; for each block the scores S = scale * Q K^T are
// formed by GEMM straight from the strided q/k/v (no copies), masked, soft-maxed in place
// and multiplied into V. Only the row log-sum-exp is kept for backward, which recomputes P
// block by block. Scratch is O(block x Tk) per thread; nothing of size Tq x Tk is held.
// dk/dv of one (b, h) are accumulated by one thread over all its query blocks: no races.
#include <cblas.h>
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/cpu/vec_math.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"
#include "meshflow/random/philox.h"

namespace mf::cpu {
namespace {

using kernels::AttentionParams;

// Query rows per block (tuned with bench/attention_bench and the GPT-2 step breakdown): causal
// blocks of 64 skip more masked keys (at T=256, 62.5% of the dense work instead of 75%: the
// attention of GPT-2 small's step 20% faster; equal at T=1024); 128 without a causal mask.
inline int64_t block_rows(const AttentionParams& p) { return p.causal ? 64 : 128; }
// Below this many B*H*Tq*Tk*D multiply-adds a call runs on one thread: a parallel region
// costs more than it saves, and far more when the cores are busy elsewhere.
constexpr int64_t kParallelWork = int64_t{1} << 18;

// Row-major C(m,n) = alpha op(A) op(B) + beta C, single-threaded inside a parallel region.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  MF_CHECK(st == dnnl_success, "attention: dnnl_sgemm failed with status ", static_cast<int>(st), " (M=", m,
           " N=", n, " K=", k, ")");
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, c, static_cast<int>(ldc));
}

// Geometry of one (B, H, T, D) operand: element strides of the first three axes.
struct Geom {
  int64_t sb, sh, st;
};
Geom geom(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// Dropout keeps logical element e when philox_uniform(seed, stream, e) = u / 2^24 >= p (u the
// top 24 bits of its Philox word), that is when u >= ceil(p 2^24), exactly.
inline uint32_t keep_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 16777216.0)); }

// Philox index of score (bh, i, 0): its position in the logical (B', H', Tq', Tk') scores (a
// block of a longer sequence: its rows and keys start at q_start and k_start there).
inline uint64_t rng_base(const AttentionParams& p, int64_t bh, int64_t H, int64_t Tq, int64_t Tk, int64_t i) {
  const int64_t b = bh / H, h = bh % H, lh = p.logical_heads > 0 ? p.logical_heads : H;
  const int64_t lq = p.logical_q > 0 ? p.logical_q : Tq, lk = p.logical_k > 0 ? p.logical_k : Tk;
  return p.dropout_offset + static_cast<uint64_t>(((b * lh + p.head_offset + h) * lq + p.q_start + i) * lk + p.k_start);
}

// Causal attention: query row i sits at key position i + diagonal — by default Tk - Tq, aligned at
// the end (Tq < Tk: the queries are the last Tq positions, keys before them cached); a block of a
// longer sequence gives its own — and sees keys j <= that.
inline int64_t diagonal(const AttentionParams& p, int64_t tq, int64_t tk) {
  return p.diagonal == AttentionParams::kAligned ? tk - tq : p.diagonal;
}
// Number of unmasked-by-causality keys of query row i.
inline int64_t row_keys(const AttentionParams& p, int64_t i, int64_t tq, int64_t tk) {
  return p.causal ? std::clamp<int64_t>(i + 1 + diagonal(p, tq, tk), 0, tk) : tk;
}
// The keys a causal block of query rows [i0, i1) reads: [0, kend).
inline int64_t block_keys(const AttentionParams& p, int64_t i1, int64_t tq, int64_t tk) {
  return p.causal ? std::clamp<int64_t>(i1 + diagonal(p, tq, tk), 0, tk) : tk;
}
// The first key query row i sees: its position - window + 1 under a sliding window, else 0.
inline int64_t row_first(const AttentionParams& p, int64_t i, int64_t tq, int64_t tk) {
  return p.window > 0 ? std::max<int64_t>(0, i + diagonal(p, tq, tk) - p.window + 1) : 0;
}

// In-place masked softmax of one row of scores s[0, kend) with `n` causally visible keys, those
// before `first` masked (a sliding window): returns the row log-sum-exp (-inf when every key is
// masked; the row is then zeroed).
template <class T>
T softmax_row(T* s, int64_t kend, int64_t n, int64_t first, const bool* pad, T* inv_sum) {
  const T ninf = -std::numeric_limits<T>::infinity();
  std::fill(s, s + std::min(first, n), ninf);
  if (pad) {
    for (int64_t j = 0; j < n; ++j) s[j] = pad[j] ? ninf : s[j];
  }
  const T mx = n > 0 ? max_array(s, n) : ninf;  // vec_math.h: AVX-512 (an omp simd max ran scalar)
  if (mx == ninf) {
    std::fill(s, s + kend, T(0));
    *inv_sum = T(0);
    return ninf;
  }
  const T sum = exp_shift_sum(s, mx, s, n);
  std::fill(s + n, s + kend, T(0));
  *inv_sum = T(1) / sum;
  return mx + std::log(sum);
}

// q (B,H,Tq,D), k/v (B,H,Tk,D), out (B,H,Tq,D), mask (B,Tk) bool or undefined, lse (B,H,Tq).
template <class T>
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                       const AttentionParams& p, const Tensor& out, const Tensor& lse) {
  const int64_t B = q.shape(0), H = q.shape(1), Tq = q.shape(2), D = q.shape(3), Tk = k.shape(2);
  if (B * H * Tq == 0 || Tk == 0 || D == 0) return;  // the op rejects Tk == 0 and D == 0
  const Geom gq = geom(q), gk = geom(k), gv = geom(v), go = geom(out);
  const T* qp = q.data<T>();
  const T* kp = k.data<T>();
  const T* vp = v.data<T>();
  T* op = out.data<T>();
  T* lp = lse.data<T>();
  const bool* mp = mask.defined() ? mask.data<bool>() : nullptr;
  const int64_t block_m = block_rows(p), nblk = (Tq + block_m - 1) / block_m;
  const int64_t ntask = B * H * nblk;
  const int64_t lds = (Tk + 15) / 16 * 16 + 16;  // padded row stride of the score block
  const bool drop = p.dropout_p > 0.0;
  const T keep_scale = drop ? static_cast<T>(1.0 / (1.0 - p.dropout_p)) : T(1);
  const uint32_t threshold = keep_threshold(p.dropout_p);
  const bool par = ntask > 1 && B * H * Tq * Tk * D >= kParallelWork && !omp_in_parallel();
#pragma omp parallel if (par)
  {
    std::vector<T> s(static_cast<size_t>(block_m * lds));
    std::vector<T> inv(block_m);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ntask; ++task) {
      // Causal blocks grow with the block index: hand out the big ones of every head first.
      const int64_t blk = p.causal ? nblk - 1 - task / (B * H) : task % nblk;
      const int64_t bh = p.causal ? task % (B * H) : task / nblk, b = bh / H, h = bh % H;
      const int64_t i0 = blk * block_m, i1 = std::min(Tq, i0 + block_m), m = i1 - i0;
      const int64_t kend = block_keys(p, i1, Tq, Tk);
      const T* qb = qp + b * gq.sb + h * gq.sh + i0 * gq.st;
      const T* kb = kp + b * gk.sb + h * gk.sh;
      const T* vb = vp + b * gv.sb + h * gv.sh;
      T* ob = op + b * go.sb + h * go.sh + i0 * go.st;
      const bool* pad = mp ? mp + b * Tk : nullptr;
      if (kend == 0) {  // a block of queries before every key (a block of a longer sequence)
        for (int64_t r = 0; r < m; ++r) {
          std::fill(ob + r * go.st, ob + r * go.st + D, T(0));
          lp[bh * Tq + i0 + r] = -std::numeric_limits<T>::infinity();
        }
        continue;
      }
      // S (m, kend) = scale * Qblk (m, D) K[0:kend]^T (D, kend)
      gemm(false, true, m, kend, D, static_cast<T>(p.scale), qb, gq.st, kb, gk.st, T(0), s.data(), lds);
      for (int64_t r = 0; r < m; ++r) {
        const int64_t i = i0 + r, n = row_keys(p, i, Tq, Tk);
        T* row = s.data() + r * lds;
        lp[bh * Tq + i] = softmax_row(row, kend, n, row_first(p, i, Tq, Tk), pad, &inv[r]);
        T sc = inv[r] * keep_scale;
        // Keys from n on are causally masked (zeros): only the first n are scaled, and dropped.
        if (drop) {  // each visible key's Philox word decides it, in the same pass
          philox_for_each_word(p.seed, p.stream, rng_base(p, bh, H, Tq, Tk, i), n,
                               [row, sc, threshold](int64_t j, uint32_t w) { row[j] = (w >> 8) >= threshold ? row[j] * sc : T(0); });
        } else {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) row[j] *= sc;
        }
      }
      // O (m, D) = P (m, kend) V[0:kend] (kend, D)
      gemm(false, false, m, D, kend, T(1), s.data(), lds, vb, gv.st, T(0), ob, go.st);
    }
  }
}

// dout/out (B,H,Tq,D); dq like q, dk/dv like k/v (any strides, last axis contiguous).
template <class T>
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& mask, const AttentionParams& p, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv) {
  const int64_t B = q.shape(0), H = q.shape(1), Tq = q.shape(2), D = q.shape(3), Tk = k.shape(2);
  const Geom gq = geom(q), gk = geom(k), gv = geom(v), go = geom(out), gdo = geom(dout);
  const Geom gdq = geom(dq), gdk = geom(dk), gdv = geom(dv);
  const T* qp = q.data<T>();
  const T* kp = k.data<T>();
  const T* vp = v.data<T>();
  const T* op = out.data<T>();
  const T* dop = dout.data<T>();
  const T* lp = lse.data<T>();
  T* dqp = dq.data<T>();
  T* dkp = dk.data<T>();
  T* dvp = dv.data<T>();
  const bool* mp = mask.defined() ? mask.data<bool>() : nullptr;
  const int64_t block_m = block_rows(p), nblk = (Tq + block_m - 1) / block_m;
  const int64_t lds = (Tk + 15) / 16 * 16 + 16;
  const bool drop = p.dropout_p > 0.0;
  const T keep_scale = drop ? static_cast<T>(1.0 / (1.0 - p.dropout_p)) : T(1);
  const uint32_t threshold = keep_threshold(p.dropout_p);
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t nbh = B * H;
  if (nbh == 0 || Tk == 0 || D == 0) return;
  const bool par = nbh > 1 && nbh * Tq * Tk * D >= kParallelWork && !omp_in_parallel();
#pragma omp parallel if (par)
  {
    std::vector<T> pbuf(static_cast<size_t>(block_m * lds)), dpbuf(static_cast<size_t>(block_m * lds));
    std::vector<T> pdbuf(drop ? static_cast<size_t>(block_m * lds) : 0);
    std::vector<T> di(block_m);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < nbh; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const T* kb = kp + b * gk.sb + h * gk.sh;
      const T* vb = vp + b * gv.sb + h * gv.sh;
      T* dkb = dkp + b * gdk.sb + h * gdk.sh;
      T* dvb = dvp + b * gdv.sb + h * gdv.sh;
      for (int64_t j = 0; j < Tk; ++j) {
        std::fill(dkb + j * gdk.st, dkb + j * gdk.st + D, T(0));
        std::fill(dvb + j * gdv.st, dvb + j * gdv.st + D, T(0));
      }
      const bool* pad = mp ? mp + b * Tk : nullptr;
      for (int64_t blk = 0; blk < nblk; ++blk) {
        const int64_t i0 = blk * block_m, i1 = std::min(Tq, i0 + block_m), m = i1 - i0;
        const int64_t kend = block_keys(p, i1, Tq, Tk);
        const T* qb = qp + b * gq.sb + h * gq.sh + i0 * gq.st;
        const T* ob = op + b * go.sb + h * go.sh + i0 * go.st;
        const T* dob = dop + b * gdo.sb + h * gdo.sh + i0 * gdo.st;
        T* dqb = dqp + b * gdq.sb + h * gdq.sh + i0 * gdq.st;
        if (kend == 0) {
          for (int64_t r = 0; r < m; ++r) std::fill(dqb + r * gdq.st, dqb + r * gdq.st + D, T(0));
          continue;
        }
        // D_i = rowsum(dO_i * O_i)
        for (int64_t r = 0; r < m; ++r) {
          T acc = 0;
          const T* o = ob + r * go.st;
          const T* d = dob + r * gdo.st;
#pragma omp simd reduction(+ : acc)
          for (int64_t c = 0; c < D; ++c) acc += o[c] * d[c];
          di[r] = acc;
        }
        // P (m, kend) = exp(scale * Qblk K^T - lse), zero where masked
        gemm(false, true, m, kend, D, static_cast<T>(p.scale), qb, gq.st, kb, gk.st, T(0), pbuf.data(), lds);
        for (int64_t r = 0; r < m; ++r) {
          const int64_t i = i0 + r, n = row_keys(p, i, Tq, Tk);
          T* row = pbuf.data() + r * lds;
          const T l = lp[bh * Tq + i];
          if (l == ninf) {  // every key masked: no probability, none dropped
            std::fill(row, row + kend, T(0));
            if (drop) std::fill(pdbuf.data() + r * lds, pdbuf.data() + r * lds + kend, T(0));
            continue;
          }
          exp_shift_sum(row, l, row, n);  // the forward's exp, so P is the forward's
          if (pad)
            for (int64_t j = 0; j < n; ++j) row[j] = pad[j] ? T(0) : row[j];
          std::fill(row, row + std::min(row_first(p, i, Tq, Tk), n), T(0));
          std::fill(row + n, row + kend, T(0));
          if (drop) {  // the forward's draws for the n visible keys; the masked ones are dropped
            T* pd = pdbuf.data() + r * lds;
            philox_for_each_word(p.seed, p.stream, rng_base(p, bh, H, Tq, Tk, i), n,
                                 [row, pd, keep_scale, threshold](int64_t j, uint32_t w) {
                                   pd[j] = (w >> 8) >= threshold ? row[j] * keep_scale : T(0);
                                 });
            std::fill(pd + n, pd + kend, T(0));
          }
        }
        const T* pd = drop ? pdbuf.data() : pbuf.data();
        // dV[0:kend] (kend, D) += Pd^T (kend, m) dO (m, D)
        gemm(true, false, kend, D, m, T(1), pd, lds, dob, gdo.st, T(1), dvb, gdv.st);
        // dPd (m, kend) = dO (m, D) V[0:kend]^T (D, kend)
        gemm(false, true, m, kend, D, T(1), dob, gdo.st, vb, gv.st, T(0), dpbuf.data(), lds);
        // dS = P * (dP - D_i), dP = dPd * M / (1 - p)
        for (int64_t r = 0; r < m; ++r) {
          const T* pr = pbuf.data() + r * lds;
          T* dr = dpbuf.data() + r * lds;
          const T d = di[r];
          if (drop) {
            // Kept where pd != 0: a kept key with P > 0 has Pd = P / (1 - p) > 0, and where P = 0
            // the product is 0 either way.
            const T* pdr = pd + r * lds;
#pragma omp simd
            for (int64_t j = 0; j < kend; ++j) dr[j] = pr[j] * ((pdr[j] != T(0) ? dr[j] * keep_scale : T(0)) - d);
          } else {
#pragma omp simd
            for (int64_t j = 0; j < kend; ++j) dr[j] = pr[j] * (dr[j] - d);
          }
        }
        // dQblk (m, D) = scale * dS (m, kend) K (kend, D)
        gemm(false, false, m, D, kend, static_cast<T>(p.scale), dpbuf.data(), lds, kb, gk.st, T(0), dqb, gdq.st);
        // dK[0:kend] (kend, D) += scale * dS^T (kend, m) Qblk (m, D)
        gemm(true, false, kend, D, m, static_cast<T>(p.scale), dpbuf.data(), lds, qb, gq.st, T(1), dkb, gdk.st);
      }
    }
  }
}

}  // namespace

void register_attention(KernelRegistry& r) {
  r.add<kernels::AttentionForward>("attention_forward", DeviceType::kCPU, DType::kF32, attention_forward<float>);
  r.add<kernels::AttentionForward>("attention_forward", DeviceType::kCPU, DType::kF64, attention_forward<double>);
  r.add<kernels::AttentionBackward>("attention_backward", DeviceType::kCPU, DType::kF32, attention_backward<float>);
  r.add<kernels::AttentionBackward>("attention_backward", DeviceType::kCPU, DType::kF64, attention_backward<double>);
}

}  // namespace mf::cpu
