// The fused path's dense kernels: a Linear over pre-transposed float32 weights, LayerNorm,
// the Mlp activations and the GRU/LSTM cells' gate updates, each over `rows` rows of
// contiguous floats.
//
//   tdp::fused::linear(x, rows, in, wt, bias, out, y);   // y[r] = x[r] @ wt + bias, wt is [in, out]
//   tdp::fused::activate(Activation::kTanh, y, rows * out);
//
// Hand-written loops, not Eigen: Eigen is not among the packages bazelw installs, and for these
// shapes (a few rows, widths <= 256) a loop that broadcasts one input and streams one weight
// row into the output row is what an Eigen GEMV would do, minus its dispatch; measured at
// 0.2-0.6 us for a 4->64->64->2 tanh MLP at batch 1 (tests/benchmarks/fused_benchmark.cc).
// The hot functions are compiled twice (AVX2 and the x86-64 baseline, chosen at load by the
// dynamic loader), so the binary runs on any x86-64 CPU without -march=native.
#pragma once

#include <cstdint>

namespace tdp::fused {

enum class Activation { kIdentity, kTanh, kRelu, kElu, kGelu, kLeakyRelu, kSigmoid, kSoftplus };

// y[r, o] = bias[o] + sum_i x[r, i] * wt[i, o]; bias may be null.
void linear(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y);
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
