// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator. The value drawn for an
// element depends only on (seed, stream, element offset in the logical tensor), so a tensor
// computed whole or in pieces on many ranks draws identical numbers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

// Functions callable from CUDA kernels too (random.cu draws the same numbers on the GPU).
#if defined(__CUDACC__)
#define MF_HOST_DEVICE __host__ __device__
#else
#define MF_HOST_DEVICE
#endif

namespace mf {

struct Philox4x32 {
  uint32_t v[4];
};

MF_HOST_DEVICE inline Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                              uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// The 4 words of block `block` of stream `stream` under `seed`.
MF_HOST_DEVICE inline Philox4x32 philox_block(uint64_t seed, uint64_t stream, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                       static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

#if !defined(__CUDACC__)  // host only (OpenMP SIMD loops); device code uses philox_block
// Philox4x32-10 of kN consecutive blocks [first, first + kN) of one (seed, stream), written in
// element order: words[4 * j + lane] is lane `lane` of block first + j, the word of logical
// element 4 * (first + j) + lane. The same numbers as philox_block, in a form the compiler
// vectorises (32x32->64 multiplies across blocks).
template <int kN>
inline void philox_blocks(uint64_t seed, uint64_t stream, uint64_t first, uint32_t* words) {
#if defined(__AVX512F__)
  if constexpr (kN % 16 == 0) {
    // 16 blocks per 512-bit register: the multiplies of the even blocks' and the odd blocks'
    // counters (vpmuludq takes the low 32 bits of each 64-bit lane), their halves blended back.
    const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    constexpr __mmask16 kOdd = 0xAAAA;
    for (int g = 0; g < kN; g += 16) {
      const uint64_t b0 = first + static_cast<uint64_t>(g);
      // Block b0 + j: its low word b0 + j (wrapping into the high word at 2^32).
      const __m512i low = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0)));
      const __m512i high = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0 >> 32)));
      __m512i c0 = _mm512_add_epi32(low, lane);
      __m512i c1 = _mm512_mask_add_epi32(high, _mm512_cmplt_epu32_mask(c0, low), high, _mm512_set1_epi32(1));
      __m512i c2 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(stream)));
      __m512i c3 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(stream >> 32)));
      uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
      for (int r = 0; r < 10; ++r) {
        // p = M x c for every block: even blocks' products in the even 64-bit lanes of pe, odd in po.
        const __m512i p0e = _mm512_mul_epu32(c0, m0), p0o = _mm512_mul_epu32(_mm512_srli_epi64(c0, 32), m0);
        const __m512i p1e = _mm512_mul_epu32(c2, m1), p1o = _mm512_mul_epu32(_mm512_srli_epi64(c2, 32), m1);
        // High and low 32-bit halves, each back in its block's 32-bit lane.
        const __m512i hi0 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(p0e, 32), p0o);
        const __m512i lo0 = _mm512_mask_blend_epi32(kOdd, p0e, _mm512_slli_epi64(p0o, 32));
        const __m512i hi1 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(p1e, 32), p1o);
        const __m512i lo1 = _mm512_mask_blend_epi32(kOdd, p1e, _mm512_slli_epi64(p1o, 32));
        const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
        const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
        c1 = lo1;
        c3 = lo0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
      // Element order: words[4 j + w] = word w of block j (a 4 x 16 transpose).
      const __m512i a01l = _mm512_unpacklo_epi32(c0, c1), a01h = _mm512_unpackhi_epi32(c0, c1);
      const __m512i a23l = _mm512_unpacklo_epi32(c2, c3), a23h = _mm512_unpackhi_epi32(c2, c3);
      // Per 128-bit lane q: blocks 4q..4q+3, each as (w0, w1, w2, w3).
      const __m512i b0v = _mm512_unpacklo_epi64(a01l, a23l), b1v = _mm512_unpackhi_epi64(a01l, a23l);
      const __m512i b2v = _mm512_unpacklo_epi64(a01h, a23h), b3v = _mm512_unpackhi_epi64(a01h, a23h);
      // b0v lane q: block 4q; b1v: 4q + 1; b2v: 4q + 2; b3v: 4q + 3. Gather each output register
      // (4 consecutive blocks) from lane q of the four.
      const __m512i t0 = _mm512_shuffle_i32x4(b0v, b1v, 0x44), t1 = _mm512_shuffle_i32x4(b2v, b3v, 0x44);
      const __m512i t2 = _mm512_shuffle_i32x4(b0v, b1v, 0xEE), t3 = _mm512_shuffle_i32x4(b2v, b3v, 0xEE);
      uint32_t* out = words + 4 * g;
      _mm512_storeu_si512(out + 0, _mm512_shuffle_i32x4(t0, t1, 0x88));
      _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(t0, t1, 0xDD));
      _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(t2, t3, 0x88));
      _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(t2, t3, 0xDD));
    }
    return;
  }
