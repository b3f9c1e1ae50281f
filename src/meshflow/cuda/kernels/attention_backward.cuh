// Flash-attention backward kernels (flash-attention-2 style, deterministic: no atomics).
//
// With P = exp(scale S - lse) recomputed from q, k and the saved lse, M the dropout keep mask
// and s = 1 / (1 - p):  Pd = P M s,  dV = Pd^T dO,  dP = dO V^T,  dS = P (dP M s - Di) with
// Di = rowsum(dO O),  dQ = scale dS K,  dK = scale dS^T Q.  Three kernels:
//   attention_rowdot_kernel   Di (B*H*Tq) = rowsum(dO * O), one warp per row.
//   attention_dkdv_kernel     a block owns kBN keys of one (b, h) and loops over the query
//                             tiles that can see them; warp w owns keys 16w .. 16w + 15 and
//                             computes the transposed products S^T = K_w Q^T, dP^T = V_w dO^T,
//                             so the elementwise step and dV_w += Pd^T dO, dK_w += dS^T Q stay
//                             private to the warp; dK/dV accumulate in WarpTiles (registers).
//   attention_dq_kernel       a block owns kBM queries and loops over the key tiles they see;
//                             warp w owns query rows 16w ..: S, dP, dS as above, dQ_w += dS K.
// Every output element is written by exactly one block, whatever the masks (dK/dV rows of keys
// no query sees are written as zeros), so the results are bit-reproducible.
#pragma once
#include "meshflow/cuda/kernels/attention_common.cuh"

