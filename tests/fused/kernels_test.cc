// The fused path's kernels against a double-precision reference, every instruction-set variant
// this CPU runs forced on the same data (sdk/fused/gemm.h: AVX-512, AVX2 + FMA and the portable
// loops, so an AVX-512 machine also checks the fallbacks other CPUs take): Linear with each
// fused epilogue over the shapes the plan meets (narrow outputs that divide a vector, non-
// multiples of the vector width, one row to past the row block, no bias), the vector
// activations over a dense range, and the non-finite rule: NaN propagates as through LibTorch
// (a NaN input makes its row NaN and no other), +-inf saturates tanh and sigmoid. Also the
// products of Debian's single-threaded OpenBLAS and BLIS as kernels_benchmark runs them (their
// cblas_sgemm, then the bias), so the benchmark's library columns compare correct products;
// skipped, naming the package, where it is not installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sdk/fused/gemm.h"
#include "sdk/fused/kernels.h"
#include "sdk/fused/math.h"
#include "sdk/fused/philox.h"
#include "tests/benchmarks/cblas_loader.h"

namespace tdp::fused {
namespace {

using internal::Isa;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

// The variants this CPU runs (the portable one always).
std::vector<Isa> runnable_variants() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    if (internal::linear_variant(isa) != nullptr) isas.push_back(isa);
  }
  return isas;
}

double reference_activation(Activation activation, double v) {
  switch (activation) {
    case Activation::kIdentity: return v;
    case Activation::kTanh: return std::tanh(v);
    case Activation::kRelu: return v > 0 ? v : 0;
    case Activation::kSigmoid: return 1 / (1 + std::exp(-v));
    case Activation::kElu: return v > 0 ? v : std::expm1(v);
    case Activation::kLeakyRelu: return v > 0 ? v : 0.01 * v;
    case Activation::kGelu: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case Activation::kSoftplus: return v > 20 ? v : std::log1p(std::exp(v));
  }
  return v;
}

struct Shape {
  int64_t rows, in, out;
  std::string name() const { return std::to_string(rows) + "x" + std::to_string(in) + "->" + std::to_string(out); }
};

std::vector<Shape> shapes() {
  std::vector<Shape> all = {{1, 4, 64},   {64, 4, 64},   {64, 64, 64},  {64, 64, 2},   {7, 17, 13},  {64, 256, 256},
                            {3, 1, 1},    {2, 1024, 33}, {13, 64, 12},  {64, 3, 128},  {5, 9, 200},  {64, 17, 256},
                            {1, 256, 12}, {6, 6, 6},     {12, 64, 65},  {1, 64, 3},    {64, 64, 1},  {9, 7, 4},
                            {8, 33, 8},   {4, 15, 16},   {6, 16, 17},   {1, 1, 96},    {64, 64, 48}, {11, 70, 80},
                            {1, 64, 200}, {1, 70, 130},  {1, 256, 256}};
  // Every row count to past two row blocks, on shapes that take each path.
  for (int64_t rows = 1; rows <= 13; ++rows) {
    for (auto [in, out] : {std::pair<int64_t, int64_t>{5, 2}, {21, 2}, {19, 64}, {8, 23}, {3, 8}}) {
      all.push_back({rows, in, out});
    }
  }
  return all;
}

// The largest error of y [rows, out] against act(x @ wt + bias) computed in double (bias may be
// null), in units of the tolerance: <= 1 passes.
double worst_error(const Shape& shape, const std::vector<float>& x, const std::vector<float>& wt, const float* bias,
                   Activation activation, const std::vector<float>& y) {
  double worst = 0;
  for (int64_t r = 0; r < shape.rows; ++r) {
    for (int64_t o = 0; o < shape.out; ++o) {
      double sum = bias != nullptr ? bias[o] : 0.0;
      double magnitude = std::abs(sum);
      for (int64_t i = 0; i < shape.in; ++i) {
        const double term = static_cast<double>(x[r * shape.in + i]) * wt[i * shape.out + o];
        sum += term;
        magnitude += std::abs(term);
      }
      // float accumulation over `in` terms, relative to the sum of magnitudes (the
      // activations have slopes <= 1), plus the activation's own rounding.
      const double tolerance = 1e-6 * magnitude + 2e-6;
      const double expected = reference_activation(activation, sum);
      worst = std::max(worst, std::abs(y[r * shape.out + o] - expected) / tolerance);
    }
  }
  return worst;
}