#endif
  uint32_t c0[kN], c1[kN], c2[kN], c3[kN];
#pragma omp simd
  for (int j = 0; j < kN; ++j) {
    uint64_t b = first + static_cast<uint64_t>(j);
    c0[j] = static_cast<uint32_t>(b);
    c1[j] = static_cast<uint32_t>(b >> 32);
    c2[j] = static_cast<uint32_t>(stream);
    c3[j] = static_cast<uint32_t>(stream >> 32);
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
#pragma omp simd
    for (int j = 0; j < kN; ++j) {
      uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0[j];
      uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2[j];
      uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
      uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = static_cast<uint32_t>(p1);
      c3[j] = static_cast<uint32_t>(p0);
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int j = 0; j < kN; ++j) {
    words[4 * j + 0] = c0[j];
    words[4 * j + 1] = c1[j];
    words[4 * j + 2] = c2[j];
    words[4 * j + 3] = c3[j];
  }
}

// Calls f(e, word) for e in [0, n): the 32-bit word of logical element base + e (lane
// (base + e) & 3 of block (base + e) >> 2), the blocks drawn 16 at a time by philox_blocks and
// f applied in a SIMD loop (f must treat each e on its own).
template <class F>
inline void philox_for_each_word(uint64_t seed, uint64_t stream, uint64_t base, int64_t n, F&& f) {
  constexpr int kBlocks = 16;
  alignas(64) uint32_t words[4 * kBlocks];
  // A local copy: its captures stay in registers (through a reference the compiler reloads them
  // after every store and the loop below runs scalar).
  std::decay_t<F> fn(f);
  for (int64_t e0 = 0; e0 < n;) {
    const uint64_t idx = base + static_cast<uint64_t>(e0), first = idx >> 2;
    philox_blocks<kBlocks>(seed, stream, first, words);
    const auto o = static_cast<int64_t>(idx - first * 4);  // words[o]: logical element idx
    const int64_t m = std::min<int64_t>(4 * kBlocks - o, n - e0);
    const uint32_t* w = words + o;
#pragma omp simd
    for (int64_t e = 0; e < m; ++e) fn(e0 + e, w[e]);
    e0 += m;
  }
}
#endif

// Uniform in [0, 1) with 24 random bits for logical element `index`.
MF_HOST_DEVICE inline float philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  Philox4x32 r = philox_block(seed, stream, index >> 2);
  return static_cast<float>(r.v[index & 3] >> 8) * (1.0f / 16777216.0f);
}

// Standard normal for logical element `index` (Box-Muller on two words of one block).
MF_HOST_DEVICE inline double philox_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  Philox4x32 r = philox_block(seed, stream, index >> 1);
  uint32_t a = r.v[(index & 1) * 2], b = r.v[(index & 1) * 2 + 1];
  double u1 = (static_cast<double>(a) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
  double u2 = static_cast<double>(b) * (1.0 / 4294967296.0);
#if defined(__CUDA_ARCH__)
  // CUDA's double sqrt is correctly rounded like the host's; log and cos are within 1-2 ulp of
  // the host's glibc results (equal in almost every case, not guaranteed bit for bit).
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2);
#else
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
#endif
}

}  // namespace mf
