// TorchRL's TanhDelta and TruncatedNormal (tanh_delta, torchrl_truncated_normal) against values
// computed by the venv's TorchRL 0.13.3, printed by
//   ~/.cache/tdpolicy/venv/bin/python tests/distributions/make_torchrl_bounded_golden.py
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>
#include <vector>

#include "sdk/distributions/registry.h"
#include "sdk/distributions/tanh_delta.h"
#include "sdk/distributions/torchrl_truncated_normal.h"
#include "tests/testing/error_of.h"

namespace tdp::dist {
namespace {

using test_util::error_of;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

at::Tensor values(std::vector<float> v, std::vector<int64_t> shape) { return at::tensor(v, at::kFloat).reshape(shape); }

// Finite entries to 1e-6 (relative to 1), infinities exactly.
void expect_near(const at::Tensor& got, std::vector<double> want) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  const at::Tensor flat = got.to(at::kDouble).reshape({-1});
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = flat[static_cast<int64_t>(i)].item<double>();
    if (std::isinf(want[i])) {
      EXPECT_EQ(g, want[i]) << "entry " << i;
    } else {
      EXPECT_NEAR(g, want[i], 1e-6 * std::max(1.0, std::abs(want[i]))) << "entry " << i;
    }
  }
}

const at::Tensor kParam = values({0.3f, -1.2f, 2.5f, -0.7f, 0.05f, -3.0f}, {2, 3});
const at::Tensor kScale = values({0.5f, 1.0f, 0.2f, 2.0f, 0.1f, 0.7f}, {2, 3});
const at::Tensor kLow = values({-1.0f, -2.0f, 0.5f}, {3});
const at::Tensor kHigh = values({1.0f, 0.5f, 3.0f}, {3});

TEST(TanhDelta, TensorBoundsMatchTorchRL) {
  TanhDelta d(kParam, TanhDeltaOptions().low(kLow).high(kHigh));
  const at::Tensor mode = d.mode();
  expect_near(mode, {0.291312575, -1.95039928, 2.99949145, -0.604367793, -1.50545979, 0.68964541});
  EXPECT_TRUE(d.deterministic_sample().equal(mode));
  EXPECT_EQ(d.sample({4}).sizes(), (std::vector<int64_t>{4, 2, 3}));
  // The first row's round trip through atanh misses param by more than atol: -inf, as in TorchRL.
  expect_near(d.log_prob(mode), {-kInf, kInf});
  expect_near(d.log_prob(mode + 0.1), {-kInf, -kInf});
  EXPECT_THAT(error_of<NotImplementedError>([&] { d.mean(); }), HasSubstr("TanhDelta mean has not analytical form"));
}

TEST(TanhDelta, NumberBoundsAndRegistry) {
  DistributionPtr d = make_distribution("tanh_delta", {{"param", kParam}}, {{"low", -2.0}, {"high", 2.0}});
  expect_near(d->deterministic_sample(),
              {0.582625151, -1.66730928, 1.97322857, -1.20873559, 0.0999166518, -1.99010956});
  // A tensor bound and a number bound together.
  DistributionPtr mixed = make_distribution("tanh_delta", {{"param", kParam}, {"low", kLow}}, {{"high", 4.0}});
  EXPECT_EQ(mixed->name(), "TanhDelta");
  EXPECT_THAT(error_of<std::invalid_argument>([&] { TanhDelta(kParam, TanhDeltaOptions().low(1.0).high(1.0)); }),
              HasSubstr("high value has been found to be equal or less than low value"));
}

TEST(TorchRLTruncatedNormal, TanhLocMatchesTorchRL) {
  DistributionPtr d = make_distribution("torchrl_truncated_normal", {{"loc", kParam}, {"scale", kScale}},
                                        {{"low", -1.5}, {"high", 2.0}, {"tanh_loc", true}, {"upscale", 3.0}});
  expect_near(d->mean(), {0.298700035, -0.559959829, 1.85627937, 0.0361816287, 0.0499953777, -1.14869237});
  expect_near(d->deterministic_sample(),
              {0.298700035, -0.559959829, 1.85627937, 0.0361816287, 0.0499953777, -1.14869237});
  expect_near(d->mode(), {0.299003989, -1.13984692, 1.99999905, -0.687566996, 0.0499953777, -1.49999905});
  expect_near(d->log_prob(values({0.1f, -1.0f, 1.9f, -1.4f, 0.0f, 2.5f}, {2, 3})), {0.532239556, -kInf});
  EXPECT_EQ(d->batch_shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(d->sample({5}).sizes(), (std::vector<int64_t>{5, 2, 3}));
}

TEST(TorchRLTruncatedNormal, TensorBoundsMatchTorchRL) {
  TorchRLTruncatedNormal d(kParam, kScale, TorchRLTruncatedNormalOptions().low(kLow).high(kHigh));
  expect_near(d.mean(), {0.225570112, -0.9368909, 2.49647236, -0.0563045144, 0.0499984026, -1.95929635});
  expect_near(d.mode(), {0.300000012, -1.20000005, 2.5, -0.699999988, 0.0500000007, 0.500001013});
  expect_near(d.log_prob(values({0.1f, -1.0f, 1.9f, -0.9f, 0.4f, 0.6f}, {2, 3})), {-4.66243219, -5.31344128});
  EXPECT_THAT(error_of<std::invalid_argument>([&] {
                TorchRLTruncatedNormal(kParam, kScale, TorchRLTruncatedNormalOptions().low(kHigh).high(kLow));
              }),
              HasSubstr("high values must be strictly greater than low values"));
}

TEST(Registry, TensorKwargsArePassedAsParameters) {
  // tanh_normal takes one bound as a tensor and the other as a number.
  DistributionPtr d =
      make_distribution("tanh_normal", {{"loc", kParam}, {"scale", kScale}, {"high", kHigh}}, {{"low", -3.0}});
  EXPECT_EQ(d->name(), "TanhNormal");
  EXPECT_THAT(error_of<std::invalid_argument>([&] {
                make_distribution("tanh_delta", {{"param", kParam}, {"scale", kScale}});
              }),
              HasSubstr("tanh_delta: expected parameters"));
}

}  // namespace
}  // namespace tdp::dist
