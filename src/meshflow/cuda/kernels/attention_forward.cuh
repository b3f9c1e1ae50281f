// Flash-attention forward kernel (one kernel for every dtype; the matrix products go through
// WarpTile: tensor cores for bf16/f16, FMAs for f32/f64).
//
// Tiling: a block of kWarps warps owns kBM = 16 kWarps query rows of one (b, h); warp w owns
// rows 16w .. 16w + 15 of them for the whole kernel, so after the block-wide load of a K/V
// tile everything a warp does is private to it. For each key tile of kBN = kBM keys:
//   S_w (16, kBN)  = Q_w (16, D) K^T (D, kBN)             WarpTile products -> shared, Acc
//   online softmax (lanes 2r, 2r+1 own row r, half of the columns each): mask, scale, new
//   row max m, alpha = exp(m_old - m), l = alpha l + sum_j p_j, P_w = dropout(p) (T, shared)
//   O_w (16, D)   = alpha O_w + P_w (16, kBN) V (kBN, D)   O_w in shared memory as Acc
// and at the end O = O_w * keep_scale / l, lse = m + log l (-inf and O = 0 for a row that sees
// no key: exactly what the CPU kernel does). Causal blocks stop at their last visible key tile.
#pragma once
#include "meshflow/cuda/kernels/attention_common.cuh"

