// Internal to sdk/fused: the register-blocked Linear micro-kernels and the vectorized epilogue
// activations, written once over a vector-traits class S and compiled per instruction set by
// gemm_avx512.cc and gemm_avx2.cc (each with its own -m flags, each including this file inside
// its own anonymous namespace, so no function compiled for AVX-512 can be merged by the linker
// with one the baseline code calls).
//
// S provides: V (the float vector), I (an int32 index vector), W (lanes), MR and NC (the register
// block: MR rows by NC vectors of columns), NC1 and CHAINS1 (a single row's block: NC1 vectors,
// CHAINS1 accumulator chains), and zero, set1, load, load_n (the first n lanes, the
// rest zero, no fault past them), store, store_n, fma (a * b + c), add, sub, mul, recip (1 / d
// within an ulp, exact for 1, NaN for NaN: the epilogue's tanh and sigmoid divide once per
// output, so AVX-512 uses its reciprocal estimate and a Newton step), ratio (a / b as the
// instruction set divides cheapest: a division with AVX2, a * recip(b) with AVX-512), min_nan
// and max_nan (min/max(c, x) that return x when x is NaN), abs, or_sign (a >= 0 with x's sign),
// select_lt (a < b ? t : f), pow2i (2^n for integral n), load_idx, permute (v[idx[l]]), unpack_lo
// and unpack_hi (UNPCKLPS / UNPCKHPS of v with itself: lanes 0, 0, 1, 1 and 2, 2, 3, 3 of each
// 128-bit chunk), even_chunks and odd_chunks (a's even 128-bit chunks then b's, and the odd), div, and
// for vlog's and vtanh's bit work the int32 lane operations set1_i, add_i, sub_i, and_i, or_i,
// srli_i<n>, slli_i<n>, to_float (convert), bits (float -> int32 bits) and from_bits.
//
// Shapes: y[r, o] = act(bias[o] + sum_i x[r, i] * wt[i, o]), x [rows, in], wt [in, out] (the
// plan's pre-transposed weights). Columns in blocks of NC vectors (the last one masked), rows in
// blocks of MR, each block's MR * NC accumulators held in registers over the whole sum: every
// weight vector loaded serves MR rows, every broadcast input NC vectors. Outputs narrower than a
// vector that divide it (1, 2, 4, 8: value heads, CartPole's logits, a Normal's loc and scale)
// vectorize over `in` instead: W / out inputs of a row spread to `out` lanes each, multiplied by
// W contiguous weights, the lanes of one output summed at the end.
#include <algorithm>
#include <cstdint>

#include "sdk/fused/kernels.h"

#ifndef TDP_GEMM_NAMESPACE
#error "define TDP_GEMM_NAMESPACE (one name per instruction set) before including gemm_kernel.h"
#endif

