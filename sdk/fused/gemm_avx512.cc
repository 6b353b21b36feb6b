// Compiled with -mavx512f -mfma (sdk/fused/BUILD.bazel) and reached only through gemm.h's
// *_variant(Isa::kAvx512) functions, after the CPU reported AVX-512F: the Linear micro-kernels and
// activations (gemm_kernel.h) and the heads' random draws (random_kernel.h).
#include <immintrin.h>

#include <cstdint>

#include "sdk/fused/gemm.h"

namespace tdp::fused::internal::avx512 {

// 16 floats; 6 rows by 4 vectors (64 columns): 24 accumulators, 4 weight vectors and a
// broadcast in the 32 registers. One row: the same 4 vectors, 16 accumulator chains.
struct S {
  using V = __m512;
  using I = __m512i;
  static constexpr int W = 16;
  static constexpr int MR = 6;
  static constexpr int NC = 4;
  static constexpr int NC1 = 4;
  static constexpr int CHAINS1 = 16;
  static __mmask16 first(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, V v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // The 14-bit estimate and one Newton step, r + r * (1 - d * r): about 2^-28 relative before
  // rounding, a fraction of a division's cost.
  static V recip(V d) {
    const V r = _mm512_rcp14_ps(d);
    return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
  }
  static float recip1(float d) {
    const __m128 v = _mm_set_ss(d);
    const __m128 r = _mm_rcp14_ss(v, v);
    return _mm_cvtss_f32(_mm_fmadd_ss(r, _mm_fnmadd_ss(v, r, _mm_set_ss(1.0f)), r));
  }
  // A 16-lane division costs several times the estimate, its Newton step and a multiply.
  static V ratio(V a, V b) { return _mm512_mul_ps(a, recip(b)); }
  static float ratio1(float a, float b) { return a * recip1(b); }
  // MINPS/MAXPS return their second operand when either is NaN.
  static V min_nan(V c, V x) { return _mm512_min_ps(c, x); }
  static V max_nan(V c, V x) { return _mm512_max_ps(c, x); }
  static V abs(V x) { return _mm512_abs_ps(x); }
  static V or_sign(V a, V x) {
    const I sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), sign));
  }
  static V select_lt(V a, V b, V t, V f) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t); }
  // VSCALEFPS: 1 * 2^n in one instruction where the exponent's bits take three; the same values
  // for the integral n in [-126, 128] the callers give (2^128 is +inf either way).
  static V pow2i(V n) { return _mm512_scalef_ps(_mm512_set1_ps(1.0f), n); }
  static I load_idx(const int32_t* p) { return _mm512_loadu_si512(p); }
  static V permute(V v, I idx) { return _mm512_permutexvar_ps(idx, v); }
  static V unpack_lo(V v) { return _mm512_unpacklo_ps(v, v); }
  static V unpack_hi(V v) { return _mm512_unpackhi_ps(v, v); }
  static V even_chunks(V a, V b) { return _mm512_shuffle_f32x4(a, b, 0x88); }
  static V odd_chunks(V a, V b) { return _mm512_shuffle_f32x4(a, b, 0xDD); }
  static V sqrt(V x) { return _mm512_sqrt_ps(x); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static I set1_i(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  static I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I and_i(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_i(I a, I b) { return _mm512_or_si512(a, b); }
  static I xor_i(I a, I b) { return _mm512_xor_si512(a, b); }
  template <int N>
  static I srli_i(I a) {
    return _mm512_srli_epi32(a, N);
  }
  template <int N>
  static I slli_i(I a) {
    return _mm512_slli_epi32(a, N);
  }
  static V to_float(I a) { return _mm512_cvtepi32_ps(a); }
  static I to_int(V a) { return _mm512_cvttps_epi32(a); }
  static I bits(V a) { return _mm512_castps_si512(a); }
  static V from_bits(I a) { return _mm512_castsi512_ps(a); }
  static V select_i(I mask, V t, V f) { return _mm512_mask_blend_ps(_mm512_test_epi32_mask(mask, mask), f, t); }
  // The 64-bit products of the even lanes and of the odd ones (shifted down), interleaved back.
  static void mulhilo(I a, uint32_t m, I& hi, I& lo) {
    const I mm = set1_i(m);
    const I even = _mm512_mul_epu32(a, mm);
    const I odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), mm);
    hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
    lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  }
};

}  // namespace tdp::fused::internal::avx512

#define TDP_GEMM_NAMESPACE avx512
#include "sdk/fused/gemm_kernel.h"
#include "sdk/fused/random_kernel.h"

namespace tdp::fused::internal {

void linear_avx512(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                   float* y, Activation activation) {
  avx512::linear<avx512::S>(x, rows, in, wt, bias, out, y, activation);
}

void activate_avx512(Activation activation, float* x, int64_t n) { avx512::activate<avx512::S>(activation, x, n); }

void philox_normals_avx512(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0,
                           int64_t d, float* out) {
  avx512::philox_normals<avx512::S>(seed, call, first_row, rows, block0, d, out);
}

void philox_uniforms_avx512(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block,
                            float* out) {
  avx512::philox_uniforms<avx512::S>(seed, call, first_row, rows, block, out);
}

void gaussian_draw_avx512(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                          float* sample, float* log_prob) {
  avx512::gaussian_draw<avx512::S>(g, loc, scale, eps, n, sample, log_prob);
}

void log_softmax_avx512(const float* x, int64_t rows, int64_t d, float* log_p, float* mass) {
  avx512::log_softmax<avx512::S>(x, rows, d, log_p, mass);
}

}  // namespace tdp::fused::internal
