// Internal to sdk/fused: the Linear kernel's instruction-set variants, and which one this CPU
// runs. Each variant computes y = act(x @ wt + bias) over row-major x [rows, in] and weights
// pre-transposed to [in, out] (the plan's arena), with the activation applied to the
// accumulators before they are stored (the fused epilogue):
//
//   const tdp::fused::internal::LinearFn f = tdp::fused::internal::linear_variant(Isa::kAvx2);
//   if (f != nullptr) f(x, rows, in, wt, bias, out, y, Activation::kTanh);
//
// kAvx512 (AVX-512F) and kAvx2 (AVX2 + FMA) are register-blocked micro-kernels compiled from one
// template (gemm_kernel.h) in their own files with their own -m flags (gemm_avx512.cc,
// gemm_avx2.cc); kPortable is the x86-64 baseline loops of kernels.cc. linear() runs the best
// variant this CPU has, chosen once at load (__builtin_cpu_supports), so the binary runs on any
// x86-64 CPU; tests and benchmarks force each variant on the same data.
#pragma once

#include <cstdint>

#include "sdk/fused/kernels.h"

namespace tdp::fused::internal {

enum class Isa { kPortable, kAvx2, kAvx512 };
const char* isa_name(Isa isa);

using LinearFn = void (*)(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                          float* y, Activation activation);

// The best variant this CPU runs (checked once).
Isa detected_isa();
// The variant for `isa`, or nullptr when this CPU cannot run it.
LinearFn linear_variant(Isa isa);

// Whether the micro-kernels apply `activation` in their epilogue; the others (ELU, GELU,
// LeakyReLU) are applied after the product by activate().
inline bool fused_epilogue(Activation activation) {
  return activation == Activation::kIdentity || activation == Activation::kRelu || activation == Activation::kTanh ||
         activation == Activation::kSigmoid || activation == Activation::kSoftplus;
}

// The variants themselves (call through linear_variant(), which checks the CPU).
void linear_avx512(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                   float* y, Activation activation);
void linear_avx2(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out, float* y,
                 Activation activation);
void linear_portable(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                     float* y, Activation activation);

// In place over n floats, the fused epilogue's activations (fused_epilogue()) on the vector
// units of `isa` (nullptr when this CPU cannot run it): the same code as the micro-kernels'.
using ActivateFn = void (*)(Activation activation, float* x, int64_t n);
ActivateFn activate_variant(Isa isa);
void activate_avx512(Activation activation, float* x, int64_t n);
void activate_avx2(Activation activation, float* x, int64_t n);

// kernels.h's philox_normals, philox_uniforms, gaussian_draw and log_softmax per instruction set
// (random_kernel.h); the portable ones are kernels.cc's scalar loops.
using PhiloxNormalsFn = void (*)(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0,
                                 int64_t d, float* out);
PhiloxNormalsFn philox_normals_variant(Isa isa);
void philox_normals_avx512(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0,
                           int64_t d, float* out);
void philox_normals_avx2(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0, int64_t d,
                         float* out);
void philox_normals_portable(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block0,
                             int64_t d, float* out);

using PhiloxUniformsFn = void (*)(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block,
                                  float* out);
PhiloxUniformsFn philox_uniforms_variant(Isa isa);
void philox_uniforms_avx512(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block,
                            float* out);
void philox_uniforms_avx2(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block, float* out);
void philox_uniforms_portable(uint64_t seed, uint64_t call, uint64_t first_row, int64_t rows, uint32_t block,
                              float* out);

using GaussianDrawFn = void (*)(const GaussianDraw& g, const float* loc, const float* scale, const float* eps,
                                int64_t n, float* sample, float* log_prob);
GaussianDrawFn gaussian_draw_variant(Isa isa);
void gaussian_draw_avx512(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                          float* sample, float* log_prob);
void gaussian_draw_avx2(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                        float* sample, float* log_prob);
void gaussian_draw_portable(const GaussianDraw& g, const float* loc, const float* scale, const float* eps, int64_t n,
                            float* sample, float* log_prob);

using LogSoftmaxFn = void (*)(const float* x, int64_t rows, int64_t d, float* log_p, float* mass);
LogSoftmaxFn log_softmax_variant(Isa isa);
void log_softmax_avx512(const float* x, int64_t rows, int64_t d, float* log_p, float* mass);
void log_softmax_avx2(const float* x, int64_t rows, int64_t d, float* log_p, float* mass);
void log_softmax_portable(const float* x, int64_t rows, int64_t d, float* log_p, float* mass);

}  // namespace tdp::fused::internal