namespace mf::cuda::attn {

// Shared-memory layout of the forward kernel; the host sizes the launch with the same code.
template <class T, int kDP, int kWarps>
struct ForwardSmem {
  using A = Acc<T>;
  static constexpr int kBM = 16 * kWarps, kBN = kBM;
  static constexpr int kLD = kDP + kPad<T>;   // Q, K, V tiles (T)
  static constexpr int kLS = kBN + kPad<A>;   // per-warp scores (Acc)
  static constexpr int kLP = kBN + kPad<T>;   // per-warp probabilities (T)
  static constexpr int kLO = kDP + kPad<A>;   // per-warp output accumulator (Acc)
  T *q, *k, *v;
  uint8_t* key_valid;
  A *s, *o;
  T* p;
  __host__ __device__ explicit ForwardSmem(unsigned char* base, int64_t* nbytes = nullptr) {
    SmemCarver c(base);
    q = c.take<T>(kBM * kLD);
    k = c.take<T>(kBN * kLD);
    v = c.take<T>(kBN * kLD);
    key_valid = c.take<uint8_t>(kBN);
    s = c.take<A>(kWarps * 16 * kLS);
    p = c.take<T>(kWarps * 16 * kLP);
    o = c.take<A>(kWarps * 16 * kLO);
    if (nbytes) *nbytes = c.nbytes();
  }
  // Dynamic shared memory of one block (host).
  static int64_t bytes() {
    int64_t n = 0;
    ForwardSmem layout(nullptr, &n);
    return n;
  }
};

// q (B,H,Tq,D), k/v (B,H,Tk,D), out (B,H,Tq,D) strided (last axis contiguous); lse (B,H,Tq)
// contiguous. Grid: x = b * H + h, y = query tile (reversed under causal: longest first).
template <class T, class L, int kDP, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    attention_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                             T* __restrict__ out, L* __restrict__ lse, Args a, Geom gq, Geom gk, Geom gv, Geom go,
                             bool vec_q, bool vec_kv) {
  using A = Acc<T>;
  using S = ForwardSmem<T, kDP, kWarps>;
  constexpr int kBM = S::kBM, kBN = S::kBN, kLD = S::kLD, kLS = S::kLS, kLP = S::kLP, kLO = S::kLO;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  S sm(smem_raw);

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int r = lane >> 1, half = lane & 1;  // this lane's row of the warp, half of the columns
  A* s_w = sm.s + warp * 16 * kLS;
  T* p_w = sm.p + warp * 16 * kLP;
  A* o_w = sm.o + warp * 16 * kLO;

  const int64_t bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
  const int64_t ntiles = (a.Tq + kBM - 1) / kBM;
  const int64_t tile = a.causal ? ntiles - 1 - blockIdx.y : blockIdx.y;
  const int64_t i0 = tile * kBM;
  const int64_t i = i0 + warp * 16 + r;  // this lane's query row
  const bool row_ok = i < a.Tq;
  const int nd = static_cast<int>((a.D + 15) / 16);  // 16-wide column blocks holding D
  const A scale = static_cast<A>(a.scale);
  const A ninf = neg_inf<A>();

  load_tile<T, kBM, kDP, kLD>(sm.q, q + b * gq.sb + h * gq.sh, gq.st, i0, a.Tq, a.D, vec_q);
#pragma unroll 4
  for (int c = half * (kDP / 2); c < (half + 1) * (kDP / 2); ++c) o_w[r * kLO + c] = A(0);

  A m = ninf, l = A(0);  // running row max and sum of exp(s - m) (before dropout)
  DropoutDraw draw(a);
  const uint64_t base = a.dropout && row_ok ? rng_base(a, b, h, i) : 0;
  const int64_t kend = a.causal ? std::min<int64_t>(a.Tk, i0 + kBM) : a.Tk;
  const T* kb = k + b * gk.sb + h * gk.sh;
  const T* vb = v + b * gv.sb + h * gv.sh;

  for (int64_t j0 = 0; j0 < kend; j0 += kBN) {
    __syncthreads();  // every warp is done with the previous K/V tile
    load_tile<T, kBN, kDP, kLD>(sm.k, kb, gk.st, j0, a.Tk, a.D, vec_kv);
    load_tile<T, kBN, kDP, kLD>(sm.v, vb, gv.st, j0, a.Tk, a.D, vec_kv);
    load_key_valid<kBN>(sm.key_valid, a, b, j0);
    __syncthreads();

    // S_w (16, kBN) = Q_w (16, D) K^T (D, kBN)
    for (int n = 0; n < kBN / 16; ++n) {
      WarpTile<T> t;
      t.zero();
      for (int kk = 0; kk < nd; ++kk)
        t.template mma<true>(sm.q + (warp * 16) * kLD + kk * 16, kLD, sm.k + (n * 16) * kLD + kk * 16, kLD);
      t.store(s_w + n * 16, kLS);
    }
    __syncwarp();

    // Online softmax of row r over this tile; lanes 2r and 2r+1 take half the columns each.
    constexpr int kHalf = kBN / 2;
    A* srow = s_w + r * kLS + half * kHalf;
    T* prow = p_w + r * kLP + half * kHalf;
    A tmax = ninf;
    for (int c = 0; c < kHalf; ++c) {
      const int jt = half * kHalf + c;
      const int64_t j = j0 + jt;
      const bool ok = row_ok && sm.key_valid[jt] && (!a.causal || j <= i);
      const A sv = ok ? srow[c] * scale : ninf;
      srow[c] = sv;
      tmax = max(tmax, sv);
    }
    tmax = max(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    const A m_new = max(m, tmax);
    // m == -inf: nothing seen yet, l and O are 0, any finite alpha works.
    const A alpha = m == ninf ? A(0) : prob_exp<T>(m - m_new);
    A sum = A(0);
    for (int c = 0; c < kHalf; ++c) {
      const A sv = srow[c];
      const A pv = sv == ninf ? A(0) : prob_exp<T>(sv - m_new);
      sum += pv;
      const bool keep = !a.dropout || pv == A(0) || draw.keep(base + static_cast<uint64_t>(j0 + half * kHalf + c));
      prow[c] = from_acc<T>(keep ? pv : A(0));
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    if (alpha != A(1)) {
#pragma unroll 4
      for (int c = half * (kDP / 2); c < (half + 1) * (kDP / 2); ++c) o_w[r * kLO + c] *= alpha;
    }
    __syncwarp();

    // O_w (16, D) += P_w (16, kBN) V (kBN, D)
    for (int n = 0; n < nd; ++n) {
      WarpTile<T> t;
      t.load(o_w + n * 16, kLO);
      for (int kk = 0; kk < kBN / 16; ++kk)
        t.template mma<false>(p_w + kk * 16, kLP, sm.v + (kk * 16) * kLD + n * 16, kLD);
      t.store(o_w + n * 16, kLO);
    }
    __syncwarp();
  }

  // out = O_w * keep_scale / l; a row without a visible key (m = -inf) is 0 with lse -inf.
  // The row multipliers go through shared memory so that the warp writes whole rows.
  const bool seen = m != ninf;
  if (half == 0) {
    s_w[r * kLS] = seen ? static_cast<A>(a.keep_scale) / l : A(0);
    if (row_ok) lse_store<L, A>(lse + bh * a.Tq + i, seen ? m + acc_log(l) : ninf);
  }
  __syncwarp();
  for (int rr = 0; rr < 16; ++rr) {
    const int64_t row = i0 + warp * 16 + rr;
    if (row >= a.Tq) break;
    const A mul = s_w[rr * kLS];
    T* orow = out + b * go.sb + h * go.sh + row * go.st;
    for (int c = lane; c < a.D; c += 32) orow[c] = from_acc<T>(o_w[rr * kLO + c] * mul);
  }
}

}  // namespace mf::cuda::attn