TEST(FusedKernelsTest, EveryLinearVariantMatchesADoubleReferenceWithEachEpilogue) {
  for (Isa isa : runnable_variants()) {
    const internal::LinearFn linear_fn = internal::linear_variant(isa);
    for (const Shape& shape : shapes()) {
      for (Activation activation : {Activation::kIdentity, Activation::kTanh, Activation::kRelu,
                                    Activation::kSigmoid, Activation::kSoftplus}) {
        for (bool with_bias : {true, false}) {
          SCOPED_TRACE(std::string(internal::isa_name(isa)) + " " + shape.name() + " activation " +
                       std::to_string(static_cast<int>(activation)) + (with_bias ? "" : " no bias"));
          const std::vector<float> x = random_floats(shape.rows * shape.in, 1);
          const std::vector<float> wt = random_floats(shape.in * shape.out, 2);
          const std::vector<float> bias = random_floats(shape.out, 3);
          // A guard past the end: a variant must write exactly rows * out floats.
          std::vector<float> y(shape.rows * shape.out + 16, 12345.0f);
          linear_fn(x.data(), shape.rows, shape.in, wt.data(), with_bias ? bias.data() : nullptr, shape.out, y.data(),
                    activation);
          EXPECT_LE(worst_error(shape, x, wt, with_bias ? bias.data() : nullptr, activation, y), 1.0);
          for (int64_t k = shape.rows * shape.out; k < static_cast<int64_t>(y.size()); ++k) {
            ASSERT_EQ(y[k], 12345.0f) << "wrote past the output at " << k;
          }
        }
      }
    }
  }
}

// A library's product plus bias on the shapes above, as kernels_benchmark computes it (its
// activation is activate(), checked below): skipped, naming the package, where it is not
// installed; a failure where it is installed but unusable (not single-threaded, another build).
void expect_cblas_matches_reference(internal::CblasLibrary library) {
  const internal::Cblas& blas = internal::cblas(library);
  if (!blas.installed) GTEST_SKIP() << blas.error;
  ASSERT_TRUE(blas.loaded()) << blas.error;
  for (const Shape& shape : shapes()) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(blas.description + " " + shape.name() + (with_bias ? "" : " no bias"));
      const std::vector<float> x = random_floats(shape.rows * shape.in, 1);
      const std::vector<float> wt = random_floats(shape.in * shape.out, 2);
      const std::vector<float> bias = random_floats(shape.out, 3);
      std::vector<float> y(shape.rows * shape.out + 16, 12345.0f);
      internal::cblas_linear(blas, x.data(), shape.rows, shape.in, wt.data(), with_bias ? bias.data() : nullptr,
                             shape.out, y.data());
      EXPECT_LE(worst_error(shape, x, wt, with_bias ? bias.data() : nullptr, Activation::kIdentity, y), 1.0);
      for (int64_t k = shape.rows * shape.out; k < static_cast<int64_t>(y.size()); ++k) {
        ASSERT_EQ(y[k], 12345.0f) << "wrote past the output at " << k;
      }
    }
  }
}

TEST(FusedKernelsTest, OpenBlasSgemmMatchesADoubleReference) {
  expect_cblas_matches_reference(internal::CblasLibrary::kOpenBlas);
}

TEST(FusedKernelsTest, BlisSgemmMatchesADoubleReference) {
  expect_cblas_matches_reference(internal::CblasLibrary::kBlis);
}

