// Internal to sdk/fused: the Linear kernel on Eigen 3.4's GEMM, compiled for AVX2 + FMA
// (eigen_linear.cc is the only file of the library that includes Eigen, so no Eigen template
// is compiled with two instruction sets). kernels.cc's linear() calls it when the CPU has both
// and the product is large enough to gain and small enough for the stack budget below, else
// runs its portable loops.
//
//   if (cpu_has_avx2_fma() && prefer_eigen_linear(rows, in, out)) eigen_linear(x, rows, in, wt, bias, out, y);
#pragma once

#include <cstdint>

namespace tdp::fused::internal {

// Eigen packs blocks of x and of the weights into buffers of at most in * (rows + out) floats,
// which it puts on the stack up to EIGEN_STACK_ALLOCATION_LIMIT (set in eigen_linear.cc) and
// heap-allocates beyond it: products above this budget take the loops, so that no call of the
// fused plan allocates. 128 Ki floats (512 KiB of stack) cover a 256-wide layer at batch 256.
inline constexpr int64_t kEigenMaxPackedFloats = 128 * 1024;
// Below this many multiply-adds the loops win (measured: a 4->64 or 64->2 layer at batch 1 took
// 28 and 72 ns in the loops, 37 and 99 ns in Eigen's GEMM; 64->64 at batch 1, 4096, took 177
// against 117 ns).
inline constexpr int64_t kEigenMinMultiplyAdds = 2048;

// Whether linear() hands this product to Eigen (on a CPU with AVX2 + FMA).
inline bool prefer_eigen_linear(int64_t rows, int64_t in, int64_t out) {
  return rows * in * out >= kEigenMinMultiplyAdds && in * (rows + out) <= kEigenMaxPackedFloats;
}

// Whether this CPU runs the AVX2 + FMA code of eigen_linear.cc (checked once).
bool cpu_has_avx2_fma();

// y[r, o] = bias[o] + sum_i x[r, i] * wt[i, o] (row-major; bias may be null). Needs
// cpu_has_avx2_fma(), and in * (rows + out) <= kEigenMaxPackedFloats not to allocate.
void eigen_linear(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                  float* y);

}  // namespace tdp::fused::internal
