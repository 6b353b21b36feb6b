// Elementwise math for the fused CPU path: exp, log and tanh as branch-free float code that
// GCC auto-vectorises at -O3 (SSE2 baseline, AVX2 through the kernels' target clones), each
// accurate to about 1e-7 relative (tests/fused: checked against std:: over a dense range).
//
//   float y = tdp::fused::fast_tanh(x);   // |y - std::tanh(x)| <= 1e-6 * |std::tanh(x)|
//
// Cephes-style range reduction plus minimax polynomials (the same scheme as Eigen's and
// Cephes' float versions). No -ffast-math: results are the same on every x86-64 CPU.
#pragma once

#include <cstdint>
#include <cstring>

#include "sdk/fused/kernels.h"

namespace tdp::fused {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Cephes' float reduction for exp: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts; n
// rounded without a branch or a call by adding and subtracting 1.5 * 2^23), and
// e^r - 1 = r + r^2 p(r) from Cephes' polynomial. Sets n; returns e^r - 1. fast_exp builds on
// it (and the micro-kernels' vexp, vectorized).
inline float expm1_reduced(float x, float& n) {
  const float shifter = 12582912.0f;
  n = x * 1.44269504088896341f + shifter;
  n -= shifter;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  // p(r) by Estrin's scheme (three independent pairs, then r^2 twice): a dependent chain of
  // four multiply-adds where Horner's has seven, which is what a batch-1 call waits on.
  const float r2 = r * r;
  const float* c = kExpm1Coefficients;
  const float p01 = c[1] * r + c[0];
  const float p23 = c[3] * r + c[2];
  const float p45 = c[5] * r + c[4];
  const float p = (p45 * r2 + p23) * r2 + p01;
  return p * r2 + r;
}

// 2^n for an integral float n in [-126, 127] (a NaN n gives 2^0: its caller's value is NaN already).
inline float pow2i(float n) {
  const int32_t e = static_cast<int32_t>(n == n ? n : 0.0f) + 127;
  return bits_to_float(static_cast<uint32_t>(e) << 23);
}

// exp(x) for x in [kExpMin, kExpMax], about [-87.34, 88.38] (clamped outside: 0-ish and +huge,
// never inf for finite x); NaN stays NaN (the comparisons are written so that a NaN takes the x
// branch).
inline float fast_exp(float x) {
  x = x > kExpMax ? kExpMax : x;
  x = x < kExpMin ? kExpMin : x;
  float n;
  const float m1 = expm1_reduced(x, n);
  return (m1 + 1.0f) * pow2i(n);
}

// log(x) for finite x > 0 (normal floats); Cephes logf.
inline float fast_log(float x) {
  uint32_t bits = float_to_bits(x);
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xff) - 126;
  float m = bits_to_float((bits & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  // m < sqrt(1/2): use 2m and e - 1, so that m - 1 is in [-0.29, 0.41].
  const bool small = m < 0.707106781186547524f;
  e = small ? e - 1 : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  const float z2 = z * z;
  // The degree-8 polynomial by Estrin's scheme, as the vector kernels' vlog.
  const float* c = kLogCoefficients;
  const float p01 = c[1] * m + c[0];
  const float p23 = c[3] * m + c[2];
  const float p45 = c[5] * m + c[4];
  const float p67 = c[7] * m + c[6];
  const float p47 = (c[8] * z + p67) * z + p45;
  const float p = p47 * z2 + (p23 * z + p01);
  float y = p * m * z;
  const float fe = static_cast<float>(e);
  y += -2.12194440e-4f * fe;
  y += -0.5f * z;
  return m + y + 0.693359375f * fe;
}

// log(1 + x) for x > -1, accurate to about 1e-7 relative however small x is: log(u) scaled by
// x / (u - 1), which cancels the rounding of u = 1 + x (Goldberg's trick). NaN stays NaN.
inline float fast_log1p(float x) {
  const float u = 1.0f + x;
  return u == 1.0f ? x : fast_log(u) * (x / (u - 1.0f));
}

// tanh(x) = expm1(2a) / (expm1(2a) + 2) with the sign of x, a = |x| clamped to 10 (where the
// quotient rounds to 1), where expm1(2a) = 2^n (e^r - 1) + (2^n - 1) has no cancellation near 0:
// within 3 ulp everywhere, and a third fewer operations than an exp-based tanh with a
// polynomial branch near 0 (a tanh MLP spends about half its time in tanh). The vector kernels'
// vtanh (gemm_kernel.h) in scalar code: u = r / 2 = a - n ln 2 / 2, e^r - 1 = 2u + u^2 q(u) with
// kTanhExpm1Coefficients, 2^n from the bits of n + 1.5 * 2^23; without a fused
// multiply-add, ln 2 / 2 in two parts (n times the first is exact). NaN stays NaN, +-inf gives +-1.
inline float fast_tanh(float x) {
  float a = x < 0 ? -x : x;
  a = a > 10.0f ? 10.0f : a;
  const float shifter = 12582912.0f;
  const float n_shifted = a * (2.0f * 1.44269504088896341f) + shifter;
  const float n = n_shifted - shifter;
  const float u = (a - n * (0.5f * 0.693359375f)) - n * (0.5f * -2.12194440e-4f);
  const float u2 = u * u;
  const float* c = kTanhExpm1Coefficients;
  const float q01 = c[1] * u + c[0];
  const float q23 = c[3] * u + c[2];
  const float m1 = u2 * (u2 * (u2 * c[4] + q23) + q01) + (u + u);  // e^r - 1
  const float s = bits_to_float((float_to_bits(n_shifted) + 127u) << 23);  // 2^n
  const float e = s * m1 + (s - 1.0f);  // expm1(2a), in [0, 4.9e8]
  const float t = e / (s * m1 + (s + 1.0f));
  return x < 0 ? -t : t;
}

// sin(2 pi u) and cos(2 pi u) for u in [0, 1), a Box-Muller angle: u = q / 4 + f with q
// rounded to nearest (f in [-1/8, 1/8], exact for the 24-bit uniforms the plan draws), Cephes'
// sinf and cosf polynomials on 2 pi f in [-pi/4, pi/4], then the quarter turns q swap and negate
// them. Within 1e-7 of the exact values (std::cos of the rounded float angle 2 pi u is up to 4e-7
// off); branch-free, so the vector kernels mirror it.
inline void fast_sincos_2pi(float u, float& sin_out, float& cos_out) {
  const float shifter = 12582912.0f;
  const float q = (u * 4.0f + shifter) - shifter;
  const float t = (u - q * 0.25f) * 6.283185307179586f;
  const float z = t * t;
  float s = -1.9515295891E-4f;
  s = s * z + 8.3321608736E-3f;
  s = s * z - 1.6666654611E-1f;
  s = s * z * t + t;
  float c = 2.443315711809948E-5f;
  c = c * z - 1.388731625493765E-3f;
  c = c * z + 4.166664568298827E-2f;
  c = c * z * z - 0.5f * z + 1.0f;
  // Quarter turns: (sin, cos) -> (cos, -sin) -> (-sin, -cos) -> (-cos, sin).
  const uint32_t k = static_cast<uint32_t>(static_cast<int32_t>(q));
  const uint32_t swap = 0u - (k & 1u);
  const uint32_t sb = float_to_bits(s), cb = float_to_bits(c);
  sin_out = bits_to_float(((cb & swap) | (sb & ~swap)) ^ ((k & 2u) << 30));
  cos_out = bits_to_float(((sb & swap) | (cb & ~swap)) ^ (((k + 1u) & 2u) << 30));
}

// 1 / (1 + exp(-x)): the Mlp's sigmoid and the recurrent cells' gates.
inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

}  // namespace tdp::fused