TEST(FusedKernelsTest, LinearRunsTheBestVariantAndAppliesEveryActivation) {
  // linear() on the best variant, and the activations no epilogue fuses (applied after it).
  const Shape shape{10, 20, 30};
  const std::vector<float> x = random_floats(shape.rows * shape.in, 4);
  const std::vector<float> wt = random_floats(shape.in * shape.out, 5);
  const std::vector<float> bias = random_floats(shape.out, 6);
  for (Activation activation : {Activation::kIdentity, Activation::kTanh, Activation::kRelu, Activation::kElu,
                                Activation::kGelu, Activation::kLeakyRelu, Activation::kSigmoid,
                                Activation::kSoftplus}) {
    SCOPED_TRACE(static_cast<int>(activation));
    std::vector<float> y(shape.rows * shape.out);
    linear(x.data(), shape.rows, shape.in, wt.data(), bias.data(), shape.out, y.data(), activation);
    for (int64_t r = 0; r < shape.rows; ++r) {
      for (int64_t o = 0; o < shape.out; ++o) {
        double sum = bias[o];
        for (int64_t i = 0; i < shape.in; ++i) sum += static_cast<double>(x[r * shape.in + i]) * wt[i * shape.out + o];
        EXPECT_NEAR(y[r * shape.out + o], reference_activation(activation, sum), 2e-5);
      }
    }
  }
  EXPECT_NE(internal::linear_variant(internal::detected_isa()), nullptr);
  EXPECT_NE(internal::linear_variant(Isa::kPortable), nullptr);
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(internal::detected_isa(), Isa::kAvx512);
  }
}

TEST(FusedKernelsTest, VectorAndScalarActivationsMatchStdOverADenseRange) {
  std::vector<float> inputs;
  for (float v = -30.0f; v <= 30.0f; v += 0.00731f) inputs.push_back(v);
  for (float v : {0.0f, -0.0f, 0.625f, -0.625f, 0.62499f, 1e-30f, -1e-30f, 88.0f, -88.0f, 100.0f, -100.0f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(),
                  std::numeric_limits<float>::denorm_min()}) {
    inputs.push_back(v);
  }
  std::vector<internal::ActivateFn> variants = {&internal::activate_scalar};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (internal::activate_variant(isa) != nullptr) variants.push_back(internal::activate_variant(isa));
  }
  for (size_t k = 0; k < variants.size(); ++k) {
    for (Activation activation : {Activation::kTanh, Activation::kSigmoid, Activation::kRelu, Activation::kSoftplus}) {
      SCOPED_TRACE("variant " + std::to_string(k) + " activation " + std::to_string(static_cast<int>(activation)));
      std::vector<float> y = inputs;
      variants[k](activation, y.data(), static_cast<int64_t>(y.size()));
      double worst = 0;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const double expected = reference_activation(activation, inputs[i]);
        // Relative 1e-6 (tanh, sigmoid near 1), absolute 1e-7 below (sigmoid's tail is ~1e-38 at -87).
        worst = std::max(worst, std::abs(y[i] - expected) / (1e-6 * std::abs(expected) + 1e-7));
      }
      EXPECT_LE(worst, 1.0);
    }
  }
}

