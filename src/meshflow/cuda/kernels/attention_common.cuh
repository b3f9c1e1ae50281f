// Device building blocks of the flash-attention kernels (attention_forward.cuh,
// attention_backward.cuh): the launch arguments, the dropout decision of the CPU kernel (with
// random/philox.h's Philox, callable on the device), a 16x16 warp "MMA tile" (tensor cores
// through nvcuda::wmma for bf16/f16, plain FMAs for f32/f64), and the loaders that copy a
// (rows, D) slice of a strided (B, H, T, D) operand into a zero-padded shared-memory tile.
#pragma once
#include <mma.h>

#include <cmath>
#include <type_traits>

#include "meshflow/cuda/kernels/common.cuh"
#include "meshflow/random/philox.h"

namespace mf::cuda::attn {

// ---- launch arguments (plain data, passed by value to every kernel).

// Element strides of the batch, head and row axes of one (B, H, T, D) operand (D is contiguous).
struct Geom {
  int64_t sb = 0, sh = 0, st = 0;
};

struct Args {
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, D = 0;
  bool causal = false;       // key j is visible to query i iff j <= i (the op demands Tq == Tk)
  double scale = 1.0;        // scores are scale * q . k
  const uint8_t* mask = nullptr;  // (B, Tk) contiguous bool, nonzero = key masked; or null
  // Dropout on the probabilities: element (b, h, i, j) is kept iff the 24-bit Philox value of
  // logical index rng_base(b, h, i) + j is >= keep_threshold (see keep_threshold_of below).
  bool dropout = false;
  uint32_t keep_threshold = 0;
  double keep_scale = 1.0;   // 1 / (1 - p)
  uint64_t seed = 0, stream = 0, dropout_offset = 0;
  int64_t logical_heads = 0, head_offset = 0;
};

// Philox index of score (b, h, i, 0) in the logical (B', H', Tq, Tk) scores: the same
// expression as rng_base in ops/cpu/attention.cpp.
__device__ __forceinline__ uint64_t rng_base(const Args& a, int64_t b, int64_t h, int64_t i) {
  return a.dropout_offset + static_cast<uint64_t>(((b * a.logical_heads + a.head_offset + h) * a.Tq + i) * a.Tk);
}

// The CPU keeps element `index` iff double(float(word >> 8) * 2^-24) >= p. That float is exact
// (a 24-bit integer times a power of two), so the test is (word >> 8) >= ceil(p * 2^24), with
// p * 2^24 exact in double. Host-side; p in [0, 1).
inline uint32_t keep_threshold_of(double p) {
  double t = std::ceil(p * 16777216.0);
  return static_cast<uint32_t>(t);
}

// Dropout decisions along one thread's run of indices, drawn with random/philox.h's
// philox_block (host and device) as the CPU kernel draws them; one Philox block serves four
// consecutive indices, so a run of contiguous indices costs a quarter of a block each.
class DropoutDraw {
 public:
  __device__ DropoutDraw(const Args& a) : seed_(a.seed), stream_(a.stream), threshold_(a.keep_threshold) {}
  __device__ __forceinline__ bool keep(uint64_t index) {
    const uint64_t block = index >> 2;
    if (!have_ || block != block_) {
      w_ = philox_block(seed_, stream_, block);
      block_ = block;
      have_ = true;
    }
    const uint32_t k = static_cast<uint32_t>(index & 3);
    const uint32_t word = k == 0 ? w_.v[0] : k == 1 ? w_.v[1] : k == 2 ? w_.v[2] : w_.v[3];
    return (word >> 8) >= threshold_;
  }

 private:
  uint64_t seed_, stream_;
  uint32_t threshold_;
  bool have_ = false;
  uint64_t block_ = 0;
  Philox4x32 w_{{0, 0, 0, 0}};
};

// ---- math in the accumulation type.
__device__ __forceinline__ float acc_exp(float x) { return expf(x); }
__device__ __forceinline__ double acc_exp(double x) { return exp(x); }
__device__ __forceinline__ float acc_log(float x) { return logf(x); }
__device__ __forceinline__ double acc_log(double x) { return log(x); }
// exp of the probabilities: the fast intrinsic (a few float ulp) for bf16/f16 inputs, whose
// probabilities are rounded to 8/11 bits anyway; the accurate one for the f32/f64 reference.
template <class T>
__device__ __forceinline__ Acc<T> prob_exp(Acc<T> x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) return __expf(x);
  else return acc_exp(x);
}
template <class A>
__device__ __forceinline__ A neg_inf() {
  return -static_cast<A>(INFINITY);
}

