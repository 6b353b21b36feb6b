// Compiled with -mavx2 -mfma (sdk/fused/BUILD.bazel) and reached only through gemm.h's
// *_variant(Isa::kAvx2) functions, after the CPU reported AVX2 and FMA: the Linear micro-kernels and
// activations (gemm_kernel.h) and the heads' random draws (random_kernel.h).
#include <immintrin.h>

#include <cstdint>

#include "sdk/fused/gemm.h"

namespace tdp::fused::internal::avx2 {

// 8 floats; 6 rows by 2 vectors (16 columns): 12 accumulators, 2 weight vectors and a broadcast
// in the 16 registers. One row: 8 vectors (64 columns), 8 accumulators (one chain each) and a
// broadcast, the weights read by the FMAs themselves.
struct S {
  using V = __m256;
  using I = __m256i;
  static constexpr int W = 8;
  static constexpr int MR = 6;
  static constexpr int NC = 2;
  static constexpr int NC1 = 8;
  static constexpr int CHAINS1 = 8;
  static __m256i first(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_n(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  // The first n lanes in pieces of 4, 2 and 1: a masked store (VMASKMOVPS) takes about 22 cycles
  // on AMD's Zen 3, where the narrow layer stores each row's few outputs and the heads their tails.
  static void store_n(float* p, V v, int n) {
    if (n >= W) return store(p, v);
    __m128 part = _mm256_castps256_ps128(v);
    if (n & 4) {
      _mm_storeu_ps(p, part);
      part = _mm256_extractf128_ps(v, 1);
      p += 4;
    }
    if (n & 2) {
      _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
      part = _mm_movehl_ps(part, part);
      p += 2;
    }
    if (n & 1) _mm_store_ss(p, part);
  }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // A division: the 12-bit estimate plus one Newton step is an ulp off (1 / 1 gives 0.99999994).
  static V recip(V d) { return _mm256_div_ps(_mm256_set1_ps(1.0f), d); }
  static float recip1(float d) { return 1.0f / d; }
  // One division, where recip and a multiply would be a division and a multiply.
  static V ratio(V a, V b) { return _mm256_div_ps(a, b); }
  static float ratio1(float a, float b) { return a / b; }
  // MINPS/MAXPS return their second operand when either is NaN.
  static V min_nan(V c, V x) { return _mm256_min_ps(c, x); }
  static V max_nan(V c, V x) { return _mm256_max_ps(c, x); }
  static V abs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
  static V or_sign(V a, V x) { return _mm256_or_ps(a, _mm256_and_ps(x, _mm256_set1_ps(-0.0f))); }
  static V select_lt(V a, V b, V t, V f) { return _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
  static V pow2i(V n) {
    const I e = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static I load_idx(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static V permute(V v, I idx) { return _mm256_permutevar8x32_ps(v, idx); }
  static V unpack_lo(V v) { return _mm256_unpacklo_ps(v, v); }
  static V unpack_hi(V v) { return _mm256_unpackhi_ps(v, v); }
  static V even_chunks(V a, V b) { return _mm256_permute2f128_ps(a, b, 0x20); }
  static V odd_chunks(V a, V b) { return _mm256_permute2f128_ps(a, b, 0x31); }
  static V sqrt(V x) { return _mm256_sqrt_ps(x); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static I set1_i(uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
  static I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub_i(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I and_i(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_i(I a, I b) { return _mm256_or_si256(a, b); }
  static I xor_i(I a, I b) { return _mm256_xor_si256(a, b); }
  template <int N>
  static I srli_i(I a) {
    return _mm256_srli_epi32(a, N);
  }
  template <int N>
  static I slli_i(I a) {
    return _mm256_slli_epi32(a, N);
  }
  static V to_float(I a) { return _mm256_cvtepi32_ps(a); }
  static I to_int(V a) { return _mm256_cvttps_epi32(a); }
  static I bits(V a) { return _mm256_castps_si256(a); }
  static V from_bits(I a) { return _mm256_castsi256_ps(a); }
  static V select_i(I mask, V t, V f) {
    return _mm256_blendv_ps(t, f, _mm256_castsi256_ps(_mm256_cmpeq_epi32(mask, _mm256_setzero_si256())));
  }
  // The 64-bit products of the even lanes and of the odd ones (shifted down), interleaved back.
  static void mulhilo(I a, uint32_t m, I& hi, I& lo) {
    const I mm = set1_i(m);
    const I even = _mm256_mul_epu32(a, mm);
    const I odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), mm);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  }
};

}  // namespace tdp::fused::internal::avx2

#define TDP_GEMM_NAMESPACE avx2
#include "sdk/fused/gemm_kernel.h"
#include "sdk/fused/random_kernel.h"

namespace tdp::fused::internal {

void linear_avx2(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y,
                 Activation activation) {
  avx2::linear<avx2::S>(x, rows, in, wt, bias, out, y, activation);
}

void activate_avx2(Activation activation, float* x, int64_t n) { avx2::activate<avx2::S>(activation, x, n); }

void philox_normals_avx2(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0,
                         int64_t d, float* out) {
  avx2::philox_normals<avx2::S>(seed, call, first_row, rows, block0, d, out);
}

void philox_uniforms_avx2(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block,
                          float* out) {
  avx2::philox_uniforms<avx2::S>(seed, call, first_row, rows, block, out);
}

void gaussian_draw_avx2(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                        float* sample, float* log_prob) {
  avx2::gaussian_draw<avx2::S>(g, loc, scale, eps, n, sample, log_prob);
}

void log_softmax_avx2(const float* x, int64_t rows, int64_t d, float* log_p, float* mass) {
  avx2::log_softmax<avx2::S>(x, rows, d, log_p, mass);
}

}  // namespace tdp::fused::internal