// tanh in ulps of the float result, tiny inputs (where a relative bound is all that holds) and
// the approach to +-1 (where float's spacing is 6e-8) included: within 4 ulp of the double tanh
// on the scalar code and on every vector variant (measured on this grid: 2.8 scalar and AVX2).
TEST(FusedKernelsTest, TanhIsWithinFourUlpOfTheDoubleTanhOnEveryVariant) {
  std::vector<float> inputs;
  for (float v = 1e-38f; v < 12.0f; v *= 1.0002f) inputs.push_back(v);
  for (float v = 0.0f; v < 12.0f; v += 1.1e-5f) inputs.push_back(v);
  const size_t positives = inputs.size();
  for (size_t i = 0; i < positives; ++i) inputs.push_back(-inputs[i]);
  std::vector<internal::ActivateFn> variants = {&internal::activate_scalar};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (internal::activate_variant(isa) != nullptr) variants.push_back(internal::activate_variant(isa));
  }
  for (size_t k = 0; k < variants.size(); ++k) {
    std::vector<float> y = inputs;
    variants[k](Activation::kTanh, y.data(), static_cast<int64_t>(y.size()));
    double worst = 0;
    float worst_at = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const double expected = std::tanh(static_cast<double>(inputs[i]));
      const float rounded = std::abs(static_cast<float>(expected));
      // The spacing of floats at the result (below 1 at 1: tanh never exceeds it).
      const double ulp = rounded >= 1.0f ? 1.0 - std::nextafter(1.0f, 0.0f)
                                         : std::nextafter(rounded, 2.0f) - static_cast<double>(rounded);
      const double error = std::abs(y[i] - expected) / ulp;
      if (error > worst) {
        worst = error;
        worst_at = inputs[i];
      }
    }
    EXPECT_LE(worst, 4.0) << "variant " << k << " at x = " << worst_at;
    std::cout << "[ tanh ] variant " << k << ": at most " << worst << " ulp (at x = " << worst_at << ")\n";
  }
}

TEST(FusedKernelsTest, ScalarLogAndLog1pMatchStd) {
  double worst = 0;
  for (double x = 1e-30; x < 1e30; x *= 1.37) {
    const float f = static_cast<float>(x);
    worst = std::max(worst, std::abs(fast_log(f) - std::log(static_cast<double>(f))) / (1e-7 * std::abs(std::log(f)) + 1e-7));
    // log1p over (0, inf), and over (-1, 0) mirrored below 0.
    worst = std::max(worst, std::abs(fast_log1p(f) - std::log1p(static_cast<double>(f))) /
                                (2e-7 * std::log1p(static_cast<double>(f))));
    if (f < 1.0f) {
      worst = std::max(worst, std::abs(fast_log1p(-f) - std::log1p(-static_cast<double>(f))) /
                                  (2e-7 * std::abs(std::log1p(-static_cast<double>(f)))));
    }
  }
  EXPECT_LE(worst, 1.0);
}

TEST(FusedKernelsTest, SinCosOfTwoPiUIsWithin1e7OfTheDoubleValuesOverEvery24BitUniform) {
  double worst = 0;
  for (uint32_t k = 0; k < (1u << 24); k += 3) {
    const float u = static_cast<float>(k) * (1.0f / 16777216.0f);
    float s, c;
    fast_sincos_2pi(u, s, c);
    const double angle = 2 * M_PI * static_cast<double>(u);
    worst = std::max({worst, std::abs(s - std::sin(angle)), std::abs(c - std::cos(angle))});
  }
  EXPECT_LE(worst, 1e-7);
}

// Box-Muller in double on the same Philox words: the normals every variant must draw.
double reference_normal(uint64_t seed, uint64_t call, uint64_t row, uint32_t block, int k) {
  const auto words = Philox4x32(seed)({static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32),
                                       static_cast<uint32_t>(row), block});
  const double u1 = ((words[k / 2 * 2] >> 8) + 1) / 16777216.0;
  const double u2 = (words[k / 2 * 2 + 1] >> 8) / 16777216.0;
  const double radius = std::sqrt(-2 * std::log(u1));
  return k % 2 == 0 ? radius * std::cos(2 * M_PI * u2) : radius * std::sin(2 * M_PI * u2);
}

