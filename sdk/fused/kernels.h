// The fused path's dense kernels: a Linear over pre-transposed float32 weights, LayerNorm,
// the Mlp activations and the GRU/LSTM cells' gate updates, each over `rows` rows of
// contiguous floats.
//
//   tdp::fused::linear(x, rows, in, wt, bias, out, y, Activation::kTanh);  // y[r] = tanh(x[r] @ wt + bias)
//   tdp::fused::activate(Activation::kElu, y, rows * out);
//
// Linear runs register-blocked micro-kernels with the activation fused into their epilogue
// (sdk/fused/gemm.h): AVX-512 or AVX2 + FMA, whichever the CPU has (checked once at load), else
// portable x86-64 loops, so the binary runs on any x86-64 CPU without -march=native. Measured
// against Eigen 3.4's GEMM on the same shapes in tests/benchmarks/kernels_benchmark.cc (figures
// in tests/benchmarks/README.md). No call allocates. NaN propagates through every kernel and
// activation as through LibTorch's (a NaN input gives NaN outputs, +-inf saturates tanh to +-1).
#pragma once

#include <cstdint>

namespace tdp::fused {

// exp's argument range in float, where every exp of the fused path clamps it (math.h's fast_exp,
// the vector kernels' vexp): above kExpMax exp overflows, below kExpMin (about log(FLT_MIN)) it
// leaves float's normal range, and a class mass exp(x - max) that low counts as 0.
inline constexpr float kExpMax = 88.3762626647949f;
inline constexpr float kExpMin = -87.3365447504f;
// Cephes' expf polynomial: e^r - 1 = r + r^2 (c[0] + c[1] r + ... + c[5] r^5) for |r| <= ln 2 / 2,
// which the fused path's exp reads, in scalar code and on the vector units.
inline constexpr float kExpm1Coefficients[6] = {5.0000001201E-1f, 1.6666665459E-1f, 4.1665795894E-2f,
                                                8.3334519073E-3f, 1.3981999507E-3f, 1.9875691500E-4f};
// Cephes' logf polynomial: log(1 + m) = m - m^2 / 2 + m^3 (c[0] + c[1] m + ... + c[8] m^8) for
// m in [sqrt(1/2) - 1, sqrt(2) - 1), which the fused path's log reads, in scalar code and on the
// vector units.
inline constexpr float kLogCoefficients[9] = {3.3333331174E-1f,  -2.4999993993E-1f, 2.0000714765E-1f,
                                              -1.6668057665E-1f, 1.4249322787E-1f,  -1.2420140846E-1f,
                                              1.1676998740E-1f,  -1.1514610310E-1f, 7.0376836292E-2f};
// tanh's e^(2u) - 1 = 2u + u^2 (c[0] + c[1] u + ... + c[4] u^4) on its reduced argument
// |u| <= ln 2 / 4: a minimax fit of the relative error of e^(2u) - 1 on that range (0.14 ulp with
// these float coefficients), a term shorter than Cephes' polynomial, whose range is twice as wide.
inline constexpr float kTanhExpm1Coefficients[5] = {1.9999998808e+00f, 1.3333234787e+00f, 6.6667521000e-01f,
                                                    2.6772844791e-01f, 8.8848143816e-02f};

enum class Activation { kIdentity, kTanh, kRelu, kElu, kGelu, kLeakyRelu, kSigmoid, kSoftplus };

// y[r, o] = activation(bias[o] + sum_i x[r, i] * wt[i, o]); bias may be null.
void linear(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y,
            Activation activation = Activation::kIdentity);
namespace internal {
// The portable loops (the kPortable variant of sdk/fused/gemm.h, without its activation).
void linear_loops(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y);
// activate() on scalar code (the portable variant; ELU, GELU, LeakyReLU and Softplus everywhere).
void activate_scalar(Activation activation, float* x, int64_t n);
}  // namespace internal

// In place over [rows, width]: (x - mean) / sqrt(var + eps) * gamma + beta (biased variance).
void layer_norm(float* x, int64_t rows, int64_t width, const float* gamma, const float* beta, float eps);
// In place over n floats; the semantics of torch::nn's default modules (ELU alpha 1, LeakyReLU
// slope 0.01, GELU exact (erf), Softplus beta 1 threshold 20).
void activate(Activation activation, float* x, int64_t n);

// The recurrent cells after their two projections (linear() of the input and of the hidden state,
// each with its bias), in torch.nn's gate order and equations. GRU: gi, gh are [rows, 3 * hidden]
// (r, z, n); h' = (1 - z) * tanh(gi_n + r * gh_n) + z * h. LSTM: gi, gh are [rows, 4 * hidden]
// (i, f, g, o); c' = f * c + i * g, h' = o * tanh(c'). The outputs must not alias the inputs.
void gru_gates(const float* gi, const float* gh, const float* h, int64_t rows, int64_t hidden, float* h_out);
void lstm_gates(const float* gi, const float* gh, const float* c, int64_t rows, int64_t hidden, float* h_out,
                float* c_out);

// The heads' random draws, one lane per row: normals for the Gaussian heads (Normal,
// IndependentNormal, TanhNormal), uniforms for the categorical ones; and their densities.
//
// d standard normals for each of rows [first_row, first_row + rows) of a call: out[r * d + j],
// from Philox4x32-10 (philox.h) of key `seed` at counter {call low, call high, row, block0 +
// j / 4}, Box-Muller on that block's words (0, 1) for j % 4 = 0 (cosine) and 1 (sine), and (2, 3)
// for 2 and 3. A row's normals depend on its index and the call, never on the batch it came in.
void philox_normals(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0, int64_t d,
                    float* out);

// A uniform in [0, 1) for each of rows [first_row, first_row + rows) of a call: uniform01 (philox.h)
// of word 0 of Philox4x32-10 of key `seed` at counter {call low, call high, row, block}, the
// categorical heads' draw.
void philox_uniforms(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block, float* out);

// x = loc + eps * scale; sample = x, or for a TanhNormal tanh(x) (clamped into +-(1 - 1e-6) when
// safe_tanh) * half + shift. log_prob (when not null) = the Normal's log-density of x, and for a
// TanhNormal minus log |d sample / dx| = 2 (log 2 - x - softplus(-2x)) + log_half: the density
// of the sample, scored from the pre-tanh value (no atanh of a saturated action).
struct GaussianDraw {
  bool tanh = false;
  bool safe_tanh = false;
  float half = 1.0f;
  float shift = 0.0f;
  float log_half = 0.0f;
};
void gaussian_draw(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                   float* sample, float* log_prob);

// A categorical head's distribution, each of `rows` rows of d logits normalized as Categorical
// does: mass[r, k] = exp(x - max) (0 for an -inf logit, and below float's normal range),
// log_p[r, k] = x - (max + log sum_k mass) (the log-softmax; the whole row NaN when a mass is
// NaN). The masses are the inverse-CDF draw's weights.
void log_softmax(const float* x, int64_t rows, int64_t d, float* log_p, float* mass);

}  // namespace tdp::fused