// Storage <-> accumulation for the lse tensor, whose dtype may differ from q's (f32 beside
// bf16/f16 inputs).
template <class L, class A>
__device__ __forceinline__ A lse_load(const L* p) {
  return static_cast<A>(to_acc<L>(*p));
}
template <class L, class A>
__device__ __forceinline__ void lse_store(L* p, A x) {
  *p = from_acc<L>(static_cast<Acc<L>>(x));
}

// ---- the 16x16 warp tile. C (16x16, Acc<T>) += A (16x16) * B (16x16), A and B in shared
// memory as T: A row-major (A[m][k] = a[m * lda + k]); B row-major (B[k][n] = b[k * ldb + n])
// or, with kBT, B given as its transpose (B[k][n] = b[n * ldb + k]). load/store move C from/to
// a row-major Acc<T> array. Every lane of the warp must call every member (warp-collective).
template <class T>
constexpr bool kTensorCore = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

template <class T, bool kTC = kTensorCore<T>>
struct WarpTile;

// bf16/f16: one WMMA 16x16x16 product with f32 accumulation. Pointers must be 32-byte aligned
// and the leading dimensions multiples of 8 (T) or 4 (float) elements.
template <class T>
struct WarpTile<T, true> {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> c;
  __device__ __forceinline__ void zero() { nvcuda::wmma::fill_fragment(c, 0.0f); }
  template <bool kBT>
  __device__ __forceinline__ void mma(const T* a, int lda, const T* b, int ldb) {
    using namespace nvcuda;
    using BLayout = std::conditional_t<kBT, wmma::col_major, wmma::row_major>;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout> fb;
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, ldb);
    wmma::mma_sync(c, fa, fb, c);
  }
  __device__ __forceinline__ void load(const float* p, int ld) {
    nvcuda::wmma::load_matrix_sync(c, p, ld, nvcuda::wmma::mem_row_major);
  }
  __device__ __forceinline__ void store(float* p, int ld) const {
    nvcuda::wmma::store_matrix_sync(p, c, ld, nvcuda::wmma::mem_row_major);
  }
};

// f32/f64: plain FMAs in the storage type; lane l owns row l / 2, columns 8 (l % 2) .. + 8.
template <class T>
struct WarpTile<T, false> {
  using A = Acc<T>;
  A c[8];
  __device__ __forceinline__ int row() const { return static_cast<int>(threadIdx.x & 31) >> 1; }
  __device__ __forceinline__ int col0() const { return (static_cast<int>(threadIdx.x) & 1) * 8; }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j] = A(0);
  }
  template <bool kBT>
  __device__ __forceinline__ void mma(const T* a, int lda, const T* b, int ldb) {
    const int r = row(), c0 = col0();
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const A av = to_acc<T>(a[r * lda + k]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const A bv = kBT ? to_acc<T>(b[(c0 + j) * ldb + k]) : to_acc<T>(b[k * ldb + c0 + j]);
        c[j] = fma(av, bv, c[j]);
      }
    }
  }
  __device__ __forceinline__ void load(const A* p, int ld) {
    const int r = row(), c0 = col0();
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j] = p[r * ld + c0 + j];
  }
  __device__ __forceinline__ void store(A* p, int ld) const {
    const int r = row(), c0 = col0();
#pragma unroll
    for (int j = 0; j < 8; ++j) p[r * ld + c0 + j] = c[j];
  }
};

// ---- shared-memory layout.

// Row padding (elements) of shared tiles: 16 bytes, which keeps WMMA's alignment rules and
// shifts consecutive rows across banks.
template <class E>
constexpr int kPad = static_cast<int>(16 / sizeof(E));

