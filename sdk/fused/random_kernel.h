// Internal to sdk/fused: the heads' random draws on the vector units, one lane per row,
// written once over gemm_kernel.h's vector traits S and compiled per instruction set beside the
// Linear micro-kernels (gemm_avx512.cc and gemm_avx2.cc include it after gemm_kernel.h, inside the
// same per-ISA namespace). Each function mirrors its scalar twin in kernels.cc operation for
// operation (math.h's fast_log, fast_sincos_2pi, fast_exp, fast_log1p and fast_tanh), so every
// variant draws the same normals to within the rounding of a fused multiply-add (and the same
// uniforms exactly).
//
// Beyond gemm_kernel.h's list, S provides: sqrt, recip1 and ratio1 (recip and ratio on one
// float, the same instructions), and the int32 lane operations xor_i, to_int (truncate),
// select_i (a mask's lanes from t, the others from f) and mulhilo (the high and low 32 bits of
// each lane times a 32-bit constant).
#include <immintrin.h>

#include <cstdint>

#include "sdk/fused/kernels.h"
#include "sdk/fused/philox.h"

#ifndef TDP_GEMM_NAMESPACE
#error "include random_kernel.h after gemm_kernel.h, in a file that defines TDP_GEMM_NAMESPACE"
#endif

namespace tdp::fused::internal::TDP_GEMM_NAMESPACE {

// sin and cos of 2 pi u for u in [0, 1), as math.h's fast_sincos_2pi.
template <class S>
inline void vsincos_2pi(typename S::V u, typename S::V& sin_out, typename S::V& cos_out) {
  using V = typename S::V;
  using I = typename S::I;
  const V shifter = S::set1(12582912.0f);
  const V q = S::sub(S::fma(u, S::set1(4.0f), shifter), shifter);
  const V t = S::mul(S::fma(q, S::set1(-0.25f), u), S::set1(6.283185307179586f));
  const V z = S::mul(t, t);
  V s = S::set1(-1.9515295891E-4f);
  s = S::fma(s, z, S::set1(8.3321608736E-3f));
  s = S::fma(s, z, S::set1(-1.6666654611E-1f));
  s = S::fma(S::mul(s, z), t, t);
  V c = S::set1(2.443315711809948E-5f);
  c = S::fma(c, z, S::set1(-1.388731625493765E-3f));
  c = S::fma(c, z, S::set1(4.166664568298827E-2f));
  c = S::fma(S::mul(c, z), z, S::fma(S::set1(-0.5f), z, S::set1(1.0f)));
  const I k = S::to_int(q);
  const I odd = S::and_i(k, S::set1_i(1));
  const I sin_sign = S::template slli_i<30>(S::and_i(k, S::set1_i(2)));
  const I cos_sign = S::template slli_i<30>(S::and_i(S::add_i(k, S::set1_i(1)), S::set1_i(2)));
  const V sw = S::select_i(odd, c, s);
  const V cw = S::select_i(odd, s, c);
  sin_out = S::from_bits(S::xor_i(S::bits(sw), sin_sign));
  cos_out = S::from_bits(S::xor_i(S::bits(cw), cos_sign));
}

// One lane of S in scalar code: the same operations in the same order on one float, so a value
// computed alone (a batch of one, a short tail) has the same bits as in a full vector. Exact
// because every operation either rounds correctly in both forms (add, mul, div, sqrt, fma: the
// files build with -ffp-contract=off, so no multiply-add is fused that S does not fuse) or is the
// same instruction on one lane (S::recip1 and S::ratio1: AVX-512's reciprocal estimate).
template <class S>
struct Lane {
  using V = float;
  using I = uint32_t;
  static constexpr int W = 1;
  static V zero() { return 0.0f; }
  static V set1(float f) { return f; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V fma(V a, V b, V c) { return __builtin_fmaf(a, b, c); }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V sqrt(V x) { return __builtin_sqrtf(x); }
  static V recip(V d) { return S::recip1(d); }
  static V ratio(V a, V b) { return S::ratio1(a, b); }
  static V min_nan(V c, V x) { return c < x ? c : x; }
  static V max_nan(V c, V x) { return c > x ? c : x; }
  static V abs(V x) { return from_bits(bits(x) & 0x7fffffffu); }
  static V or_sign(V a, V x) { return from_bits(bits(a) | (bits(x) & 0x80000000u)); }
  static V select_lt(V a, V b, V t, V f) { return a < b ? t : f; }
  static V pow2i(V n) { return from_bits((to_int(n) + 127u) << 23); }
  static I set1_i(uint32_t v) { return v; }
  static I load_idx(const int32_t* p) { return static_cast<uint32_t>(*p); }
  static I add_i(I a, I b) { return a + b; }
  static I sub_i(I a, I b) { return a - b; }
  static I and_i(I a, I b) { return a & b; }
  static I or_i(I a, I b) { return a | b; }
  static I xor_i(I a, I b) { return a ^ b; }
  template <int N>
  static I srli_i(I a) {
    return a >> N;
  }
  template <int N>
  static I slli_i(I a) {
    return a << N;
  }
  static V to_float(I a) { return static_cast<float>(static_cast<int32_t>(a)); }
  // CVTTSS2SI: truncation, and 0x80000000 for NaN or out of range, as the vector conversion.
  static I to_int(V a) { return static_cast<uint32_t>(_mm_cvttss_si32(_mm_set_ss(a))); }
  static I bits(V a) {
    I b;
    __builtin_memcpy(&b, &a, sizeof b);
    return b;
  }
  static V from_bits(I b) {
    V a;
    __builtin_memcpy(&a, &b, sizeof a);
    return a;
  }
  static V select_i(I mask, V t, V f) { return mask != 0 ? t : f; }
  static void mulhilo(I a, uint32_t m, I& hi, I& lo) {
    const uint64_t p = static_cast<uint64_t>(a) * m;
    hi = static_cast<uint32_t>(p >> 32);
    lo = static_cast<uint32_t>(p);
  }
};

// Whether n of W lanes are worth a vector: below a quarter, one lane at a time is faster (a
// vector's latency is its lanes' cost at a batch of one).
template <class S>
inline bool worth_a_vector(int64_t n) {
  return 4 * n >= S::W;
}

// Philox4x32-10 (philox.h) for T::W counters {call low, call high, row_of[l], block_of[l]}: the
// four words of each.
template <class T>
inline void philox_words(uint64_t seed, uint64_t call, const int32_t* row_of, const int32_t* block_of,
                         typename T::I words[4]) {
  using I = typename T::I;
  I c0 = T::set1_i(static_cast<uint32_t>(call));
  I c1 = T::set1_i(static_cast<uint32_t>(call >> 32));
  I c2 = T::load_idx(row_of);
  I c3 = T::load_idx(block_of);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    I hi0, lo0, hi1, lo1;
    T::mulhilo(c0, 0xD2511F53u, hi0, lo0);
    T::mulhilo(c2, 0xCD9E8D57u, hi1, lo1);
    c0 = T::xor_i(T::xor_i(hi1, c1), T::set1_i(k0));
    c1 = lo1;
    c2 = T::xor_i(T::xor_i(hi0, c3), T::set1_i(k1));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  words[0] = c0;
  words[1] = c1;
  words[2] = c2;
  words[3] = c3;
}

// philox.h's uniform01 of each lane's word: its top 24 bits scaled to [0, 1), exact.
template <class T>
inline typename T::V vuniform01(typename T::I word) {
  return T::mul(T::to_float(T::template srli_i<8>(word)), T::set1(1.0f / 16777216.0f));
}

// Box-Muller on the Philox words of T::W counters: normal[k * kStride + l] = the counter's k-th
// normal, k < used.
template <class T, int kStride>
inline void philox_lanes(uint64_t seed, uint64_t call, const int32_t* row_of, const int32_t* block_of, int used,
                         float* normal) {
  using V = typename T::V;
  using I = typename T::I;
  I words[4];
  philox_words<T>(seed, call, row_of, block_of, words);
  for (int pair = 0; 2 * pair < used; ++pair) {
    // uniform01_open0 and uniform01 (philox.h): 24 bits, the first shifted into (0, 1].
    const V u1 = T::mul(T::to_float(T::add_i(T::template srli_i<8>(words[2 * pair]), T::set1_i(1))),
                        T::set1(1.0f / 16777216.0f));
    const V u2 = vuniform01<T>(words[2 * pair + 1]);
    const V radius = T::sqrt(T::mul(T::set1(-2.0f), vlog<T>(u1)));
    V sin_v, cos_v;
    vsincos_2pi<T>(u2, sin_v, cos_v);
    T::store(normal + 2 * pair * kStride, T::mul(radius, cos_v));
    T::store(normal + (2 * pair + 1) * kStride, T::mul(radius, sin_v));
  }
}

// kernels.h's philox_normals: one lane per Philox counter, that is per (row, block of four
// values); the lanes' normals are written to their rows in scalar code. A call of a few counters
// (a batch of one) runs them one by one on Lane (the same bits), without the vector loop's
// set-up; a large call's short tail takes a vector all the same.
template <class S>
void philox_normals(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0, int64_t d,
                    float* out) {
  constexpr int W = S::W;
  const int64_t blocks = (d + 3) / 4;
  const int64_t counters = rows * blocks;
  const int used = d < 4 ? static_cast<int>(d) : 4;  // the normals of a block anyone reads
  // The normals of counter (row, block) from lane l of normal[k * stride + l].
  auto write = [&](int64_t row, int64_t block, const float* normal, int stride, int l) {
    const int64_t j0 = 4 * block;
    float* to = out + row * d + j0;
    for (int k = 0; k < used && j0 + k < d; ++k) to[k] = normal[k * stride + l];
  };
  auto row_of = [&](int64_t row) {
    return static_cast<int32_t>(static_cast<uint32_t>(first_row + static_cast<uint64_t>(row)));
  };
  auto block_of = [&](int64_t block) { return static_cast<int32_t>(block0 + static_cast<uint32_t>(block)); };
  if (!worth_a_vector<S>(counters)) {
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t block = 0; block < blocks; ++block) {
        const int32_t r = row_of(row), b = block_of(block);
        float normal[4];
        philox_lanes<Lane<S>, 1>(seed, call, &r, &b, used, normal);
        write(row, block, normal, 1, 0);
      }
    }
    return;
  }
  int64_t row = 0, block = 0;  // the next counter's
  for (int64_t c = 0; c < counters; c += W) {
    const int n = counters - c < W ? static_cast<int>(counters - c) : W;
    int64_t local_row[W], local_block[W];
    int32_t rows_of[W] = {}, blocks_of[W] = {};  // lanes past the last counter draw for row 0
    for (int l = 0; l < n; ++l) {
      local_row[l] = row;
      local_block[l] = block;
      rows_of[l] = row_of(row);
      blocks_of[l] = block_of(block);
      if (++block == blocks) block = 0, ++row;
    }
    float normal[4 * W];
    philox_lanes<S, W>(seed, call, rows_of, blocks_of, used, normal);
    for (int l = 0; l < n; ++l) write(local_row[l], local_block[l], normal, W, l);
  }
}

