// Eigen 3.4's GEMM on the fused plan's layout (row-major x [rows, in], weights pre-transposed to
// [in, out]), compiled for AVX2 + FMA: the baseline of tests/benchmarks/kernels_benchmark.cc.
// The plan ran its Linear layers on it before sdk/fused/gemm.h's micro-kernels replaced it.
//
//   if (cpu_has_avx2_fma()) eigen_linear(x, rows, in, wt, bias, out, y);
#pragma once

#include <cstdint>

namespace tdp::fused::internal {

// Whether this CPU runs the AVX2 + FMA code of eigen_linear.cc (checked once).
bool cpu_has_avx2_fma();

// y[r, o] = bias[o] + sum_i x[r, i] * wt[i, o] (row-major; bias may be null). Needs
// cpu_has_avx2_fma(); packing buffers up to 576 KiB live on the stack, larger ones on the heap.
void eigen_linear(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                  float* y);

}  // namespace tdp::fused::internal