// Carves 128-byte aligned arrays out of dynamic shared memory; the same code computes the
// byte size on the host (base == nullptr).
class SmemCarver {
 public:
  __host__ __device__ explicit SmemCarver(unsigned char* base) : base_(base) {}
  template <class E>
  __host__ __device__ E* take(int64_t count) {
    off_ = (off_ + 127) / 128 * 128;
    E* p = base_ != nullptr ? reinterpret_cast<E*>(base_ + off_) : nullptr;
    off_ += count * static_cast<int64_t>(sizeof(E));
    return p;
  }
  __host__ __device__ int64_t nbytes() const { return off_; }

 private:
  unsigned char* base_;
  int64_t off_ = 0;
};

// Copies rows [row0, row0 + kRows) x columns [0, kDP) of one (T, D) head slice `src` (row
// stride `st` elements, columns contiguous) into tile[r * kLD + c]; rows >= nrows and columns
// >= D become zero. With `vec`, 16-byte loads: the caller guarantees that src, st and D are
// multiples of 16 bytes / elements of 16 bytes. All threads of the block call it.
template <class T, int kRows, int kDP, int kLD>
__device__ __forceinline__ void load_tile(T* tile, const T* src, int64_t st, int64_t row0, int64_t nrows,
                                          int64_t D, bool vec) {
  const int nthreads = static_cast<int>(blockDim.x);
  if (vec) {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    static_assert(kDP % kVec == 0 && kLD % kVec == 0, "tile rows must hold whole 16-byte chunks");
    constexpr int kChunks = kRows * (kDP / kVec);
    for (int idx = static_cast<int>(threadIdx.x); idx < kChunks; idx += nthreads) {
      const int r = idx / (kDP / kVec), c = (idx % (kDP / kVec)) * kVec;
      const int64_t row = row0 + r;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (row < nrows && c < D) val = *reinterpret_cast<const uint4*>(src + row * st + c);
      *reinterpret_cast<uint4*>(tile + r * kLD + c) = val;
    }
  } else {
    constexpr int kElems = kRows * kDP;
    for (int idx = static_cast<int>(threadIdx.x); idx < kElems; idx += nthreads) {
      const int r = idx / kDP, c = idx % kDP;
      const int64_t row = row0 + r;
      T val = from_acc<T>(Acc<T>(0));
      if (row < nrows && c < D) val = src[row * st + c];
      tile[r * kLD + c] = val;
    }
  }
}

// valid[r] = 1 iff key row0 + r exists (< Tk) and is not padding-masked, for r < kRows.
template <int kRows>
__device__ __forceinline__ void load_key_valid(uint8_t* valid, const Args& a, int64_t b, int64_t row0) {
  for (int r = static_cast<int>(threadIdx.x); r < kRows; r += static_cast<int>(blockDim.x)) {
    const int64_t j = row0 + r;
    bool ok = j < a.Tk;
    if (ok && a.mask != nullptr) ok = a.mask[b * a.Tk + j] == 0;
    valid[r] = ok ? 1 : 0;
  }
}

// Writes the warp tile `t` (rows row0 + 0..15 of the warp, columns col0 + 0..15) times `mul`
// into dst[row * st + col] for row < nrows and col < D, staging it through `stage` (16 x >=16
// Acc, ld `ldst`, private to the warp).
template <class T>
__device__ __forceinline__ void write_tile(const WarpTile<T>& t, Acc<T>* stage, int ldst, Acc<T> mul, T* dst,
                                           int64_t st, int64_t row0, int64_t nrows, int col0, int64_t D) {
  __syncwarp();
  t.store(stage, ldst);
  __syncwarp();
  const int lane = static_cast<int>(threadIdx.x & 31), r = lane >> 1, c0 = (lane & 1) * 8;
  const int64_t row = row0 + r;
  if (row < nrows) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t col = col0 + c0 + j;
      if (col < D) dst[row * st + col] = from_acc<T>(stage[r * ldst + c0 + j] * mul);
    }
  }
  __syncwarp();
}

}  // namespace mf::cuda::attn
