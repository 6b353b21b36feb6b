// Sampling: the reference classes' seeded draws (torch, tensordict, TorchRL) reproduced bit
// for bit, moments of 100k seeded samples, reproducibility per generator, and gradients
// through rsample.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
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
#include "tests/testing/random.h"

namespace tdp::dist {
namespace {

using testing::TensorsClose;
using test_util::seeded;

at::Tensor f64(std::vector<double> values) { return at::tensor(values, at::kDouble); }

constexpr int64_t kN = 100000;

// Sample mean within 5 standard errors, sample variance within 3% of `variance`.
void expect_moments(const at::Tensor& samples, const at::Tensor& mean, const at::Tensor& variance) {
  at::Tensor x = samples.detach().to(at::kDouble);
  at::Tensor m = x.mean(0);
  at::Tensor v = x.var(0);
  at::Tensor mean_tol = 5 * (variance.to(at::kDouble) / x.size(0)).sqrt() + 1e-9;
  EXPECT_TRUE(((m - mean.to(at::kDouble)).abs() <= mean_tol).all().item<bool>())
      << "sample mean " << m << " vs " << mean;
  EXPECT_TRUE(((v - variance.to(at::kDouble)).abs() <= 0.03 * variance.to(at::kDouble) + 1e-9)
                  .all()
                  .item<bool>())
      << "sample variance " << v << " vs " << variance;
}

// ---- the reference classes' own seeded draws (torch, tensordict, TorchRL) ---------------------

class GoldenSamplesTest : public testing::GoldenDtypeTest {};

TEST_P(GoldenSamplesTest, MatchPyTorchDrawsForTheSameSeed) {
  Normal normal(g("normal", "loc"), g("normal", "scale"));
  EXPECT_TRUE(TensorsClose(normal.sample({2}, seeded(7)), g("samples_normal_sample", "value")));
  EXPECT_TRUE(TensorsClose(normal.rsample({2}, seeded(8)), g("samples_normal_rsample", "value")));

  const at::Tensor logits = g("one_hot_categorical", "logits");
  EXPECT_TRUE(TensorsClose(Categorical::from_logits(logits).sample({3}, seeded(9)),
                           g("samples_categorical", "value")));
  EXPECT_TRUE(TensorsClose(OneHotCategorical::from_logits(logits).sample({3}, seeded(10)),
                           g("samples_one_hot_categorical", "value")));
  EXPECT_TRUE(TensorsClose(Bernoulli::from_probs(g("bernoulli_probs", "param")).sample({3}, seeded(11)),
                           g("samples_bernoulli", "value")));
  Beta beta(g("beta", "concentration1"), g("beta", "concentration0"));
  EXPECT_TRUE(TensorsClose(beta.rsample({3}, seeded(12)), g("samples_beta", "value")));
  Uniform uniform(g("uniform", "low"), g("uniform", "high"));
  EXPECT_TRUE(TensorsClose(uniform.rsample({3}, seeded(13)), g("samples_uniform", "value")));
  const std::string t = "truncated_normal";
  TruncatedNormal truncated(g(t, "loc"), g(t, "scale"), g(t, "a"), g(t, "b"));
  EXPECT_TRUE(TensorsClose(truncated.rsample({3}, seeded(14)), g("samples_truncated_normal", "value")));
  TanhNormal tanh_normal(g("tanh_normal", "loc"), g("tanh_normal", "scale"),
                         TanhNormalOptions()
                             .low(g("tanh_normal_bounded", "low"))
                             .high(g("tanh_normal_bounded", "high"))
                             .upscale(3.0)
                             .tanh_loc(true));
  EXPECT_TRUE(TensorsClose(tanh_normal.sample({2}, seeded(15)), g("samples_tanh_normal", "value")));
  TruncatedStandardNormal standard(g(t, "a"), g(t, "b"));
  EXPECT_TRUE(TensorsClose(standard.rsample({2}, seeded(17)),
                           g("samples_truncated_standard_normal", "value")));
  TanhNormal default_bounds(g("tanh_normal", "loc"), g("tanh_normal", "scale"));
  EXPECT_TRUE(TensorsClose(default_bounds.rsample({2}, seeded(18)),
                           g("samples_tanh_normal_rsample", "value")));
}

// OneHotCategorical.rsample is tensordict's straight-through estimator: the draw of
// torch.distributions.RelaxedOneHotCategorical(temperature=1) (the record), with its values
// replaced by the one-hot of its argmax. tensordict 0.13's own OneHotCategorical.rsample raises
// under torch 2.11 (it hands both probs and logits to RelaxedOneHotCategorical), so the golden
// holds the relaxed draw and the hard step is applied here.
TEST_P(GoldenSamplesTest, OneHotCategoricalRsampleIsTheHardenedRelaxedDraw) {
  const at::Tensor relaxed = g("samples_one_hot_categorical_rsample", "relaxed");
  const at::Tensor hard =
      (relaxed == std::get<0>(relaxed.max(-1, /*keepdim=*/true))).to(relaxed.scalar_type());
  auto d = OneHotCategorical::from_logits(g("one_hot_categorical", "logits"));
  EXPECT_TRUE(TensorsClose(d.rsample({3}, seeded(16)), hard));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GoldenSamplesTest, ::testing::Values("f32", "f64"),
                         [](const auto& info) { return info.param; });

// ---- moments of 100k seeded samples -----------------------------------------------------------

TEST(SamplingMoments, Normal) {
  Normal d(f64({0.0, 2.0, -1.0}), f64({1.0, 0.5, 3.0}));
  expect_moments(d.sample({kN}, seeded(1)), d.mean(), d.variance());
  expect_moments(d.rsample({kN}, seeded(2)), d.mean(), d.variance());
}

TEST(SamplingMoments, IndependentNormal) {
  Independent d(std::make_shared<Normal>(f64({0.0, 2.0}), f64({1.0, 0.5})), 1);
  at::Tensor x = d.sample({kN}, seeded(3));
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{kN, 2}));
  expect_moments(x, d.mean(), d.variance());
}

