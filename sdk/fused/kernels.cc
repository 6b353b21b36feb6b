#include "sdk/fused/kernels.h"

#include <algorithm>
#include <cmath>

#include "sdk/fused/gemm.h"
#include "sdk/fused/math.h"
#include "sdk/fused/philox.h"

namespace tdp::fused {

// Not under gcc's ThreadSanitizer (__SANITIZE_THREAD__): gcc instruments the IFUNC resolver that
// target_clones generates (__tsan_func_entry), and the dynamic loader runs that resolver while it
// relocates the libraries, before libtsan has set up the thread's state, so the binary died with
// SIGSEGV at startup. TSan builds run the default clone only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define TDP_FUSED_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TDP_FUSED_CLONES
#endif

namespace {

// Rows [r, r + R) times columns [o0, o0 + C) of the output, accumulated in registers: the
// weights are read once per R rows and the outputs stored once (C and R are constants, so the
// accumulators are vector registers).
template <int R, int C>
inline void block(const float* __restrict x, int64_t in, const float* __restrict wt, const float* __restrict bias,
                  int64_t out, int64_t o0, float* __restrict y) {
  float acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = bias != nullptr ? bias[o0 + c] : 0.0f;
  }
  for (int64_t i = 0; i < in; ++i) {
    const float* w = wt + i * out + o0;
    for (int r = 0; r < R; ++r) {
      const float xi = x[r * in + i];
      for (int c = 0; c < C; ++c) acc[r][c] += xi * w[c];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) y[r * out + o0 + c] = acc[r][c];
  }
}

template <int R>
inline void rows_block(const float* __restrict x, int64_t in, const float* __restrict wt,
                       const float* __restrict bias, int64_t out, float* __restrict y) {
  int64_t o = 0;
  // 64 outputs: 8 independent AVX2 accumulators hide the add latency (16 measured 25% slower
  // on a 64-wide hidden layer; the baseline SSE clone spills some of them, and stays correct).
  for (; o + 64 <= out; o += 64) block<R, 64>(x, in, wt, bias, out, o, y);
  for (; o + 16 <= out; o += 16) block<R, 16>(x, in, wt, bias, out, o, y);
  for (; o + 4 <= out; o += 4) block<R, 4>(x, in, wt, bias, out, o, y);
  for (; o < out; ++o) block<R, 1>(x, in, wt, bias, out, o, y);
}

}  // namespace

// The portable loops: CPUs without AVX2 + FMA. Compiled for the x86-64 baseline only (no clone:
// a CPU with AVX2 runs gemm_avx2.cc), so the tests that force this variant run the code such a
// CPU runs.
void internal::linear_loops(const float* __restrict x, int64_t rows, int64_t in, const float* __restrict wt,
                            const float* __restrict bias, int64_t out, float* __restrict y) {
  for (int64_t r = 0; r < rows; ++r) rows_block<1>(x + r * in, in, wt, bias, out, y + r * out);
}

namespace internal {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kPortable: return "portable";
  }
  return "?";
}

Isa detected_isa() {
  static const Isa isa = [] {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
#endif
    return Isa::kPortable;
  }();
  return isa;
}

namespace {

// The variant for `isa` among one kernel's, or nullptr when this CPU cannot run it.
template <class Fn>
Fn variant(Isa isa, Fn avx512, Fn avx2, Fn portable) {
  const Isa best = detected_isa();
  switch (isa) {
    case Isa::kAvx512: return best == Isa::kAvx512 ? avx512 : nullptr;
    case Isa::kAvx2: return best != Isa::kPortable ? avx2 : nullptr;
    case Isa::kPortable: return portable;
  }
  return nullptr;
}

}  // namespace

LinearFn linear_variant(Isa isa) { return variant<LinearFn>(isa, &linear_avx512, &linear_avx2, &linear_portable); }

ActivateFn activate_variant(Isa isa) { return variant<ActivateFn>(isa, &activate_avx512, &activate_avx2, nullptr); }

