// The fused path's dense kernels: a Linear over pre-transposed float32 weights, LayerNorm,
// the Mlp activations and the GRU/LSTM cells' gate updates, each over `rows` rows of
// contiguous floats.
//
//   tdp::fused::linear(x, rows, in, wt, bias, out, y);   // y[r] = x[r] @ wt + bias, wt is [in, out]
//   tdp::fused::activate(Activation::kTanh, y, rows * out);
//
// Linear runs on Eigen 3.4's GEMM where the CPU has AVX2 + FMA and the product has at least 2048
// multiply-adds, chosen by measurement (tests/benchmarks/kernels_benchmark.cc, same data and
// shapes, one thread): against the hand-written loops (kernels.cc), Eigen ran a 4->64->64->2 tanh
// MLP in 478 vs 535 ns at batch 1 and 19.8 vs 30.6 us at batch 64, a 17->256->256->12 one in 4.2
// vs 6.3 us and 146 vs 391 us (register-blocked micro-kernels, packed panels and FMA; a 4-row
// blocking of the loops was 4x slower, its accumulators spilling), while the loops win on the
// smallest layers (4->64 at batch 1: 28 vs 37 ns; 64->2: 72 vs 99 ns). Products over the stack
// budget of sdk/fused/eigen_linear.h and CPUs without AVX2 + FMA run the loops, so no call
// allocates and the binary runs on any x86-64 CPU without -march=native: the loops and the
// activations are compiled twice (AVX2 and the baseline, chosen at load by the dynamic loader).
#pragma once

#include <cstdint>

namespace tdp::fused {

enum class Activation { kIdentity, kTanh, kRelu, kElu, kGelu, kLeakyRelu, kSigmoid, kSoftplus };

// y[r, o] = bias[o] + sum_i x[r, i] * wt[i, o]; bias may be null.
void linear(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y);
namespace internal {
// The portable loops linear() falls back to; here for tests/benchmarks/kernels_benchmark.cc and
// the parity tests, which compare them with the Eigen path.
void linear_loops(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y);
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

}  // namespace tdp::fused