TEST(FusedKernelsTest, PhiloxNormalsOfEveryVariantAreBoxMullerOfThePhiloxWords) {
  for (Isa isa : runnable_variants()) {
    const internal::PhiloxNormalsFn normals = internal::philox_normals_variant(isa);
    for (const int64_t rows : {1, 3, 16, 21, 64}) {
      for (const int64_t d : {1, 2, 3, 4, 6, 9}) {
        // A call past 2^32 and rows across 2^32: both counter words are the row's and the call's.
        for (const auto& [call, first_row] :
             std::vector<std::pair<uint64_t, uint64_t>>{{0, 0}, {7, 100}, {(1ull << 32) + 5, (1ull << 32) - 9}}) {
          SCOPED_TRACE(std::string(internal::isa_name(isa)) + " rows " + std::to_string(rows) + " d " +
                       std::to_string(d) + " call " + std::to_string(call));
          std::vector<float> out(rows * d + 1, std::numeric_limits<float>::quiet_NaN());
          normals(42, call, first_row, rows, 3, d, out.data());
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < d; ++j) {
              const double expected =
                  reference_normal(42, call, first_row + r, 3 + static_cast<uint32_t>(j / 4), static_cast<int>(j % 4));
              // sqrt(-2 log u1) magnifies log's relative error where u1 is near 1.
              ASSERT_NEAR(out[r * d + j], expected, 2e-6 * std::max(1.0, std::abs(expected))) << r << " " << j;
            }
          }
          EXPECT_TRUE(std::isnan(out[rows * d])) << "wrote past the rows";
        }
      }
    }
  }
}

// Short tails and batches of one take the scalar twin of the vector code: the same bits, so a
// row draws the same action whatever batch it comes in.
TEST(FusedKernelsTest, DrawsOfARowAreTheSameBitsAloneAndInABatch) {
  for (Isa isa : runnable_variants()) {
    SCOPED_TRACE(internal::isa_name(isa));
    const int64_t rows = 37, d = 3;
    std::vector<float> batch(rows * d), alone(d);
    internal::philox_normals_variant(isa)(9, 4, 1000, rows, 2, d, batch.data());
    const std::vector<float> loc = random_floats(rows * d, 1), eps = batch;
    std::vector<float> scale = random_floats(rows * d, 2);
    for (float& s : scale) s = std::abs(s) + 0.1f;
    GaussianDraw g;
    g.tanh = true;
    g.half = 2;
    g.log_half = static_cast<float>(std::log(2.0));
    std::vector<float> sample(rows * d), log_prob(rows * d);
    internal::gaussian_draw_variant(isa)(g, loc.data(), scale.data(), eps.data(), rows * d, sample.data(),
                                         log_prob.data());
    for (int64_t r = 0; r < rows; ++r) {
      internal::philox_normals_variant(isa)(9, 4, 1000 + r, 1, 2, d, alone.data());
      for (int64_t j = 0; j < d; ++j) {
        ASSERT_EQ(alone[j], batch[r * d + j]) << r << " " << j;
        float one_sample, one_log_prob;
        internal::gaussian_draw_variant(isa)(g, &loc[r * d + j], &scale[r * d + j], &eps[r * d + j], 1, &one_sample,
                                             &one_log_prob);
        ASSERT_EQ(one_sample, sample[r * d + j]) << r << " " << j;
        ASSERT_EQ(one_log_prob, log_prob[r * d + j]) << r << " " << j;
      }
    }
  }
}

TEST(FusedKernelsTest, PhiloxUniformsOfEveryVariantAreTheFirstPhiloxWordExactly) {
  for (Isa isa : runnable_variants()) {
    for (const int64_t rows : {1, 3, 16, 21, 64}) {
      for (const uint64_t first_row : {uint64_t{0}, uint64_t{77}, (uint64_t{1} << 32) - 9}) {
        SCOPED_TRACE(std::string(internal::isa_name(isa)) + " rows " + std::to_string(rows));
        std::vector<float> out(rows + 1, std::numeric_limits<float>::quiet_NaN());
        internal::philox_uniforms_variant(isa)(42, (uint64_t{1} << 32) + 6, first_row, rows, 5, out.data());
        for (int64_t r = 0; r < rows; ++r) {
          const auto words = Philox4x32(42)({6, 1, static_cast<uint32_t>(first_row + r), 5});
          ASSERT_EQ(out[r], uniform01(words[0])) << r;
        }
        EXPECT_TRUE(std::isnan(out[rows])) << "wrote past the rows";
      }
    }
  }
}