namespace tdp::fused::internal::TDP_GEMM_NAMESPACE {

using tdp::fused::Activation;

// Cephes' float reduction, as math.h's expm1_reduced: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2
// in two parts), and e^r - 1 = r + r^2 p(r) from Cephes' polynomial. Sets n; returns e^r - 1.
template <class S>
inline typename S::V vexpm1_reduced(typename S::V x, typename S::V& n) {
  using V = typename S::V;
  const V shifter = S::set1(12582912.0f);
  n = S::sub(S::fma(x, S::set1(1.44269504088896341f), shifter), shifter);
  V r = S::fma(n, S::set1(-0.693359375f), x);
  r = S::fma(n, S::set1(2.12194440e-4f), r);
  // Estrin's scheme, as expm1_reduced: a chain of four dependent FMAs after r, not seven.
  const V r2 = S::mul(r, r);
  const float* c = kExpm1Coefficients;
  const V p01 = S::fma(S::set1(c[1]), r, S::set1(c[0]));
  const V p23 = S::fma(S::set1(c[3]), r, S::set1(c[2]));
  const V p45 = S::fma(S::set1(c[5]), r, S::set1(c[4]));
  const V p = S::fma(S::fma(p45, r2, p23), r2, p01);
  return S::fma(p, r2, r);
}

// exp(x), as math.h's fast_exp: (1 + e^r - 1) 2^n; NaN in gives NaN, +inf saturates to
// exp(88.38) and -inf to exp(-87.34) (about 1e-38), as fast_exp does.
template <class S>
inline typename S::V vexp(typename S::V x) {
  x = S::min_nan(S::set1(kExpMax), x);
  x = S::max_nan(S::set1(kExpMin), x);
  typename S::V n;
  const typename S::V m1 = vexpm1_reduced<S>(x, n);
  return S::mul(S::add(m1, S::set1(1.0f)), S::pow2i(n));
}

// tanh, as math.h's fast_tanh: expm1(2a) / (expm1(2a) + 2) with the sign of x, a = |x| clamped
// to 10 (where the quotient rounds to 1), and expm1(2a) = 2^n (e^r - 1) + (2^n - 1), which has
// no cancellation near 0; NaN propagated, +-inf to +-1. Written for the length of its dependency
// chain, which bounds a tanh MLP's epilogue (the core holds only a few tanh in flight): the
// reduction works on u = r / 2 = a - n ln 2 / 2 in one FMA (float's ln 2 is 1.9e-9 off, r by n
// times that, n <= 29: under 0.1 ulp of tanh, where Cody-Waite's two parts take a second FMA);
// e^r - 1 = 2u + u^2 q(u) from kTanhExpm1Coefficients (a fit for u's range, one term shorter
// than Cephes' for r's), by Estrin's scheme in three dependent FMAs after u^2, the last adding 2u
// (the leading term rounded once); 2^n from the bits of the rounded n + 1.5 * 2^23 (no
// conversion); the divisor its own FMA beside the dividend.
template <class S>
inline typename S::V vtanh(typename S::V x) {
  using V = typename S::V;
  const V a = S::min_nan(S::set1(10.0f), S::abs(x));
  const V shifter = S::set1(12582912.0f);
  const V n_shifted = S::fma(a, S::set1(2.0f * 1.44269504088896341f), shifter);  // 1.5 * 2^23 + n
  const V n = S::sub(n_shifted, shifter);
  const V u = S::fma(n, S::set1(-0.5f * 0.693147180559945309f), a);
  const V u2 = S::mul(u, u);
  const float* c = kTanhExpm1Coefficients;
  const V q01 = S::fma(S::set1(c[1]), u, S::set1(c[0]));
  const V q23 = S::fma(S::set1(c[3]), u, S::set1(c[2]));
  const V m1 = S::fma(u2, S::fma(u2, S::fma(u2, S::set1(c[4]), q23), q01), S::add(u, u));  // e^r - 1
  // 2^n: n sits in the low bits of n_shifted's (1.5 * 2^23 is 0x4B400000, whose bits the shift drops).
  const V s = S::from_bits(S::template slli_i<23>(S::add_i(S::bits(n_shifted), S::set1_i(127))));
  const V e = S::fma(s, m1, S::sub(s, S::set1(1.0f)));  // expm1(2a), in [0, 4.9e8]
  const V d = S::fma(s, m1, S::add(s, S::set1(1.0f)));  // expm1(2a) + 2
  return S::or_sign(S::ratio(e, d), x);
}

// Cephes' logf, as math.h's fast_log, for finite normal x > 0; its degree-8 polynomial by
// Estrin's scheme (four dependent FMAs after m^2, where Horner's has nine: the categorical head's
// log of the sum and Box-Muller's log sit on a batch-1 call's critical path).
template <class S>
inline typename S::V vlog(typename S::V x) {
  using V = typename S::V;
  using I = typename S::I;
  const I b = S::bits(x);
  V fe = S::to_float(S::sub_i(S::and_i(S::template srli_i<23>(b), S::set1_i(0xff)), S::set1_i(126)));
  V m = S::from_bits(S::or_i(S::and_i(b, S::set1_i(0x007fffff)), S::set1_i(0x3f000000)));  // [0.5, 1)
  const V half_sqrt2 = S::set1(0.707106781186547524f);
  fe = S::select_lt(m, half_sqrt2, S::sub(fe, S::set1(1.0f)), fe);
  m = S::select_lt(m, half_sqrt2, S::sub(S::add(m, m), S::set1(1.0f)), S::sub(m, S::set1(1.0f)));
  const V z = S::mul(m, m);
  const V z2 = S::mul(z, z);
  const float* c = kLogCoefficients;
  const V p01 = S::fma(S::set1(c[1]), m, S::set1(c[0]));
  const V p23 = S::fma(S::set1(c[3]), m, S::set1(c[2]));
  const V p45 = S::fma(S::set1(c[5]), m, S::set1(c[4]));
  const V p67 = S::fma(S::set1(c[7]), m, S::set1(c[6]));
  const V p47 = S::fma(S::fma(S::set1(c[8]), z, p67), z, p45);
  const V p = S::fma(p47, z2, S::fma(p23, z, p01));
  V y = S::mul(S::mul(p, m), z);
  y = S::fma(S::set1(-2.12194440e-4f), fe, y);
  y = S::fma(S::set1(-0.5f), z, y);
  return S::fma(S::set1(0.693359375f), fe, S::add(m, y));
}

// log(1 + x), as math.h's fast_log1p (x itself where 1 + x rounds to 1).
template <class S>
inline typename S::V vlog1p(typename S::V x) {
  using V = typename S::V;
  const V u = S::add(S::set1(1.0f), x);
  const V d = S::sub(u, S::set1(1.0f));
  const V scaled = S::mul(vlog<S>(u), S::div(x, d));
  return S::select_lt(S::abs(d), S::set1(1e-30f), x, scaled);
}

// softplus(x) = log(1 + e^x), x itself above 20 (torch's threshold); NaN stays NaN, +inf gives
// +inf, -inf about 1e-38 (vexp's floor).
template <class S>
inline typename S::V vsoftplus(typename S::V x) {
  return S::select_lt(S::set1(20.0f), x, x, vlog1p<S>(vexp<S>(x)));
}

template <class S>
inline typename S::V vsigmoid(typename S::V x) {
  return S::recip(S::add(S::set1(1.0f), vexp<S>(S::sub(S::zero(), x))));
}

template <class S>
inline typename S::V apply(Activation activation, typename S::V v) {
  switch (activation) {
    case Activation::kRelu:
      return S::max_nan(S::zero(), v);
    case Activation::kTanh:
      return vtanh<S>(v);
    case Activation::kSigmoid:
      return vsigmoid<S>(v);
    case Activation::kSoftplus:
      return vsoftplus<S>(v);
    default:
      return v;
  }
}

// Rows [0, M) by columns [0, N * W) of y (the last vector `tail` lanes wide when kTail), x, wt,
// bias and y already offset to the block. Below 3 rows the inputs are dealt round-robin to K sets
// of accumulators (one row: CHAINS1 / N, 1 to 4; two rows: 2), summed at the end: one row's N
// chains of dependent FMAs would otherwise wait on the FMA latency (4 cycles, two FMAs a cycle: a
// row needs 8 chains in flight to keep both units busy, 16 to hide AVX-512's load stalls too).
// At one row every weight is loaded once whatever the block, and each input is broadcast once per
// block: AVX2's single-row block of 8 vectors broadcasts it once for 64 columns (a load per 8
// FMAs, where 2-vector blocks took one per 2 and loads bounded the row).
template <class S, int M, int N, bool kTail>
inline void tile(const float* __restrict x, int64_t in, const float* __restrict wt, int64_t out,
                 const float* __restrict bias, float* __restrict y, int tail, Activation activation) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr int K = M == 1 ? std::clamp(S::CHAINS1 / N, 1, 4) : M == 2 ? 2 : 1;
  static_assert(K == 1 || K == 2 || K == 4, "the epilogue sums 1, 2 or 4 sets");
  V acc[K][M][N];
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) {
    const bool part = kTail && v == N - 1;
    const V b = bias == nullptr ? S::zero() : part ? S::load_n(bias + v * W, tail) : S::load(bias + v * W);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      acc[0][r][v] = b;
#pragma GCC unroll 4
      for (int k = 1; k < K; ++k) acc[k][r][v] = S::zero();
    }
  }
  int64_t i = 0;
  for (; i + K <= in; i += K) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const float* w = wt + (i + k) * out;
      V wv[N];