PhiloxNormalsFn philox_normals_variant(Isa isa) {
  return variant<PhiloxNormalsFn>(isa, &philox_normals_avx512, &philox_normals_avx2, &philox_normals_portable);
}

PhiloxUniformsFn philox_uniforms_variant(Isa isa) {
  return variant<PhiloxUniformsFn>(isa, &philox_uniforms_avx512, &philox_uniforms_avx2, &philox_uniforms_portable);
}

GaussianDrawFn gaussian_draw_variant(Isa isa) {
  return variant<GaussianDrawFn>(isa, &gaussian_draw_avx512, &gaussian_draw_avx2, &gaussian_draw_portable);
}

LogSoftmaxFn log_softmax_variant(Isa isa) {
  return variant<LogSoftmaxFn>(isa, &log_softmax_avx512, &log_softmax_avx2, &log_softmax_portable);
}

// The scalar twins of random_kernel.h's vector code, operation for operation.
void philox_normals_portable(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0,
                             int64_t d, float* out) {
  const Philox4x32 rng(seed);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j0 = 0; j0 < d; j0 += 4) {
      const auto words =
          rng(philox_counter(call, first_row + static_cast<uint64_t>(r), block0 + static_cast<uint32_t>(j0 / 4)));
      for (int pair = 0; pair < 2 && j0 + 2 * pair < d; ++pair) {
        const float radius = std::sqrt(-2.0f * fast_log(uniform01_open0(words[2 * pair])));
        float s, c;
        fast_sincos_2pi(uniform01(words[2 * pair + 1]), s, c);
        out[r * d + j0 + 2 * pair] = radius * c;
        if (j0 + 2 * pair + 1 < d) out[r * d + j0 + 2 * pair + 1] = radius * s;
      }
    }
  }
}

void philox_uniforms_portable(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block,
                              float* out) {
  const Philox4x32 rng(seed);
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = uniform01(rng(philox_counter(call, first_row + static_cast<uint64_t>(r), block))[0]);
  }
}

void gaussian_draw_portable(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                            float* sample, float* log_prob) {
  const float lim = 1.0f - 1e-6f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = eps[i] * scale[i] + loc[i];
    float y = x;
    if (g.tanh) {
      y = fast_tanh(x);
      if (g.safe_tanh) y = std::max(-lim, std::min(lim, y));
      y = y * g.half + g.shift;
    }
    sample[i] = y;
    if (log_prob == nullptr) continue;
    const float diff = (x - loc[i]) / scale[i];
    float value = (-0.5f * (diff * diff) + -0.91893853320467274178f) - fast_log(scale[i]);
    if (g.tanh) {
      const float t = -2.0f * x;
      const float softplus = 20.0f < t ? t : fast_log1p(fast_exp(t));
      value = value - (2.0f * ((0.69314718055994530942f - x) - softplus) + g.log_half);
    }
    log_prob[i] = value;
  }
}

void log_softmax_portable(const float* x, int64_t rows, int64_t d, float* log_p, float* mass) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float m = xr[0];
    for (int64_t k = 1; k < d; ++k) m = std::max(m, xr[k]);
    double t = 0;
    for (int64_t k = 0; k < d; ++k) {
      const float v = xr[k] - m;
      t += mass[r * d + k] = v < kExpMin ? 0.0f : fast_exp(v);
    }
    const float total = static_cast<float>(t);
    const float lse = std::isnan(total) ? total : m + fast_log(total);
    for (int64_t k = 0; k < d; ++k) log_p[r * d + k] = xr[k] - lse;
  }
}

void linear_portable(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                     float* y, Activation activation) {
  linear_loops(x, rows, in, wt, bias, out, y);
  activate_scalar(activation, y, rows * out);
}

}  // namespace internal

void linear(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y,
            Activation activation) {
  static const internal::LinearFn best = internal::linear_variant(internal::detected_isa());
  if (internal::fused_epilogue(activation)) return best(x, rows, in, wt, bias, out, y, activation);
  best(x, rows, in, wt, bias, out, y, Activation::kIdentity);
  activate(activation, y, rows * out);
}