TEST(FusedKernelsTest, PhiloxNormalsAreStandardNormalOver2e5Values) {
  const int64_t rows = 64, d = 4, tiles = 800;
  double sum = 0, sum2 = 0, sum4 = 0;
  int64_t beyond3 = 0, n = 0;
  std::vector<float> out(rows * d);
  for (int64_t t = 0; t < tiles; ++t) {
    philox_normals(5, 11, static_cast<uint64_t>(t * rows), rows, 0, d, out.data());
    for (const float z : out) {
      sum += z;
      sum2 += z * z;
      sum4 += static_cast<double>(z) * z * z * z;
      beyond3 += std::abs(z) > 3;
      ++n;
    }
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(static_cast<double>(n)));
  EXPECT_NEAR(var, 1.0, 0.01);
  EXPECT_NEAR(sum4 / n, 3.0, 0.05);  // the kurtosis of a normal
  // P(|z| > 3) = 0.0026998, about 550 of 204800: within 5 standard deviations.
  EXPECT_NEAR(static_cast<double>(beyond3) / n, 0.0026998, 5 * std::sqrt(0.0027 / n));
}

TEST(FusedKernelsTest, GaussianDrawOfEveryVariantMatchesADoubleReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> positive(0.05f, 2.0f);
  for (Isa isa : runnable_variants()) {
    for (const int64_t n : {1, 5, 16, 33, 64}) {
      for (int kind = 0; kind < 4; ++kind) {
        // Normal; TanhNormal on [-1, 1]; on [-3, 1]; safe on [-2, 2].
        GaussianDraw g;
        g.tanh = kind > 0;
        if (kind == 2) {
          g.half = 2;
          g.shift = -1;
          g.log_half = static_cast<float>(std::log(2.0));
        }
        if (kind == 3) {
          g.safe_tanh = true;
          g.half = 2;
          g.log_half = static_cast<float>(std::log(2.0));
        }
        SCOPED_TRACE(std::string(internal::isa_name(isa)) + " n " + std::to_string(n) + " kind " +
                     std::to_string(kind));
        std::vector<float> loc(n), scale(n), eps(n), sample(n), log_prob(n), alone(n);
        for (int64_t i = 0; i < n; ++i) {
          loc[i] = normal(rng);
          scale[i] = positive(rng);
          eps[i] = 2 * normal(rng);
        }
        internal::gaussian_draw_variant(isa)(g, loc.data(), scale.data(), eps.data(), n, sample.data(),
                                             log_prob.data());
        internal::gaussian_draw_variant(isa)(g, loc.data(), scale.data(), eps.data(), n, alone.data(), nullptr);
        for (int64_t i = 0; i < n; ++i) {
          const double x = static_cast<double>(eps[i]) * scale[i] + loc[i];
          double y = x, lp = -0.5 * ((x - loc[i]) / scale[i]) * ((x - loc[i]) / scale[i]) - std::log(scale[i]) -
                             0.5 * std::log(2 * M_PI);
          if (g.tanh) {
            y = std::tanh(x);
            if (g.safe_tanh) y = std::clamp(y, -1 + 1e-6, 1 - 1e-6);
            y = y * g.half + g.shift;
            lp -= std::log(1 - std::tanh(x) * std::tanh(x)) + std::log(g.half);
          }
          EXPECT_NEAR(sample[i], y, 1e-6 * std::max(1.0, std::abs(y))) << i;
          EXPECT_EQ(alone[i], sample[i]) << i;
          // The Jacobian term is computed stably; the double reference loses digits where tanh
          // saturates, so compare there only where 1 - tanh^2 keeps its precision.
          if (!g.tanh || std::abs(x) < 4) {
            EXPECT_NEAR(log_prob[i], lp, 2e-5 * std::max(1.0, std::abs(lp))) << i << " x " << x;
          }
          EXPECT_TRUE(std::isfinite(log_prob[i])) << i;
        }
      }
    }
  }
}

