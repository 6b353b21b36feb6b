// Compiled with -mavx2 -mfma (tests/benchmarks/BUILD.bazel), reached only after cpu_has_avx2_fma().
#include "tests/benchmarks/eigen_linear.h"

// Packing buffers up to this size live on the stack, as the plan ran Eigen (no allocation per call).
#define EIGEN_STACK_ALLOCATION_LIMIT (576 * 1024)
#include <Eigen/Core>

namespace tdp::fused::internal {

bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

void eigen_linear(const float* x, int64_t rows, int64_t in, const float* wt, const float* bias, int64_t out,
                  float* y) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<RowMajor> result(y, rows, out);
  result.noalias() = Eigen::Map<const RowMajor>(x, rows, in) * Eigen::Map<const RowMajor>(wt, in, out);
  if (bias != nullptr) result.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, out);
}

}  // namespace tdp::fused::internal
