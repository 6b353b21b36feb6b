// Compiled with -mavx2 -mfma (sdk/fused/BUILD.bazel) and reached only through
// linear_variant(Isa::kAvx2) / activate_variant(), after the CPU reported AVX2 and FMA.
#include <immintrin.h>

#include <cstdint>

#include "sdk/fused/gemm.h"

namespace tdp::fused::internal::avx2 {

// 8 floats; 6 rows by 2 vectors (16 columns): 12 accumulators, 2 weight vectors and a broadcast
// in the 16 registers.
struct S {
  using V = __m256;
  using I = __m256i;
  static constexpr int W = 8;
  static constexpr int MR = 6;
  static constexpr int NC = 2;
  static __m256i first(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_n(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, V v, int n) { _mm256_maskstore_ps(p, first(n), v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // A division: the 12-bit estimate plus one Newton step is an ulp off (1 / 1 gives 0.99999994).
  static V recip(V d) { return _mm256_div_ps(_mm256_set1_ps(1.0f), d); }
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
};

}  // namespace tdp::fused::internal::avx2

#define TDP_GEMM_NAMESPACE avx2
#include "sdk/fused/gemm_kernel.h"

namespace tdp::fused::internal {

void linear_avx2(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y,
                 Activation activation) {
  avx2::linear<avx2::S>(x, rows, in, wt, bias, out, y, activation);
}

void activate_avx2(Activation activation, float* x, int64_t n) { avx2::activate<avx2::S>(activation, x, n); }

}  // namespace tdp::fused::internal