// uniform01 of word 0 of T::W counters {call, row_of[l], block_of[l]}.
template <class T>
inline void uniform_lanes(uint64_t seed, uint64_t call, const int32_t* row_of, const int32_t* block_of, float* u) {
  typename T::I words[4];
  philox_words<T>(seed, call, row_of, block_of, words);
  T::store(u, vuniform01<T>(words[0]));
}

// kernels.h's philox_uniforms: one lane per row; integer work and an exact conversion, so every
// variant gives the same bits. A call of a few rows (a batch of one) goes through philox.h's
// generator row by row, which gives those bits too, without the vector loop's set-up; a large
// call's short tail takes a vector all the same.
template <class S>
void philox_uniforms(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block, float* out) {
  constexpr int W = S::W;
  if (!worth_a_vector<S>(rows)) {
    const Philox4x32 rng(seed);
    for (int64_t r = 0; r < rows; ++r) out[r] = uniform01(rng(philox_counter(call, first_row + r, block))[0]);
    return;
  }
  int32_t blocks[W];
  for (int l = 0; l < W; ++l) blocks[l] = static_cast<int32_t>(block);
  for (int64_t r0 = 0; r0 < rows; r0 += W) {
    const int n = rows - r0 < W ? static_cast<int>(rows - r0) : W;
    int32_t row_of[W] = {};
    for (int l = 0; l < n; ++l) {
      row_of[l] = static_cast<int32_t>(static_cast<uint32_t>(first_row + static_cast<uint64_t>(r0 + l)));
    }
    float u[W];
    uniform_lanes<S>(seed, call, row_of, blocks, u);
    for (int l = 0; l < n; ++l) out[r0 + l] = u[l];
  }
}