// A categorical head's log-softmax and masses against double, rows 1 to past the kernel's 64-row
// pass, with -inf classes (mass 0, log-prob -inf), a class far below the maximum (mass 0) and a
// NaN row (all NaN, its neighbours untouched); a row's values have the same bits alone and in a
// batch.
TEST(FusedKernelsTest, LogSoftmaxOfEveryVariantMatchesADoubleReference) {
  const float inf = std::numeric_limits<float>::infinity();
  for (Isa isa : runnable_variants()) {
    const internal::LogSoftmaxFn log_softmax_fn = internal::log_softmax_variant(isa);
    for (int64_t d : {1, 2, 3, 4, 6, 17}) {
      for (int64_t rows : {1, 2, 5, 16, 64, 70}) {
        SCOPED_TRACE(std::string(internal::isa_name(isa)) + " d " + std::to_string(d) + " rows " +
                     std::to_string(rows));
        std::vector<float> x = random_floats(rows * d, static_cast<uint32_t>(d * 100 + rows));
        for (float& v : x) v *= 8.0f;
        if (d > 1) x[0 * d + 1] = -inf;
        if (d > 2 && rows > 1) x[1 * d + 2] = x[1 * d] - 100.0f;
        const int64_t nan_row = rows > 3 ? 3 : -1;
        if (nan_row >= 0) x[nan_row * d] = std::numeric_limits<float>::quiet_NaN();
        std::vector<float> log_p(rows * d), mass(rows * d);
        log_softmax_fn(x.data(), rows, d, log_p.data(), mass.data());
        for (int64_t r = 0; r < rows; ++r) {
          if (r == nan_row) {
            for (int64_t k = 0; k < d; ++k) EXPECT_TRUE(std::isnan(log_p[r * d + k])) << r << " " << k;
            continue;
          }
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t k = 0; k < d; ++k) m = std::max(m, static_cast<double>(x[r * d + k]));
          // x - max rounds to float first, in the kernels as in LibTorch's log_softmax.
          auto shifted = [&](int64_t k) { return static_cast<double>(x[r * d + k] - static_cast<float>(m)); };
          double total = 0;
          for (int64_t k = 0; k < d; ++k) total += std::exp(shifted(k));
          for (int64_t k = 0; k < d; ++k) {
            const double expected_mass = std::exp(shifted(k));
            const double expected_log_p = x[r * d + k] - m - std::log(total);
            if (expected_mass < 1e-38) {
              EXPECT_EQ(mass[r * d + k], 0.0f) << r << " " << k;
            } else {
              EXPECT_NEAR(mass[r * d + k], expected_mass, 3e-7 * expected_mass) << r << " " << k;
            }
            if (std::isinf(expected_log_p)) {
              EXPECT_EQ(log_p[r * d + k], -inf) << r << " " << k;
            } else {
              EXPECT_NEAR(log_p[r * d + k], expected_log_p, 1e-6 * (std::abs(expected_log_p) + 1)) << r << " " << k;
            }
          }
        }
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> one_log_p(d), one_mass(d);
          log_softmax_fn(&x[r * d], 1, d, one_log_p.data(), one_mass.data());
          for (int64_t k = 0; k < d; ++k) {
            ASSERT_EQ(std::isnan(one_log_p[k]), std::isnan(log_p[r * d + k])) << r << " " << k;
            if (!std::isnan(one_log_p[k])) {
              ASSERT_EQ(one_log_p[k], log_p[r * d + k]) << r << " " << k;
            }
            if (!std::isnan(one_mass[k])) {
              ASSERT_EQ(one_mass[k], mass[r * d + k]) << r << " " << k;
            }
          }
        }
      }
    }
  }
}