namespace mf::cuda::attn {

// di[bh * Tq + i] = sum_d dout[b, h, i, d] * out[b, h, i, d] in Acc<T>. One warp per row.
template <class T>
__global__ void attention_rowdot_kernel(const T* __restrict__ dout, const T* __restrict__ out, Acc<T>* __restrict__ di,
                                        Args a, Geom gdo, Geom go) {
  using A = Acc<T>;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t warps_per_block = blockDim.x >> 5;
  const int64_t nrows = a.B * a.H * a.Tq;
  for (int64_t row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < nrows;
       row += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const int64_t bh = row / a.Tq, i = row % a.Tq, b = bh / a.H, h = bh % a.H;
    const T* dr = dout + b * gdo.sb + h * gdo.sh + i * gdo.st;
    const T* orow = out + b * go.sb + h * go.sh + i * go.st;
    A acc = A(0);
    for (int64_t c = lane; c < a.D; c += 32) acc += to_acc<T>(dr[c]) * to_acc<T>(orow[c]);
    acc = warp_sum(acc);
    if (lane == 0) di[row] = acc;
  }
}

// Shared-memory layout of both backward kernels: block-wide Q, dO, K, V tiles (T), the tile's
// lse and Di (dK/dV kernel), key validity, and per-warp 16 x kBM/kBN scratch: two Acc score
// arrays (S, dP) and two T arrays (Pd, dS: the A operands of the products).
template <class T, int kDP, int kWarps>
struct BackwardSmem {
  using A = Acc<T>;
  static constexpr int kBM = 16 * kWarps, kBN = kBM;  // query rows / keys per tile
  static constexpr int kLD = kDP + kPad<T>;
  static constexpr int kLS = kBM + kPad<A>;  // kBM == kBN: one layout for S and S^T
  static constexpr int kLP = kBM + kPad<T>;
  T *q, *dout, *k, *v;
  A *lse, *di;
  uint8_t* key_valid;
  A *s, *dp;
  T *pd, *ds;
  __host__ __device__ explicit BackwardSmem(unsigned char* base, int64_t* nbytes = nullptr) {
    SmemCarver c(base);
    q = c.take<T>(kBM * kLD);
    dout = c.take<T>(kBM * kLD);
    k = c.take<T>(kBN * kLD);
    v = c.take<T>(kBN * kLD);
    lse = c.take<A>(kBM);
    di = c.take<A>(kBM);
    key_valid = c.take<uint8_t>(kBN);
    s = c.take<A>(kWarps * 16 * kLS);
    dp = c.take<A>(kWarps * 16 * kLS);
    pd = c.take<T>(kWarps * 16 * kLP);
    ds = c.take<T>(kWarps * 16 * kLP);
    if (nbytes) *nbytes = c.nbytes();
  }
  // Dynamic shared memory of one block (host).
  static int64_t bytes() {
    int64_t n = 0;
    BackwardSmem layout(nullptr, &n);
    return n;
  }
};

// dk/dv like k/v (strided, written). Grid: x = b * H + h, y = key tile.
template <class T, class L, int kDP, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    attention_dkdv_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const T* __restrict__ dout, const L* __restrict__ lse, const Acc<T>* __restrict__ di,
                          T* __restrict__ dk, T* __restrict__ dv, Args a, Geom gq, Geom gk, Geom gv, Geom gdo, Geom gdk,
                          Geom gdv, bool vec_q, bool vec_kv) {
  using A = Acc<T>;
  using S = BackwardSmem<T, kDP, kWarps>;
  constexpr int kBM = S::kBM, kBN = S::kBN, kLD = S::kLD, kLS = S::kLS, kLP = S::kLP;
  constexpr int kND = kDP / 16;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  S sm(smem_raw);

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int r = lane >> 1, half = lane & 1;
  A* st_w = sm.s + warp * 16 * kLS;   // S^T_w (16 keys, kBM queries)
  A* dpt_w = sm.dp + warp * 16 * kLS;  // dP^T_w
  T* pdt_w = sm.pd + warp * 16 * kLP;  // Pd^T_w
  T* dst_w = sm.ds + warp * 16 * kLP;  // dS^T_w

  const int64_t bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t j = j0 + warp * 16 + r;  // this lane's key
  const int nd = static_cast<int>((a.D + 15) / 16);
  const A scale = static_cast<A>(a.scale), keep_scale = static_cast<A>(a.keep_scale);
  const A ninf = neg_inf<A>();

  load_tile<T, kBN, kDP, kLD>(sm.k, k + b * gk.sb + h * gk.sh, gk.st, j0, a.Tk, a.D, vec_kv);
  load_tile<T, kBN, kDP, kLD>(sm.v, v + b * gv.sb + h * gv.sh, gv.st, j0, a.Tk, a.D, vec_kv);
  load_key_valid<kBN>(sm.key_valid, a, b, j0);

  WarpTile<T> dk_acc[kND], dv_acc[kND];
#pragma unroll
  for (int n = 0; n < kND; ++n) {
    dk_acc[n].zero();
    dv_acc[n].zero();
  }
  DropoutDraw draw(a);
  const T* qb = q + b * gq.sb + h * gq.sh;
  const T* dob = dout + b * gdo.sb + h * gdo.sh;
  // Causal: queries i < j0 see none of these keys.
  const int64_t i_begin = a.causal ? j0 / kBM * kBM : 0;

  for (int64_t i0 = i_begin; i0 < a.Tq; i0 += kBM) {
    __syncthreads();  // every warp is done with the previous Q/dO tile (and K/V are loaded)
    load_tile<T, kBM, kDP, kLD>(sm.q, qb, gq.st, i0, a.Tq, a.D, vec_q);
    load_tile<T, kBM, kDP, kLD>(sm.dout, dob, gdo.st, i0, a.Tq, a.D, vec_q);
    for (int t = static_cast<int>(threadIdx.x); t < kBM; t += static_cast<int>(blockDim.x)) {
      const int64_t i = i0 + t;
      sm.lse[t] = i < a.Tq ? lse_load<L, A>(lse + bh * a.Tq + i) : ninf;
      sm.di[t] = i < a.Tq ? di[bh * a.Tq + i] : A(0);
    }
    __syncthreads();

    // S^T_w (16, kBM) = K_w (16, D) Q^T (D, kBM);  dP^T_w (16, kBM) = V_w (16, D) dO^T (D, kBM)
    for (int n = 0; n < kBM / 16; ++n) {
      WarpTile<T> ts, tp;
      ts.zero();
      tp.zero();
      for (int kk = 0; kk < nd; ++kk) {
        ts.template mma<true>(sm.k + (warp * 16) * kLD + kk * 16, kLD, sm.q + (n * 16) * kLD + kk * 16, kLD);
        tp.template mma<true>(sm.v + (warp * 16) * kLD + kk * 16, kLD, sm.dout + (n * 16) * kLD + kk * 16, kLD);
      }
      ts.store(st_w + n * 16, kLS);
      tp.store(dpt_w + n * 16, kLS);
    }
    __syncwarp();

    // Elementwise: key j (row r), queries i0 + c for this lane's half of the columns.
    const bool key_ok = sm.key_valid[warp * 16 + r] != 0;
    constexpr int kHalf = kBM / 2;
    for (int c = half * kHalf; c < (half + 1) * kHalf; ++c) {
      const int64_t i = i0 + c;
      const A l = sm.lse[c];
      const bool ok = key_ok && i < a.Tq && (!a.causal || j <= i) && l != ninf;
      A pd = A(0), ds = A(0);
      if (ok) {
        const A pv = prob_exp<T>(st_w[r * kLS + c] * scale - l);
        const bool keep = !a.dropout || draw.keep(rng_base(a, b, h, i) + static_cast<uint64_t>(j));
        pd = keep ? pv * keep_scale : A(0);
        ds = pv * ((keep ? dpt_w[r * kLS + c] * keep_scale : A(0)) - sm.di[c]);
      }
      pdt_w[r * kLP + c] = from_acc<T>(pd);
      dst_w[r * kLP + c] = from_acc<T>(ds);
    }
    __syncwarp();

    // dV_w (16, D) += Pd^T_w (16, kBM) dO (kBM, D);  dK_w (16, D) += dS^T_w (16, kBM) Q (kBM, D)
#pragma unroll
    for (int n = 0; n < kND; ++n) {
      if (n < nd) {
        for (int kk = 0; kk < kBM / 16; ++kk) {
          dv_acc[n].template mma<false>(pdt_w + kk * 16, kLP, sm.dout + (kk * 16) * kLD + n * 16, kLD);
          dk_acc[n].template mma<false>(dst_w + kk * 16, kLP, sm.q + (kk * 16) * kLD + n * 16, kLD);
        }
      }
    }
  }

  // dK = scale * dK_w, dV = dV_w for keys < Tk (rows no query reached are zeros).
  T* dkb = dk + b * gdk.sb + h * gdk.sh;
  T* dvb = dv + b * gdv.sb + h * gdv.sh;
  const int64_t row0 = j0 + warp * 16;
#pragma unroll
  for (int n = 0; n < kND; ++n) {
    if (n < nd) {
      write_tile<T>(dv_acc[n], st_w, kLS, A(1), dvb, gdv.st, row0, a.Tk, n * 16, a.D);
      write_tile<T>(dk_acc[n], st_w, kLS, scale, dkb, gdk.st, row0, a.Tk, n * 16, a.D);
    }
  }
}