TEST(SamplingMoments, CategoricalFrequencies) {
  const at::Tensor probs = f64({0.2, 0.3, 0.5});
  at::Tensor x = Categorical::from_probs(probs).sample({kN}, seeded(4));
  EXPECT_EQ(x.scalar_type(), at::kLong);
  at::Tensor freq = at::one_hot(x, 3).to(at::kDouble);
  expect_moments(freq, probs, probs * (1 - probs));
}

TEST(SamplingMoments, OneHotCategoricalSampleAndStraightThroughRsample) {
  const at::Tensor probs = f64({0.1, 0.6, 0.3});
  auto d = OneHotCategorical::from_probs(probs);
  at::Tensor x = d.sample({kN}, seeded(5));
  EXPECT_EQ(x.scalar_type(), at::kLong);
  EXPECT_TRUE((x.sum(-1) == 1).all().item<bool>());
  expect_moments(x, d.mean(), d.variance());
  // The Gumbel-max draw behind rsample is an exact categorical sample.
  at::Tensor r = d.rsample({kN}, seeded(6));
  EXPECT_TRUE(((r == 0) | (r == 1)).all().item<bool>());
  EXPECT_TRUE((r.sum(-1) == 1).all().item<bool>());
  expect_moments(r, d.mean(), d.variance());
}

TEST(SamplingMoments, Bernoulli) {
  auto d = Bernoulli::from_probs(f64({0.1, 0.7, 0.5}));
  expect_moments(d.sample({kN}, seeded(7)), d.mean(), d.variance());
}

TEST(SamplingMoments, Beta) {
  Beta d(f64({2.0, 0.5, 10.0}), f64({5.0, 0.5, 1.0}));
  at::Tensor x = d.sample({kN}, seeded(8));
  EXPECT_TRUE(((x >= 0) & (x <= 1)).all().item<bool>());
  expect_moments(x, d.mean(), d.variance());
}

TEST(SamplingMoments, Uniform) {
  Uniform d(f64({-1.0, 0.0}), f64({3.0, 0.01}));
  at::Tensor x = d.sample({kN}, seeded(9));
  EXPECT_TRUE(((x >= d.low()) & (x < d.high())).all().item<bool>());
  expect_moments(x, d.mean(), d.variance());
}

TEST(SamplingMoments, TruncatedNormal) {
  TruncatedNormal d(f64({0.0, 1.0, -2.0}), f64({1.0, 0.5, 2.0}), f64({-1.0, 0.0, -3.0}),
                    f64({1.0, 2.0, 5.0}));
  at::Tensor x = d.sample({kN}, seeded(10));
  EXPECT_TRUE(((x >= d.low()) & (x <= d.high())).all().item<bool>());
  expect_moments(x, d.mean(), d.variance());
}