// kernels.h's gaussian_draw for the T::W values at loc, scale and eps.
template <class T>
inline void gaussian_lanes(const GaussianDraw& g, const float* loc, const float* scale, const float* eps,
                           float* sample, float* log_prob) {
  using V = typename T::V;
  const float lim = 1.0f - 1e-6f;
  const V l = T::load(loc), s = T::load(scale);
  const V x = T::fma(T::load(eps), s, l);
  V y = x;
  if (g.tanh) {
    y = vtanh<T>(x);
    if (g.safe_tanh) y = T::max_nan(T::set1(-lim), T::min_nan(T::set1(lim), y));
    y = T::fma(y, T::set1(g.half), T::set1(g.shift));
  }
  T::store(sample, y);
  if (log_prob == nullptr) return;
  const V diff = T::div(T::sub(x, l), s);
  V value = T::sub(T::fma(T::set1(-0.5f), T::mul(diff, diff), T::set1(-0.91893853320467274178f)), vlog<T>(s));
  if (g.tanh) {
    // log |d tanh(x) / dx| = 2 (log 2 - x - softplus(-2x)), plus log |half| for the bounds.
    const V t = T::mul(T::set1(-2.0f), x);
    const V softplus = vsoftplus<T>(t);
    const V jacobian = T::mul(T::set1(2.0f), T::sub(T::sub(T::set1(0.69314718055994530942f), x), softplus));
    value = T::sub(value, T::add(jacobian, T::set1(g.log_half)));
  }
  T::store(log_prob, value);
}