// dq like q (strided, written). Grid: x = b * H + h, y = query tile (reversed under causal).
template <class T, class L, int kDP, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    attention_dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        const T* __restrict__ dout, const L* __restrict__ lse, const Acc<T>* __restrict__ di,
                        T* __restrict__ dq, Args a, Geom gq, Geom gk, Geom gv, Geom gdo, Geom gdq, bool vec_q,
                        bool vec_kv) {
  using A = Acc<T>;
  using S = BackwardSmem<T, kDP, kWarps>;
  constexpr int kBM = S::kBM, kBN = S::kBN, kLD = S::kLD, kLS = S::kLS, kLP = S::kLP;
  constexpr int kND = kDP / 16;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  S sm(smem_raw);

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int r = lane >> 1, half = lane & 1;
  A* s_w = sm.s + warp * 16 * kLS;
  A* dp_w = sm.dp + warp * 16 * kLS;
  T* ds_w = sm.ds + warp * 16 * kLP;

  const int64_t bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
  const int64_t ntiles = (a.Tq + kBM - 1) / kBM;
  const int64_t tile = a.causal ? ntiles - 1 - blockIdx.y : blockIdx.y;
  const int64_t i0 = tile * kBM;
  const int64_t i = i0 + warp * 16 + r;  // this lane's query row
  const bool row_ok = i < a.Tq;
  const int nd = static_cast<int>((a.D + 15) / 16);
  const A scale = static_cast<A>(a.scale), keep_scale = static_cast<A>(a.keep_scale);
  const A ninf = neg_inf<A>();

  load_tile<T, kBM, kDP, kLD>(sm.q, q + b * gq.sb + h * gq.sh, gq.st, i0, a.Tq, a.D, vec_q);
  load_tile<T, kBM, kDP, kLD>(sm.dout, dout + b * gdo.sb + h * gdo.sh, gdo.st, i0, a.Tq, a.D, vec_q);
  const A l = row_ok ? lse_load<L, A>(lse + bh * a.Tq + i) : ninf;
  const A d_i = row_ok ? di[bh * a.Tq + i] : A(0);

  WarpTile<T> dq_acc[kND];
#pragma unroll
  for (int n = 0; n < kND; ++n) dq_acc[n].zero();
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

    // S_w (16, kBN) = Q_w K^T;  dP_w (16, kBN) = dO_w V^T
    for (int n = 0; n < kBN / 16; ++n) {
      WarpTile<T> ts, tp;
      ts.zero();
      tp.zero();
      for (int kk = 0; kk < nd; ++kk) {
        ts.template mma<true>(sm.q + (warp * 16) * kLD + kk * 16, kLD, sm.k + (n * 16) * kLD + kk * 16, kLD);
        tp.template mma<true>(sm.dout + (warp * 16) * kLD + kk * 16, kLD, sm.v + (n * 16) * kLD + kk * 16, kLD);
      }
      ts.store(s_w + n * 16, kLS);
      tp.store(dp_w + n * 16, kLS);
    }
    __syncwarp();

    // Elementwise: query i (row r), keys j0 + c for this lane's half of the columns.
    constexpr int kHalf = kBN / 2;
    for (int c = half * kHalf; c < (half + 1) * kHalf; ++c) {
      const int64_t j = j0 + c;
      const bool ok = row_ok && sm.key_valid[c] && (!a.causal || j <= i) && l != ninf;
      A ds = A(0);
      if (ok) {
        const A pv = prob_exp<T>(s_w[r * kLS + c] * scale - l);
        const bool keep = !a.dropout || draw.keep(base + static_cast<uint64_t>(j));
        ds = pv * ((keep ? dp_w[r * kLS + c] * keep_scale : A(0)) - d_i);
      }
      ds_w[r * kLP + c] = from_acc<T>(ds);
    }
    __syncwarp();

    // dQ_w (16, D) += dS_w (16, kBN) K (kBN, D)
#pragma unroll
    for (int n = 0; n < kND; ++n) {
      if (n < nd) {
        for (int kk = 0; kk < kBN / 16; ++kk)
          dq_acc[n].template mma<false>(ds_w + kk * 16, kLP, sm.k + (kk * 16) * kLD + n * 16, kLD);
      }
    }
  }

  // dQ = scale * dQ_w for rows < Tq.
  T* dqb = dq + b * gdq.sb + h * gdq.sh;
  const int64_t row0 = i0 + warp * 16;
#pragma unroll
  for (int n = 0; n < kND; ++n)
    if (n < nd) write_tile<T>(dq_acc[n], s_w, kLS, scale, dqb, gdq.st, row0, a.Tq, n * 16, a.D);
}

}  // namespace mf::cuda::attn