TEST(SamplingMoments, TanhNormalPreimageIsTheNormal) {
  const at::Tensor loc = f64({0.3, -1.0});
  const at::Tensor scale = f64({0.5, 0.2});
  TanhNormal d(loc, scale, TanhNormalOptions().low(f64({-2.0, 0.0})).high(f64({2.0, 1.0})));
  at::Tensor x = d.sample({kN}, seeded(11));
  EXPECT_TRUE(((x > d.low()) & (x < d.high())).all().item<bool>());
  expect_moments(d.inverse_transform(x), loc, scale.pow(2));
}

TEST(SamplingMoments, DeltaRepeatsItsParameter) {
  Delta d(f64({1.0, -2.0}));
  at::Tensor x = d.sample({5}, seeded(12));
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{5, 2}));
  EXPECT_TRUE(at::equal(x, f64({1.0, -2.0}).expand({5, 2})));
}

// ---- reproducibility ----------------------------------------------------------------------

TEST(SamplingReproducibility, SameSeedSameSamplesDifferentSeedDifferentSamples) {
  std::vector<std::shared_ptr<Distribution>> dists = {
      std::make_shared<Normal>(f64({0.0, 1.0}), f64({1.0, 2.0})),
      std::make_shared<Categorical>(Categorical::from_logits(f64({0.1, 0.2, 0.3}))),
      std::make_shared<OneHotCategorical>(OneHotCategorical::from_logits(f64({0.1, 0.2, 0.3}))),
      std::make_shared<Bernoulli>(Bernoulli::from_probs(f64({0.3, 0.6}))),
      std::make_shared<Beta>(f64({2.0}), f64({3.0})),
      std::make_shared<Uniform>(f64({0.0}), f64({1.0})),
      std::make_shared<TruncatedNormal>(f64({0.0}), f64({1.0}), f64({-1.0}), f64({1.0})),
      std::make_shared<TanhNormal>(f64({0.0, 1.0}), f64({1.0, 0.5})),
  };
  for (const auto& d : dists) {
    SCOPED_TRACE(d->to_string());
    at::Tensor a = d->sample({64}, seeded(123));
    at::Tensor b = d->sample({64}, seeded(123));
    at::Tensor c = d->sample({64}, seeded(124));
    EXPECT_TRUE(at::equal(a, b));
    EXPECT_FALSE(at::equal(a, c));
    if (d->has_rsample()) {
      EXPECT_TRUE(at::equal(d->rsample({64}, seeded(5)), d->rsample({64}, seeded(5))));
    }
  }
}

TEST(SamplingReproducibility, OneGeneratorAdvancesBetweenCalls) {
  Normal d(f64({0.0}), f64({1.0}));
  at::Generator gen = seeded(1);
  at::Tensor first = d.sample({8}, gen);
  at::Tensor second = d.sample({8}, gen);
  // The stream continues from call to call; nothing reseeds it.
  EXPECT_FALSE(at::equal(first, second));
  EXPECT_TRUE(at::equal(first, d.sample({8}, seeded(1))));
}

// ---- gradients ------------------------------------------------------------------------------

// d(sum(rsample * w))/d(param) exists and is non-zero for every parameter.
void expect_grads(const std::function<at::Tensor()>& draw, const std::vector<at::Tensor>& params) {
  at::Tensor x = draw();
  ASSERT_TRUE(x.requires_grad());
  at::Tensor w = at::linspace(0.5, 1.5, x.numel(), x.options().requires_grad(false)).reshape(x.sizes());
  auto grads = torch::autograd::grad({(x * w).sum()}, params, {}, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true);
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_TRUE(grads[i].defined()) << "no gradient for parameter " << i;
    EXPECT_TRUE(grads[i].isfinite().all().item<bool>()) << grads[i];
    EXPECT_GT(grads[i].abs().sum().item<double>(), 0.0) << "zero gradient for parameter " << i;
  }
}