#pragma GCC unroll 8
      for (int v = 0; v < N; ++v) wv[v] = kTail && v == N - 1 ? S::load_n(w + v * W, tail) : S::load(w + v * W);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const V xb = S::set1(x[r * in + i + k]);
#pragma GCC unroll 8
        for (int v = 0; v < N; ++v) acc[k][r][v] = S::fma(xb, wv[v], acc[k][r][v]);
      }
    }
  }
  for (; i < in; ++i) {
    const float* w = wt + i * out;
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      const V wv = kTail && v == N - 1 ? S::load_n(w + v * W, tail) : S::load(w + v * W);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) acc[0][r][v] = S::fma(S::set1(x[r * in + i]), wv, acc[0][r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      V sum = acc[0][r][v];
      if constexpr (K == 4) sum = S::add(S::add(sum, acc[1][r][v]), S::add(acc[2][r][v], acc[3][r][v]));
      if constexpr (K == 2) sum = S::add(sum, acc[1][r][v]);
      const V o = apply<S>(activation, sum);
      if (kTail && v == N - 1) {
        S::store_n(y + r * out + v * W, o, tail);
      } else {
        S::store(y + r * out + v * W, o);
      }
    }
  }
}

// The rows left after the full MR blocks: one tile of exactly `left` rows.
template <class S, int N, bool kTail, int M>
inline void last_rows(int64_t left, const float* x, int64_t in, const float* wt, int64_t out, const float* bias,
                      float* y, int tail, Activation activation) {
  if constexpr (M > 0) {
    if (left == M) {
      tile<S, M, N, kTail>(x, in, wt, out, bias, y, tail, activation);
    } else {
      last_rows<S, N, kTail, M - 1>(left, x, in, wt, out, bias, y, tail, activation);
    }
  }
}