TEST(FusedKernelsTest, NonFiniteValuesPropagateAsThroughLibTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Activations: NaN stays NaN, +-inf saturates (tanh +-1, sigmoid 1 / 0, relu and softplus inf / 0).
  std::vector<internal::ActivateFn> variants = {&internal::activate_scalar};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (internal::activate_variant(isa) != nullptr) variants.push_back(internal::activate_variant(isa));
  }
  for (size_t k = 0; k < variants.size(); ++k) {
    SCOPED_TRACE("variant " + std::to_string(k));
    // 17 values: both the full vectors and the masked tail of each variant.
    std::vector<float> values(17, nan);
    values[1] = inf;
    values[2] = -inf;
    values[16] = nan;
    std::vector<float> t = values, s = values, r = values, p = values;
    variants[k](Activation::kTanh, t.data(), 17);
    variants[k](Activation::kSigmoid, s.data(), 17);
    variants[k](Activation::kRelu, r.data(), 17);
    variants[k](Activation::kSoftplus, p.data(), 17);
    for (int i : {0, 3, 15, 16}) {
      EXPECT_TRUE(std::isnan(t[i])) << i;
      EXPECT_TRUE(std::isnan(s[i])) << i;
      EXPECT_TRUE(std::isnan(r[i])) << i;
      EXPECT_TRUE(std::isnan(p[i])) << i;
    }
    EXPECT_EQ(p[1], inf);
    EXPECT_NEAR(p[2], 0.0f, 1e-37f);
    EXPECT_EQ(t[1], 1.0f);
    EXPECT_EQ(t[2], -1.0f);
    EXPECT_EQ(s[1], 1.0f);
    EXPECT_NEAR(s[2], 0.0f, 1e-37f);
    EXPECT_EQ(r[1], inf);
    EXPECT_EQ(r[2], 0.0f);
  }
  EXPECT_TRUE(std::isnan(fast_exp(nan)));
  EXPECT_TRUE(std::isnan(fast_log1p(nan)));
  EXPECT_TRUE(std::isnan(fast_tanh(nan)));
  EXPECT_TRUE(std::isnan(fast_sigmoid(nan)));
  EXPECT_EQ(fast_tanh(inf), 1.0f);
  EXPECT_EQ(fast_tanh(-inf), -1.0f);

  // Linear: a NaN in row 2's input makes every output of row 2 NaN, under every epilogue, and
  // leaves the other rows as they were; the same for each path (narrow and column blocks).
  for (Isa isa : runnable_variants()) {
    for (const Shape& shape : {Shape{9, 12, 2}, Shape{9, 12, 64}, Shape{9, 12, 21}, Shape{1, 40, 1}}) {
      for (Activation activation : {Activation::kIdentity, Activation::kTanh, Activation::kRelu,
                                    Activation::kSigmoid, Activation::kSoftplus}) {
        SCOPED_TRACE(std::string(internal::isa_name(isa)) + " " + shape.name() + " activation " +
                     std::to_string(static_cast<int>(activation)));
        const int64_t bad = shape.rows > 2 ? 2 : 0;
        std::vector<float> x = random_floats(shape.rows * shape.in, 7);
        const std::vector<float> wt = random_floats(shape.in * shape.out, 8);
        const std::vector<float> bias = random_floats(shape.out, 9);
        std::vector<float> clean(shape.rows * shape.out), y(shape.rows * shape.out);
        internal::linear_variant(isa)(x.data(), shape.rows, shape.in, wt.data(), bias.data(), shape.out, clean.data(),
                                      activation);
        x[bad * shape.in + shape.in - 1] = nan;
        internal::linear_variant(isa)(x.data(), shape.rows, shape.in, wt.data(), bias.data(), shape.out, y.data(),
                                      activation);
        for (int64_t r = 0; r < shape.rows; ++r) {
          for (int64_t o = 0; o < shape.out; ++o) {
            if (r == bad) {
              EXPECT_TRUE(std::isnan(y[r * shape.out + o])) << "row " << r << " output " << o;
            } else {
              EXPECT_EQ(y[r * shape.out + o], clean[r * shape.out + o]) << "row " << r << " output " << o;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tdp::fused