// kernels.h's gaussian_draw over n values: full vectors, then the rest as one padded vector or
// one value at a time.
template <class S>
void gaussian_draw(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                   float* sample, float* log_prob) {
  constexpr int W = S::W;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    gaussian_lanes<S>(g, loc + i, scale + i, eps + i, sample + i, log_prob != nullptr ? log_prob + i : nullptr);
  }
  const int m = static_cast<int>(n - i);
  if (m == 0) return;
  if (!worth_a_vector<S>(m)) {
    for (; i < n; ++i) {
      gaussian_lanes<Lane<S>>(g, loc + i, scale + i, eps + i, sample + i,
                              log_prob != nullptr ? log_prob + i : nullptr);
    }
    return;
  }
  // Padded with loc 0, scale 1, eps 0: no lane divides by zero.
  float pad[5][W];
  S::store(pad[0], S::zero());
  S::store(pad[1], S::set1(1.0f));
  S::store(pad[2], S::zero());
  for (int k = 0; k < m; ++k) {
    pad[0][k] = loc[i + k];
    pad[1][k] = scale[i + k];
    pad[2][k] = eps[i + k];
  }
  gaussian_lanes<S>(g, pad[0], pad[1], pad[2], pad[3], log_prob != nullptr ? pad[4] : nullptr);
  for (int k = 0; k < m; ++k) {
    sample[i + k] = pad[3][k];
    if (log_prob != nullptr) log_prob[i + k] = pad[4][k];
  }
}