// Every row of one block of N column vectors.
template <class S, int N, bool kTail>
void columns(const float* x, int64_t rows, int64_t in, const float* wt, int64_t out, const float* bias, float* y,
             int tail, Activation activation) {
  constexpr int M = S::MR;
  int64_t r = 0;
  for (; r + M <= rows; r += M) tile<S, M, N, kTail>(x + r * in, in, wt, out, bias, y + r * out, tail, activation);
  last_rows<S, N, kTail, M - 1>(rows - r, x + r * in, in, wt, out, bias, y + r * out, tail, activation);
}

// The last columns: N (1 to NC) vectors, the last one masked when tail > 0.
template <class S, int N>
inline void last_columns(int n, int tail, const float* x, int64_t rows, int64_t in, const float* wt, int64_t out,
                         const float* bias, float* y, Activation activation) {
  if constexpr (N > 0) {
    if (n == N) {
      if (tail > 0) {
        columns<S, N, true>(x, rows, in, wt, out, bias, y, tail, activation);
      } else {
        columns<S, N, false>(x, rows, in, wt, out, bias, y, 0, activation);
      }
    } else {
      last_columns<S, N - 1>(n, tail, x, rows, in, wt, out, bias, y, activation);
    }
  }
}

// Lane l of a vector of W / kOut inputs spread to kOut lanes each: input l / kOut. And the folds
// that sum the lanes of one output: lane l plus lane (l + s) % W for s = W / 2, ..., kOut.
template <int W, int kOut>
struct NarrowIndices {
  alignas(64) int32_t spread[W];
  alignas(64) int32_t folds[5][W];
  int num_folds = 0;
  constexpr NarrowIndices() : spread(), folds() {
    for (int l = 0; l < W; ++l) spread[l] = l / kOut;
    for (int s = W / 2; s >= kOut; s /= 2, ++num_folds) {
      for (int l = 0; l < W; ++l) folds[num_folds][l] = (l + s) % W;
    }
  }
};