void philox_normals(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0, int64_t d,
                    float* out) {
  static const internal::PhiloxNormalsFn best = internal::philox_normals_variant(internal::detected_isa());
  best(seed, call, first_row, rows, block0, d, out);
}

void philox_uniforms(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block, float* out) {
  static const internal::PhiloxUniformsFn best = internal::philox_uniforms_variant(internal::detected_isa());
  best(seed, call, first_row, rows, block, out);
}

void gaussian_draw(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                   float* sample, float* log_prob) {
  static const internal::GaussianDrawFn best = internal::gaussian_draw_variant(internal::detected_isa());
  best(g, loc, scale, eps, n, sample, log_prob);
}

void log_softmax(const float* x, int64_t rows, int64_t d, float* log_p, float* mass) {
  static const internal::LogSoftmaxFn best = internal::log_softmax_variant(internal::detected_isa());
  best(x, rows, d, log_p, mass);
}

void layer_norm(float* x, int64_t rows, int64_t width, const float* gamma, const float* beta, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * width;
    double mean = 0;
    for (int64_t i = 0; i < width; ++i) mean += xr[i];
    mean /= static_cast<double>(width);
    double var = 0;
    for (int64_t i = 0; i < width; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(width);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
    for (int64_t i = 0; i < width; ++i) xr[i] = (xr[i] - m) * inv * gamma[i] + beta[i];
  }
}

void activate(Activation activation, float* x, int64_t n) {
  static const internal::ActivateFn vector = internal::activate_variant(internal::detected_isa());
  if (vector != nullptr && internal::fused_epilogue(activation)) return vector(activation, x, n);
  internal::activate_scalar(activation, x, n);
}

TDP_FUSED_CLONES
void internal::activate_scalar(Activation activation, float* __restrict x, int64_t n) {
  switch (activation) {
    case Activation::kIdentity:
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = fast_tanh(x[i]);
      return;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] < 0.0f ? 0.0f : x[i];  // NaN stays NaN, as torch.relu
      return;
    case Activation::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : std::expm1(x[i]);
      return;
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
      return;
    case Activation::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.01f * x[i];
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = fast_sigmoid(x[i]);
      return;
    case Activation::kSoftplus:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 20.0f ? x[i] : std::log1p(std::exp(x[i]));
      return;
  }
}

TDP_FUSED_CLONES
void gru_gates(const float* __restrict gi, const float* __restrict gh, const float* __restrict h, int64_t rows,
               int64_t hidden, float* __restrict h_out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xi = gi + r * 3 * hidden;
    const float* hi = gh + r * 3 * hidden;
    const float* hr = h + r * hidden;
    float* out = h_out + r * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      const float reset = fast_sigmoid(xi[j] + hi[j]);
      const float update = fast_sigmoid(xi[hidden + j] + hi[hidden + j]);
      // torch.nn.GRUCell: the reset gate scales the hidden projection including its bias.
      const float candidate = fast_tanh(xi[2 * hidden + j] + reset * hi[2 * hidden + j]);
      out[j] = (1.0f - update) * candidate + update * hr[j];
    }
  }
}

TDP_FUSED_CLONES
void lstm_gates(const float* __restrict gi, const float* __restrict gh, const float* __restrict c, int64_t rows,
                int64_t hidden, float* __restrict h_out, float* __restrict c_out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xi = gi + r * 4 * hidden;
    const float* hi = gh + r * 4 * hidden;
    const float* cr = c + r * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      const float in = fast_sigmoid(xi[j] + hi[j]);
      const float forget = fast_sigmoid(xi[hidden + j] + hi[hidden + j]);
      const float cell = fast_tanh(xi[2 * hidden + j] + hi[2 * hidden + j]);
      const float out = fast_sigmoid(xi[3 * hidden + j] + hi[3 * hidden + j]);
      const float next = forget * cr[j] + in * cell;
      c_out[r * hidden + j] = next;
      h_out[r * hidden + j] = out * fast_tanh(next);
    }
  }
}

}  // namespace tdp::fused
