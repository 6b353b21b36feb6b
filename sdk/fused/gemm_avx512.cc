// Compiled with -mavx512f -mfma (sdk/fused/BUILD.bazel) and reached only through
// linear_variant(Isa::kAvx512) / activate_variant(), after the CPU reported AVX-512F.
#include <immintrin.h>

#include <cstdint>

#include "sdk/fused/gemm.h"

namespace tdp::fused::internal::avx512 {

// 16 floats; 6 rows by 4 vectors (64 columns): 24 accumulators, 4 weight vectors and a
// broadcast in the 32 registers.
struct S {
  using V = __m512;
  using I = __m512i;
  static constexpr int W = 16;
  static constexpr int MR = 6;
  static constexpr int NC = 4;
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
  // MINPS/MAXPS return their second operand when either is NaN.
  static V min_nan(V c, V x) { return _mm512_min_ps(c, x); }
  static V max_nan(V c, V x) { return _mm512_max_ps(c, x); }
  static V abs(V x) { return _mm512_abs_ps(x); }
  static V or_sign(V a, V x) {
    const I sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), sign));
  }
  static V select_lt(V a, V b, V t, V f) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t); }
  static V pow2i(V n) {
    const I e = _mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static I load_idx(const int32_t* p) { return _mm512_loadu_si512(p); }
  static V permute(V v, I idx) { return _mm512_permutexvar_ps(idx, v); }
};

}  // namespace tdp::fused::internal::avx512

#define TDP_GEMM_NAMESPACE avx512
#include "sdk/fused/gemm_kernel.h"

namespace tdp::fused::internal {

void linear_avx512(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                   float* y, Activation activation) {
  avx512::linear<avx512::S>(x, rows, in, wt, bias, out, y, activation);
}

void activate_avx512(Activation activation, float* x, int64_t n) { avx512::activate<avx512::S>(activation, x, n); }

}  // namespace tdp::fused::internal