// M rows of an output kOut wide, kOut dividing W: per vector of weights (W / kOut consecutive
// inputs, kOut weights each), each row's W / kOut inputs spread to kOut lanes each (permute),
// one FMA; the lanes of an output folded together at the end.
template <class S, int kOut, int M>
inline void narrow_tile(const float* __restrict x, int64_t in, const float* __restrict wt,
                        const float* __restrict bias, float* __restrict y, typename S::I spread,
                        const typename S::I* folds, Activation activation) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr int per = W / kOut;
  constexpr int num_folds = NarrowIndices<W, kOut>().num_folds;
  // Row r's inputs i to i + per, each spread to kOut lanes.
  auto inputs = [&](int r, int64_t i) {
    V xv = per == W ? S::load(x + r * in + i) : S::load_n(x + r * in + i, per);
    if constexpr (kOut > 1) xv = S::permute(xv, spread);
    return xv;
  };
  V acc[M];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) acc[r] = S::zero();
  int64_t i = 0;
  if constexpr (kOut == 2) {
    // Two outputs: W inputs at a time, each row's vector unpacked into its inputs 0, 1, 4, 5, ...
    // and 2, 3, 6, 7, ... each twice (in-lane unpacks, where a permute per W / 2 inputs and a
    // masked load bounded the layer), against the weights' 128-bit chunks in the same order; two
    // accumulators per row.
    V acc_hi[M];
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) acc_hi[r] = S::zero();
    for (; i + W <= in; i += W) {
      const V first = S::load(wt + i * 2), second = S::load(wt + i * 2 + W);
      const V w_lo = S::even_chunks(first, second), w_hi = S::odd_chunks(first, second);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const V xv = S::load(x + r * in + i);
        acc[r] = S::fma(S::unpack_lo(xv), w_lo, acc[r]);
        acc_hi[r] = S::fma(S::unpack_hi(xv), w_hi, acc_hi[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) acc[r] = S::add(acc[r], acc_hi[r]);
  } else if constexpr (M == 1) {
    // One row: a second accumulator takes every other vector of inputs, so consecutive FMAs do
    // not wait on each other.
    V odd = S::zero();
    for (; i + 2 * per <= in; i += 2 * per) {
      acc[0] = S::fma(inputs(0, i), S::load(wt + i * kOut), acc[0]);
      odd = S::fma(inputs(0, i + per), S::load(wt + (i + per) * kOut), odd);
    }
    acc[0] = S::add(acc[0], odd);
  }
  for (; i + per <= in; i += per) {
    const V w = S::load(wt + i * kOut);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) acc[r] = S::fma(inputs(r, i), w, acc[r]);
  }
  if (i < in) {
    const int n = static_cast<int>(in - i);
    const V w = S::load_n(wt + i * kOut, n * kOut);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      V xv = S::load_n(x + r * in + i, n);
      if constexpr (kOut > 1) xv = S::permute(xv, spread);
      acc[r] = S::fma(xv, w, acc[r]);
    }
  }
  const V b = bias == nullptr ? S::zero() : S::load_n(bias, kOut);
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
    V v = acc[r];
#pragma GCC unroll 5
    for (int f = 0; f < num_folds; ++f) v = S::add(v, S::permute(v, folds[f]));
    S::store_n(y + r * kOut, apply<S>(activation, S::add(v, b)), kOut);
  }
}

template <class S, int kOut>
void narrow(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, float* y,
            Activation activation) {
  static constexpr NarrowIndices<S::W, kOut> kIndices;
  const typename S::I spread = S::load_idx(kIndices.spread);
  typename S::I folds[5];
  for (int f = 0; f < kIndices.num_folds; ++f) folds[f] = S::load_idx(kIndices.folds[f]);
  constexpr int M = 4;
  int64_t r = 0;
  for (; r + M <= rows; r += M) {
    narrow_tile<S, kOut, M>(x + r * in, in, wt, bias, y + r * kOut, spread, folds, activation);
  }
  for (; r < rows; ++r) narrow_tile<S, kOut, 1>(x + r * in, in, wt, bias, y + r * kOut, spread, folds, activation);
}

template <class S>
void linear(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y,
            Activation activation) {
  constexpr int W = S::W;
  switch (out < W ? out : 0) {
    case 1: return narrow<S, 1>(x, rows, in, wt, bias, y, activation);
    case 2: return narrow<S, 2>(x, rows, in, wt, bias, y, activation);
    case 4: return narrow<S, 4>(x, rows, in, wt, bias, y, activation);
    case 8: return narrow<S, 8>(x, rows, in, wt, bias, y, activation);
    default: break;
  }
  int64_t o = 0;
  if (rows == 1) {
    constexpr int64_t kRowBlock = S::NC1 * W;
    for (; o + kRowBlock <= out; o += kRowBlock) {
      tile<S, 1, S::NC1, false>(x, in, wt + o, out, bias == nullptr ? nullptr : bias + o, y + o, 0, activation);
    }
  }
  constexpr int64_t kBlock = S::NC * W;
  for (; o + kBlock <= out; o += kBlock) {
    columns<S, S::NC, false>(x, rows, in, wt + o, out, bias == nullptr ? nullptr : bias + o, y + o, 0, activation);
  }
  const int64_t left = out - o;
  if (left == 0) return;
  const int tail = static_cast<int>(left % W);
  const int n = static_cast<int>((left + W - 1) / W);
  last_columns<S, S::NC>(n, tail, x, rows, in, wt + o, out, bias == nullptr ? nullptr : bias + o, y + o, activation);
}

template <class S>
void activate(Activation activation, float* x, int64_t n) {
  constexpr int W = S::W;
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(x + i, apply<S>(activation, S::load(x + i)));
  if (i < n) S::store_n(x + i, apply<S>(activation, S::load_n(x + i, static_cast<int>(n - i))), static_cast<int>(n - i));
}

}  // namespace tdp::fused::internal::TDP_GEMM_NAMESPACE
