// Compiled with -mavx2 -mfma (sdk/fused/BUILD.bazel): the only code of the library built for
// more than the x86-64 baseline without a run-time clone, reached only after cpu_has_avx2_fma().
#include "sdk/fused/eigen_linear.h"

// Packing buffers up to this size live on the stack (see kEigenMaxPackedFloats), with room for
// Eigen's alignment padding. EIGEN_RUNTIME_NO_MALLOC lets a test forbid Eigen's heap
// (Eigen::internal::set_is_malloc_allowed(false)) and catch a product that would allocate.
#define EIGEN_STACK_ALLOCATION_LIMIT (576 * 1024)
#define EIGEN_RUNTIME_NO_MALLOC
#include <Eigen/Core>

namespace tdp::fused::internal {

static_assert(EIGEN_STACK_ALLOCATION_LIMIT >= 4 * kEigenMaxPackedFloats + 64 * 1024,
              "the stack limit must hold the packed floats prefer_eigen_linear() admits, and padding");

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
