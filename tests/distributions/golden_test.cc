// Every distribution against the class that defines it (torch.distributions, tensordict's
// tensordict.nn.distributions, TorchRL's TanhNormal), at float32 and float64, as written by
// tests/golden/make_distribution_golden.py. Where tdp::dist deliberately differs from that class,
// the test checks the C++ rule and says what the reference does and why.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <gtest/gtest.h>

#include <memory>

#include "sdk/distributions/bernoulli.h"
#include "sdk/distributions/beta.h"
#include "sdk/distributions/categorical.h"
#include "sdk/distributions/delta.h"
#include "sdk/distributions/independent.h"
#include "sdk/distributions/normal.h"
#include "sdk/distributions/one_hot_categorical.h"
#include "sdk/distributions/tanh_normal.h"
#include "sdk/distributions/truncated_normal.h"
#include "sdk/distributions/uniform.h"
#include "tests/distributions/golden.h"

namespace tdp::dist {
namespace {

using testing::Golden;
using testing::TensorsClose;

class GoldenTest : public testing::GoldenDtypeTest {};

TEST_P(GoldenTest, Normal) {
  Normal d(g("normal", "loc"), g("normal", "scale"));
  const at::Tensor value = g("normal", "value");
  EXPECT_TRUE(TensorsClose(d.log_prob(value), g("normal", "log_prob")));
  EXPECT_TRUE(TensorsClose(d.entropy(), g("normal", "entropy")));
  EXPECT_TRUE(TensorsClose(d.mean(), g("normal", "mean")));
  EXPECT_TRUE(TensorsClose(d.mode(), g("normal", "mode")));
  EXPECT_TRUE(TensorsClose(d.stddev(), g("normal", "stddev")));
  EXPECT_TRUE(TensorsClose(d.variance(), g("normal", "variance")));
  EXPECT_TRUE(TensorsClose(d.cdf(value), g("normal", "cdf")));
  EXPECT_TRUE(TensorsClose(d.icdf(g("normal", "q")), g("normal", "icdf")));
  EXPECT_TRUE(TensorsClose(d.deterministic_sample(), g("normal", "mean")));
}

TEST_P(GoldenTest, IndependentNormal) {
  auto base = std::make_shared<Normal>(g("normal", "loc"), g("normal", "scale"));
  Independent d(base, 1);
  EXPECT_EQ(d.batch_shape(), std::vector<int64_t>({2}));
  EXPECT_EQ(d.event_shape(), std::vector<int64_t>({3}));
  EXPECT_TRUE(TensorsClose(d.log_prob(g("normal", "value")), g("independent_normal", "log_prob")));
  EXPECT_TRUE(TensorsClose(d.entropy(), g("independent_normal", "entropy")));
  EXPECT_TRUE(TensorsClose(d.mean(), g("normal", "mean")));
}

TEST_P(GoldenTest, Categorical) {
  for (const std::string c : {"categorical_logits", "categorical_probs"}) {
    SCOPED_TRACE(c);
    Categorical d = c == "categorical_logits" ? Categorical::from_logits(g(c, "param"))
                                              : Categorical::from_probs(g(c, "param"));
    EXPECT_TRUE(TensorsClose(d.log_prob(g(c, "value")), g(c, "log_prob")));
    EXPECT_TRUE(TensorsClose(d.entropy(), g(c, "entropy")));
    EXPECT_TRUE(TensorsClose(d.mode(), g(c, "mode")));
    EXPECT_TRUE(TensorsClose(d.probs(), g(c, "probs")));
    EXPECT_TRUE(TensorsClose(d.logits(), g(c, "logits")));
    EXPECT_TRUE(TensorsClose(d.deterministic_sample(), g(c, "mode")));
    EXPECT_TRUE(d.mean().isnan().all().item<bool>());
  }
}

TEST_P(GoldenTest, OneHotCategorical) {
  const std::string c = "one_hot_categorical";
  auto d = OneHotCategorical::from_logits(g(c, "logits"));
  EXPECT_EQ(d.batch_shape(), std::vector<int64_t>({2}));
  EXPECT_TRUE(TensorsClose(d.log_prob(g(c, "value")), g(c, "log_prob")));
  EXPECT_TRUE(TensorsClose(d.entropy(), g(c, "entropy")));
  EXPECT_TRUE(TensorsClose(d.mode(), g(c, "mode")));
  EXPECT_TRUE(TensorsClose(d.deterministic_sample(), g(c, "deterministic_sample")));
  EXPECT_TRUE(TensorsClose(d.probs(), g(c, "probs")));
  // Deliberate difference: event_shape, mean and variance follow
  // torch.distributions.OneHotCategorical (event_shape [4]; mean = probs, variance =
  // probs * (1 - probs), the moments of the one-hot vector), which the "mean" and "variance"
  // records come from. tensordict's OneHotCategorical subclasses Categorical and inherits its
  // event_shape [] and its mean and variance: NaN, one per batch element (recorded as
  // tensordict_mean / tensordict_variance). Those are Categorical's placeholders for a class
  // index, not moments of the one-hot values the distribution produces and scores; the C++
  // returns the one-hot moments instead, which are finite and have the sample's shape.
  EXPECT_TRUE(at::tensor(d.event_shape(), at::kLong).equal(g(c, "event_shape")));
  EXPECT_TRUE(TensorsClose(d.mean(), g(c, "mean")));
  EXPECT_TRUE(TensorsClose(d.variance(), g(c, "variance")));
  EXPECT_EQ(g(c, "tensordict_event_shape").numel(), 0);
  EXPECT_EQ(g(c, "tensordict_mean").sizes().vec(), std::vector<int64_t>({2}));
  EXPECT_TRUE(g(c, "tensordict_mean").isnan().all().item<bool>());
  EXPECT_TRUE(g(c, "tensordict_variance").isnan().all().item<bool>());
}

TEST_P(GoldenTest, Bernoulli) {
  for (const std::string c : {"bernoulli_probs", "bernoulli_logits"}) {
    SCOPED_TRACE(c);
    Bernoulli d = c == "bernoulli_probs" ? Bernoulli::from_probs(g(c, "param"))
                                         : Bernoulli::from_logits(g(c, "param"));
    EXPECT_TRUE(TensorsClose(d.log_prob(g(c, "value")), g(c, "log_prob")));
    EXPECT_TRUE(TensorsClose(d.entropy(), g(c, "entropy")));
    EXPECT_TRUE(TensorsClose(d.mean(), g(c, "mean")));
    EXPECT_TRUE(TensorsClose(d.mode(), g(c, "mode")));
    EXPECT_TRUE(TensorsClose(d.variance(), g(c, "variance")));
  }
}

TEST_P(GoldenTest, Beta) {
  Beta d(g("beta", "concentration1"), g("beta", "concentration0"));
  EXPECT_TRUE(TensorsClose(d.log_prob(g("beta", "value")), g("beta", "log_prob")));
  EXPECT_TRUE(TensorsClose(d.entropy(), g("beta", "entropy")));
  EXPECT_TRUE(TensorsClose(d.mean(), g("beta", "mean")));
  EXPECT_TRUE(TensorsClose(d.mode(), g("beta", "mode")));
  EXPECT_TRUE(TensorsClose(d.variance(), g("beta", "variance")));
}

TEST_P(GoldenTest, Uniform) {
  Uniform d(g("uniform", "low"), g("uniform", "high"));
  const at::Tensor value = g("uniform", "value");
  EXPECT_TRUE(TensorsClose(d.log_prob(value), g("uniform", "log_prob")));
  EXPECT_TRUE(TensorsClose(d.entropy(), g("uniform", "entropy")));
  EXPECT_TRUE(TensorsClose(d.mean(), g("uniform", "mean")));
  EXPECT_TRUE(TensorsClose(d.stddev(), g("uniform", "stddev")));
  EXPECT_TRUE(TensorsClose(d.variance(), g("uniform", "variance")));
  EXPECT_TRUE(TensorsClose(d.cdf(value), g("uniform", "cdf")));
  EXPECT_TRUE(TensorsClose(d.icdf(g("uniform", "q")), g("uniform", "icdf")));
  EXPECT_TRUE(d.mode().isnan().all().item<bool>());
}

TEST_P(GoldenTest, Delta) {
  Delta d(g("delta", "param"));
  EXPECT_TRUE(at::tensor(d.batch_shape(), at::kLong).equal(g("delta", "batch_shape")));
  EXPECT_TRUE(at::tensor(d.event_shape(), at::kLong).equal(g("delta", "event_shape")));
  EXPECT_TRUE(TensorsClose(d.log_prob(g("delta", "value")), g("delta", "log_prob")));
  EXPECT_TRUE(TensorsClose(d.mode(), g("delta", "mode")));
  EXPECT_TRUE(TensorsClose(d.mean(), g("delta", "mean")));
  EXPECT_TRUE(TensorsClose(d.deterministic_sample(), g("delta", "deterministic_sample")));
  EXPECT_TRUE(TensorsClose(d.sample({2}), g("delta", "sample")));
}

TEST_P(GoldenTest, TruncatedNormal) {
  const std::string c = "truncated_normal";
  TruncatedNormal d(g(c, "loc"), g(c, "scale"), g(c, "a"), g(c, "b"));
  const at::Tensor value = g(c, "value");
  EXPECT_TRUE(TensorsClose(d.log_prob(value), g(c, "log_prob")));
  EXPECT_TRUE(TensorsClose(d.entropy(), g(c, "entropy")));
  EXPECT_TRUE(TensorsClose(d.mean(), g(c, "mean")));
  EXPECT_TRUE(TensorsClose(d.variance(), g(c, "variance")));
  EXPECT_TRUE(TensorsClose(d.cdf(value), g(c, "cdf")));
  EXPECT_TRUE(TensorsClose(d.icdf(g(c, "q")), g(c, "icdf")));
  EXPECT_TRUE(TensorsClose(d.auc(), g(c, "auc")));
  // tensordict's deterministic choice for TruncatedNormal is the mean (its
  // DETERMINISTIC_REGISTER). tensordict defines no mode (NotImplementedError); the C++ mode, loc
  // clamped into [low, high], is a tdpolicy addition with no reference to compare against.
  EXPECT_TRUE(TensorsClose(d.deterministic_sample(), g(c, "mean")));
}

TEST_P(GoldenTest, TruncatedStandardNormal) {
  const std::string c = "truncated_standard_normal";
  TruncatedStandardNormal d(g("truncated_normal", "a"), g("truncated_normal", "b"));
  const at::Tensor value = g("truncated_normal", "value");
  EXPECT_TRUE(TensorsClose(d.log_prob(value.clamp(-1, 1)), g(c, "log_prob")));
  EXPECT_TRUE(TensorsClose(d.entropy(), g(c, "entropy")));
  EXPECT_TRUE(TensorsClose(d.mean(), g(c, "mean")));
  EXPECT_TRUE(TensorsClose(d.variance(), g(c, "variance")));
  EXPECT_TRUE(TensorsClose(d.cdf(value), g(c, "cdf")));
  EXPECT_TRUE(TensorsClose(d.icdf(g("truncated_normal", "q")), g(c, "icdf")));
  EXPECT_TRUE(TensorsClose(d.auc(), g(c, "auc")));
}

TEST_P(GoldenTest, TanhNormal) {
  TanhNormal d(g("tanh_normal", "loc"), g("tanh_normal", "scale"));
  EXPECT_EQ(d.batch_shape(), std::vector<int64_t>({2}));
  EXPECT_EQ(d.event_shape(), std::vector<int64_t>({3}));
  EXPECT_TRUE(TensorsClose(d.log_prob(g("tanh_normal", "value")), g("tanh_normal", "log_prob")));
  EXPECT_TRUE(TensorsClose(d.deterministic_sample(), g("tanh_normal", "deterministic_sample")));
}

TEST_P(GoldenTest, TanhNormalBoundedWithTanhLoc) {
  const std::string c = "tanh_normal_bounded";
  TanhNormal d(g("tanh_normal", "loc"), g("tanh_normal", "scale"),
               TanhNormalOptions().low(g(c, "low")).high(g(c, "high")).upscale(3.0).tanh_loc(true));
  EXPECT_TRUE(TensorsClose(d.log_prob(g(c, "value")), g(c, "log_prob")));
  EXPECT_TRUE(TensorsClose(d.deterministic_sample(), g(c, "deterministic_sample")));
}

TEST_P(GoldenTest, TanhNormalEventDimsZero) {
  const std::string c = "tanh_normal_bounded";
  TanhNormal d(g("tanh_normal", "loc"), g("tanh_normal", "scale"),
               TanhNormalOptions().low(g(c, "low")).high(g(c, "high")).event_dims(0));
  EXPECT_TRUE(TensorsClose(d.log_prob(g(c, "value")), g("tanh_normal_event_dims_0", "log_prob")));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GoldenTest, ::testing::Values("f32", "f64"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tdp::dist

namespace tdp::dist {
namespace {

// The comparison the golden tests rely on must be able to fail.
TEST(TensorsClose, RejectsWhatDiffers) {
  const at::Tensor a = at::tensor({1.0f, 2.0f});
  EXPECT_TRUE(testing::TensorsClose(a, a.clone()));
  EXPECT_FALSE(testing::TensorsClose(a, at::tensor({1.0f, 2.001f})));
  EXPECT_FALSE(testing::TensorsClose(a, at::tensor({1.0f, 2.0f, 3.0f})));
  EXPECT_FALSE(testing::TensorsClose(a, a.to(at::kDouble)));
  EXPECT_FALSE(testing::TensorsClose(at::tensor({1.0f, NAN}), at::tensor({1.0f, 2.0f})));
  EXPECT_FALSE(testing::TensorsClose(at::tensor({1.0f, 2.0f}), at::tensor({1.0f, NAN})));
  EXPECT_TRUE(testing::TensorsClose(at::tensor({INFINITY, NAN}), at::tensor({INFINITY, NAN})));
  EXPECT_FALSE(testing::TensorsClose(at::tensor({-INFINITY}), at::tensor({INFINITY})));
  EXPECT_FALSE(testing::TensorsClose(at::tensor({1.0, 2.0}), at::tensor({1.0, 2.0 + 1e-9})));
  EXPECT_GT(Golden::get().size(), 200u);
}

}  // namespace
}  // namespace tdp::dist
