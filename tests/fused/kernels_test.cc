// The fused path's Linear kernels: linear() (Eigen's GEMM on AVX2 + FMA CPUs within its stack
// budget, else the loops) and the loops agree with each other and with a double-precision
// reference over the shapes the plan meets, including non-multiples of the vector width and
// the edges of prefer_eigen_linear(); and the Eigen path never touches the heap up to its budget.
#define EIGEN_RUNTIME_NO_MALLOC
#include <Eigen/Core>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sdk/fused/eigen_linear.h"
#include "sdk/fused/kernels.h"

namespace tdp::fused {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

struct Shape {
  int64_t rows, in, out;
  std::string name() const { return std::to_string(rows) + "x" + std::to_string(in) + "->" + std::to_string(out); }
};

const std::vector<Shape> kShapes = {{1, 4, 64},    {1, 64, 2},     {7, 17, 13},  {64, 64, 64}, {64, 256, 256},
                                    {1000, 64, 2}, {3, 1, 1},      {256, 256, 256},
                                    // over the Eigen path's stack budget: the loops
                                    {300, 256, 256}, {2, 1024, 1024}};

TEST(FusedKernelsTest, LinearAndTheLoopsMatchADoubleReference) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.name());
    const std::vector<float> x = random_floats(shape.rows * shape.in, 1);
    const std::vector<float> wt = random_floats(shape.in * shape.out, 2);
    const std::vector<float> bias = random_floats(shape.out, 3);
    std::vector<float> fast(shape.rows * shape.out), loops(shape.rows * shape.out);
    linear(x.data(), shape.rows, shape.in, wt.data(), bias.data(), shape.out, fast.data());
    internal::linear_loops(x.data(), shape.rows, shape.in, wt.data(), bias.data(), shape.out, loops.data());
    double worst = 0;
    for (int64_t r = 0; r < shape.rows; ++r) {
      for (int64_t o = 0; o < shape.out; ++o) {
        double expected = bias[o];
        double magnitude = std::abs(bias[o]);
        for (int64_t i = 0; i < shape.in; ++i) {
          expected += static_cast<double>(x[r * shape.in + i]) * wt[i * shape.out + o];
          magnitude += std::abs(static_cast<double>(x[r * shape.in + i]) * wt[i * shape.out + o]);
        }
        // float accumulation over `in` terms: relative to the sum of magnitudes.
        const double tolerance = 1e-6 * magnitude + 1e-6;
        worst = std::max(worst, std::abs(fast[r * shape.out + o] - expected) / tolerance);
        worst = std::max(worst, std::abs(loops[r * shape.out + o] - expected) / tolerance);
      }
    }
    EXPECT_LE(worst, 1.0);
  }
  std::vector<float> y(2);
  const std::vector<float> x = {1, 2}, wt = {1, 2, 3, 4};
  linear(x.data(), 1, 2, wt.data(), nullptr, 2, y.data());  // no bias
  EXPECT_EQ(y, (std::vector<float>{7, 10}));
}

TEST(FusedKernelsTest, TheEigenPathNeverAllocatesWithinItsBudget) {
  if (!internal::cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: linear() runs the loops";
#ifdef NDEBUG
  GTEST_SKIP() << "Eigen checks EIGEN_RUNTIME_NO_MALLOC with assert(): needs a build without NDEBUG";
#endif
  for (const Shape& shape : kShapes) {
    if (!internal::prefer_eigen_linear(shape.rows, shape.in, shape.out)) continue;
    SCOPED_TRACE(shape.name());
    const std::vector<float> x = random_floats(shape.rows * shape.in, 1);
    const std::vector<float> wt = random_floats(shape.in * shape.out, 2);
    std::vector<float> y(shape.rows * shape.out);
    // A heap allocation inside Eigen now fails an assert (EIGEN_RUNTIME_NO_MALLOC in eigen_linear.cc).
    Eigen::internal::set_is_malloc_allowed(false);
    internal::eigen_linear(x.data(), shape.rows, shape.in, wt.data(), nullptr, shape.out, y.data());
    Eigen::internal::set_is_malloc_allowed(true);
  }
  EXPECT_TRUE(internal::prefer_eigen_linear(256, 256, 256));
  EXPECT_FALSE(internal::prefer_eigen_linear(300, 256, 256));  // over the stack budget
  EXPECT_FALSE(internal::prefer_eigen_linear(1, 4, 64));       // too small to gain
}

}  // namespace
}  // namespace tdp::fused