// A class's mass exp(x - max), 0 below float's normal range (vexp's floor; an -inf logit's).
struct ShiftedExp {
  template <class T>
  static typename T::V apply(typename T::V v) {
    return T::select_lt(v, T::set1(kExpMin), T::zero(), vexp<T>(v));
  }
};

struct Log {
  template <class T>
  static typename T::V apply(typename T::V v) {
    return vlog<T>(v);
  }
};

// F over n floats in place: whole vectors, then the tail as one masked vector (its idle lanes
// are never stored), or lane by lane where that costs less; a value's bits do not depend on its
// lane.
template <class S, class F>
inline void in_place(float* x, int64_t n) {
  constexpr int W = S::W;
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(x + i, F::template apply<S>(S::load(x + i)));
  const int m = static_cast<int>(n - i);
  if (m == 0) return;
  if (!worth_a_vector<S>(m)) {
    for (; i < n; ++i) x[i] = F::template apply<Lane<S>>(x[i]);
    return;
  }
  S::store_n(x + i, F::template apply<S>(S::load_n(x + i, m)), m);
}

// kernels.h's log_softmax: a row's maximum and sum in scalar code (its few values), the exps and
// the logs of the sums on the vector units, 64 rows at a time. kD > 0 fixes d at compile time (the
// common small ones: their per-row loops unrolled); 0 reads it from `d_given`.
template <class S, int kD>
void log_softmax_rows(const float* x, int64_t rows, int64_t d_given, float* log_p, float* mass) {
  const int64_t d = kD > 0 ? kD : d_given;
  if (kD > 0 && rows == 1) {
    // A batch of one: the row in registers on Lane (the same bits as below), where the loop below
    // would store its few values and read them back as a vector.
    float m = x[0];
    for (int64_t k = 1; k < kD; ++k) m = m < x[k] ? x[k] : m;
    double t = 0;
    for (int64_t k = 0; k < kD; ++k) t += mass[k] = ShiftedExp::template apply<Lane<S>>(x[k] - m);
    const float total = static_cast<float>(t);
    const float lse = total != total ? total : m + Log::template apply<Lane<S>>(total);
    for (int64_t k = 0; k < kD; ++k) log_p[k] = x[k] - lse;
    return;
  }
  constexpr int64_t kRows = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t n = rows - r0 < kRows ? rows - r0 : kRows;
    const float* xs = x + r0 * d;
    float* ms = mass + r0 * d;
    float top[kRows], total[kRows], log_total[kRows];
    for (int64_t r = 0; r < n; ++r) {
      float m = xs[r * d];
      for (int64_t k = 1; k < d; ++k) m = m < xs[r * d + k] ? xs[r * d + k] : m;  // std::max's NaN rule
      top[r] = m;
      for (int64_t k = 0; k < d; ++k) ms[r * d + k] = xs[r * d + k] - m;
    }
    in_place<S, ShiftedExp>(ms, n * d);
    for (int64_t r = 0; r < n; ++r) {
      double t = 0;
      for (int64_t k = 0; k < d; ++k) t += ms[r * d + k];
      total[r] = log_total[r] = static_cast<float>(t);
    }
    in_place<S, Log>(log_total, n);
    for (int64_t r = 0; r < n; ++r) {
      // vlog takes finite positive values: a NaN sum (a NaN logit) makes the row NaN here.
      const float lse = total[r] != total[r] ? total[r] : top[r] + log_total[r];
      for (int64_t k = 0; k < d; ++k) log_p[(r0 + r) * d + k] = xs[r * d + k] - lse;
    }
  }
}

template <class S>
void log_softmax(const float* x, int64_t rows, int64_t d, float* log_p, float* mass) {
  switch (d) {
    case 2: return log_softmax_rows<S, 2>(x, rows, d, log_p, mass);
    case 3: return log_softmax_rows<S, 3>(x, rows, d, log_p, mass);
    case 4: return log_softmax_rows<S, 4>(x, rows, d, log_p, mass);
    default: return log_softmax_rows<S, 0>(x, rows, d, log_p, mass);
  }
}

}  // namespace tdp::fused::internal::TDP_GEMM_NAMESPACE