TEST(RsampleGradients, ReachTheParameters) {
  auto p = [](std::vector<double> v) { return f64(v).requires_grad_(); };
  {
    at::Tensor loc = p({0.0, 1.0}), scale = p({1.0, 2.0});
    expect_grads([&] { return Normal(loc, scale).rsample({4}, seeded(1)); }, {loc, scale});
    expect_grads([&] {
      return Independent(std::make_shared<Normal>(loc, scale), 1).rsample({4}, seeded(1));
    }, {loc, scale});
  }
  {
    at::Tensor low = p({-1.0, 0.0}), high = p({1.0, 3.0});
    expect_grads([&] { return Uniform(low, high).rsample({4}, seeded(2)); }, {low, high});
  }
  {
    at::Tensor c1 = p({2.0, 0.5}), c0 = p({3.0, 1.5});
    expect_grads([&] { return Beta(c1, c0).rsample({4}, seeded(3)); }, {c1, c0});
  }
  {
    at::Tensor logits = p({0.1, 0.5, -0.3});
    expect_grads([&] { return OneHotCategorical::from_logits(logits).rsample({16}, seeded(4)); },
                 {logits});
  }
  {
    at::Tensor loc = p({0.0, 0.5}), scale = p({1.0, 0.3});
    expect_grads([&] {
      return TruncatedNormal(loc, scale, f64({-1.0, -1.0}), f64({1.0, 2.0})).rsample({4}, seeded(5));
    }, {loc, scale});
    expect_grads([&] {
      return TanhNormal(loc, scale, TanhNormalOptions().low(-2.0).high(3.0).tanh_loc(true))
          .rsample({4}, seeded(6));
    }, {loc, scale});
  }
  {
    at::Tensor param = p({1.0, 2.0});
    expect_grads([&] { return Delta(param).rsample({3}); }, {param});
  }
}

TEST(RsampleGradients, SampleIsDetached) {
  at::Tensor loc = f64({0.0}).requires_grad_();
  at::Tensor scale = f64({1.0}).requires_grad_();
  EXPECT_FALSE(Normal(loc, scale).sample({3}, seeded(1)).requires_grad());
  EXPECT_FALSE(TanhNormal(loc, scale).sample({3}, seeded(1)).requires_grad());
  EXPECT_FALSE(Beta(scale + 1, scale + 2).sample({3}, seeded(1)).requires_grad());
  EXPECT_FALSE(Delta(loc).sample({3}).requires_grad());
}

TEST(RsampleGradients, TanhNormalLogProbIsFiniteAtTheBounds) {
  at::Tensor loc = f64({0.0, 0.0}).requires_grad_();
  TanhNormal d(loc, f64({1.0, 1.0}), TanhNormalOptions().low(-2.0).high(2.0));
  at::Tensor lp = d.log_prob(f64({-2.0, 2.0}));
  EXPECT_TRUE(lp.isfinite().all().item<bool>()) << lp;
  auto grads = torch::autograd::grad({lp}, {loc});
  EXPECT_TRUE(grads[0].isfinite().all().item<bool>());
}

// Without autograd recording, TanhNormal calls the clamped tanh/atanh ops directly instead of
// its autograd Functions: the same values, in float and double, at and inside the bounds.
TEST(RsampleGradients, TanhNormalSameValuesWithAndWithoutAutograd) {
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    at::Tensor loc = at::randn({5, 3}, seeded(2)).mul(3).to(dtype).requires_grad_();
    at::Tensor scale = at::rand({5, 3}, seeded(3)).add(0.1).to(dtype).requires_grad_();
    const TanhNormalOptions options = TanhNormalOptions().low(-2.0).high(2.0);
    at::Tensor edges = at::tensor({-2.0, -1.999999, 0.0, 1.999999, 2.0}, dtype).reshape({5, 1}).expand({5, 3});
    TanhNormal graded(loc, scale, options);
    const at::Tensor draw = graded.rsample({4}, seeded(4));
    const at::Tensor draw_lp = graded.log_prob(draw);
    const at::Tensor edges_lp = graded.log_prob(edges);
    ASSERT_TRUE(draw.requires_grad());
    ASSERT_TRUE(draw_lp.requires_grad());
    auto expect_same = [&](const TanhNormal& d) {
      const at::Tensor plain_draw = d.rsample({4}, seeded(4));
      EXPECT_FALSE(plain_draw.requires_grad());
      EXPECT_TRUE(at::equal(plain_draw, draw.detach()));
      EXPECT_TRUE(at::equal(d.log_prob(plain_draw), draw_lp.detach()));
      EXPECT_TRUE(at::equal(d.log_prob(edges), edges_lp.detach()));
      EXPECT_TRUE(at::equal(d.deterministic_sample(), graded.deterministic_sample().detach()));
    };
    {
      c10::NoGradGuard no_grad;
      expect_same(TanhNormal(loc, scale, options));
    }
    expect_same(TanhNormal(loc.detach(), scale.detach(), options));
    {
      c10::InferenceMode inference;
      expect_same(TanhNormal(loc.detach(), scale.detach(), options));
    }
  }
}

}  // namespace
}  // namespace tdp::dist
