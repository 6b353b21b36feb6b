// Printing, support descriptions, unsupported methods, construction errors and validate-args
// mode: the texts a user sees when something is wrong.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <sstream>

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
#include "tests/testing/error_of.h"

namespace tdp::dist {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

at::Tensor f32(std::vector<float> v) { return at::tensor(v, at::kFloat); }

using test_util::error_of;

// Restores the process-wide default even when a test fails half-way.
struct DefaultValidateArgsScope {
  explicit DefaultValidateArgsScope(bool value) : previous(default_validate_args()) {
    set_default_validate_args(value);
  }
  ~DefaultValidateArgsScope() { set_default_validate_args(previous); }
  bool previous;
};

TEST(Printing, LikePyTorchWithShapesAsLists) {
  Normal normal(at::zeros({3, 4}), at::ones({3, 4}));
  EXPECT_EQ(normal.to_string(), "Normal(loc: [3, 4], scale: [3, 4])");
  std::ostringstream out;
  out << normal;
  EXPECT_EQ(out.str(), "Normal(loc: [3, 4], scale: [3, 4])");
  EXPECT_EQ(Normal(at::scalar_tensor(0.5), at::scalar_tensor(2.0)).to_string(),
            "Normal(loc: 0.5, scale: 2)");
  EXPECT_EQ(Independent(std::make_shared<Normal>(normal), 1).to_string(),
            "Independent(Normal(loc: [3, 4], scale: [3, 4]), 1)");
  EXPECT_EQ(Categorical::from_logits(at::zeros({2, 5})).to_string(), "Categorical(logits: [2, 5])");
  EXPECT_EQ(OneHotCategorical::from_probs(at::ones({2, 5})).to_string(),
            "OneHotCategorical(probs: [2, 5])");
  EXPECT_EQ(Bernoulli::from_probs(at::full({7}, 0.5)).to_string(), "Bernoulli(probs: [7])");
  EXPECT_EQ(Beta(at::ones({2}), at::ones({2})).to_string(),
            "Beta(concentration1: [2], concentration0: [2])");
  EXPECT_EQ(Uniform(at::zeros({2}), at::ones({2})).to_string(), "Uniform(low: [2], high: [2])");
  EXPECT_EQ(Delta(at::zeros({2, 3})).to_string(), "Delta(param: [2, 3])");
  EXPECT_EQ(TanhNormal(at::zeros({2, 3}), at::ones({2, 3})).to_string(),
            "TanhNormal(loc: [2, 3], scale: [2, 3], low: -1, high: 1)");
  EXPECT_EQ(TruncatedNormal(at::zeros({2}), at::ones({2}), f32({-1, -1}), f32({1, 1})).to_string(),
            "TruncatedNormal(loc: [2], scale: [2], a: [2], b: [2])");
}

TEST(Support, Descriptions) {
  EXPECT_EQ(Normal(at::zeros({2}), at::ones({2})).support().to_string(), "Real()");
  EXPECT_TRUE(Normal(at::zeros({2}), at::ones({2})).support().is_real());
  EXPECT_EQ(Bernoulli::from_probs(at::full({2}, 0.3)).support().to_string(), "Boolean()");
  EXPECT_EQ(Categorical::from_logits(at::zeros({5})).support().to_string(),
            "IntegerInterval(lower_bound=0, upper_bound=4)");
  EXPECT_TRUE(Categorical::from_logits(at::zeros({5})).support().is_discrete());
  EXPECT_EQ(Beta(at::ones({2}), at::ones({2})).support().to_string(),
            "Interval(lower_bound=0.0, upper_bound=1.0)");
  EXPECT_EQ(OneHotCategorical::from_logits(at::zeros({5})).support().to_string(), "OneHot()");
  EXPECT_EQ(Independent(std::make_shared<Normal>(at::zeros({2}), at::ones({2})), 1)
                .support()
                .to_string(),
            "IndependentConstraint(Real(), 1)");
  EXPECT_EQ(Uniform(at::scalar_tensor(-1.0), at::scalar_tensor(2.0)).support().to_string(),
            "Interval(lower_bound=-1, upper_bound=2)");
  Support positive = Support::positive();
  EXPECT_EQ(positive.to_string(), "GreaterThan(lower_bound=0.0)");
  EXPECT_TRUE(at::equal(positive.check(f32({1, 0, -1, NAN})),
                        at::tensor({1, 0, 0, 0}).to(at::kBool)));
}

TEST(Unsupported, MethodsThrowNamingTheDistribution) {
  auto categorical = Categorical::from_logits(at::zeros({3}));
  EXPECT_EQ(error_of<NotImplementedError>([&] { categorical.cdf(at::zeros({})); }),
            "Categorical does not implement cdf");
  EXPECT_EQ(error_of<NotImplementedError>([&] { categorical.rsample(); }),
            "Categorical does not implement rsample");
  EXPECT_FALSE(categorical.has_rsample());
  Delta delta(at::zeros({2}));
  EXPECT_EQ(error_of<NotImplementedError>([&] { delta.entropy(); }), "Delta does not implement entropy");
  EXPECT_EQ(error_of<NotImplementedError>([&] { delta.support(); }), "Delta does not implement support");
  EXPECT_FALSE(delta.has_rsample());
  Independent independent(std::make_shared<Normal>(at::zeros({2}), at::ones({2})), 1);
  EXPECT_EQ(error_of<NotImplementedError>([&] { independent.icdf(at::zeros({2})); }),
            "Independent does not implement icdf");
  TanhNormal tanh_normal(at::zeros({2}), at::ones({2}));
  EXPECT_THAT(error_of<NotImplementedError>([&] { tanh_normal.mode(); }),
              AllOf(HasSubstr("TanhNormal has no analytical mode"), HasSubstr("deterministic_sample")));
  EXPECT_THAT(error_of<NotImplementedError>([&] { tanh_normal.mean(); }),
              HasSubstr("TanhNormal does not have a closed form formula for the mean"));
  EXPECT_THAT(error_of<NotImplementedError>([&] { tanh_normal.entropy(); }),
              HasSubstr("TanhNormal does not implement entropy"));
  EXPECT_THAT(error_of<NotImplementedError>([&] { tanh_normal.cdf(at::zeros({2})); }),
              HasSubstr("TanhNormal does not implement cdf with event_dims > 0"));
  // With a scalar event, cdf and icdf exist and invert each other.
  TanhNormal scalar_event(f32({0.3}), f32({0.7}), TanhNormalOptions().event_dims(0).low(-2.0).high(2.0));
  at::Tensor q = f32({0.2});
  EXPECT_TRUE(at::allclose(scalar_event.cdf(scalar_event.icdf(q)), q, 1e-5, 1e-6));
}

TEST(ConstructionErrors, AreAlwaysChecked) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { Categorical(at::ones({3}), at::zeros({3})); }),
            "Categorical: either `probs` or `logits` must be specified, but not both.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { Categorical(at::Tensor(), at::Tensor()); }),
            "Categorical: either `probs` or `logits` must be specified, but not both.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { OneHotCategorical(at::Tensor(), at::Tensor()); }),
            "OneHotCategorical: either `probs` or `logits` must be specified, but not both.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { Categorical::from_logits(at::scalar_tensor(1.0)); }),
            "Categorical: `logits` parameter must be at least one-dimensional.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { Bernoulli(at::Tensor(), at::Tensor()); }),
            "Bernoulli: either `probs` or `logits` must be specified, but not both.");
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                TruncatedNormal(at::zeros({2}), at::ones({2}), f32({-1, 2}), f32({1, 1}));
              }),
              HasSubstr("TruncatedNormal: incorrect truncation range, a < b must hold"));
  EXPECT_THAT(error_of<std::invalid_argument>([] { TruncatedStandardNormal(f32({1}), f32({0})); }),
              HasSubstr("TruncatedStandardNormal: incorrect truncation range"));
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                TanhNormal(at::zeros({2}), at::ones({2}), TanhNormalOptions().low(1.0).high(1.0));
              }),
              HasSubstr("TanhNormal high values must be strictly greater than low values"));
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                Independent(std::make_shared<Normal>(at::zeros({2}), at::ones({2})), 2);
              }),
              HasSubstr("Independent: expected 0 <= reinterpreted_batch_ndims <= "
                        "len(base_distribution.batch_shape), actual 2 vs 1"));
  EXPECT_EQ(error_of<std::invalid_argument>([] { Normal(at::Tensor(), at::ones({2})); }),
            "Normal: parameter 'loc' is an undefined tensor");
}

TEST(ValidateArgs, OffByDefaultSoInvalidParametersAreAccepted) {
  EXPECT_FALSE(default_validate_args());
  Normal normal(at::zeros({2}), f32({1, -1}));
  EXPECT_FALSE(normal.validate_args());
  EXPECT_TRUE(normal.log_prob(at::zeros({2}))[1].isnan().item<bool>());
}

TEST(ValidateArgs, PerDistributionOptionRejectsBadParameters) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { Normal(at::zeros({2}), f32({1, -1}), true); }),
            "Expected parameter scale (Tensor of shape [2]) of distribution "
            "Normal(loc: [2], scale: [2]) to satisfy the constraint GreaterThan(lower_bound=0.0), "
            "but found 1 invalid entry, the first at index [1] is -1");
  EXPECT_THAT(error_of<std::invalid_argument>([] { Normal(f32({0, NAN, NAN}), at::ones({3}), true); }),
              AllOf(HasSubstr("Expected parameter loc"), HasSubstr("Real()"),
                    HasSubstr("2 invalid entries, the first at index [1] is nan")));
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                Categorical::from_probs(f32({0.2, 0.2, 0.2}), /*validate_args=*/true);
              }),
              AllOf(HasSubstr("Expected parameter probs"), HasSubstr("Categorical"),
                    HasSubstr("Simplex()")));
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                Bernoulli::from_probs(f32({0.5, 1.5}), /*validate_args=*/true);
              }),
              AllOf(HasSubstr("Expected parameter probs"),
                    HasSubstr("Interval(lower_bound=0.0, upper_bound=1.0)"), HasSubstr("1.5")));
  EXPECT_THAT(error_of<std::invalid_argument>([] { Beta(f32({0}), f32({1}), true); }),
              HasSubstr("Expected parameter concentration1"));
  EXPECT_THAT(error_of<std::invalid_argument>([] { Uniform(f32({1}), f32({0}), true); }),
              HasSubstr("Uniform is not defined when low >= high"));
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                TanhNormal(at::zeros({2}), f32({1, 0}), TanhNormalOptions().validate_args(true));
              }),
              AllOf(HasSubstr("Expected parameter scale"), HasSubstr("Normal")));
  // Valid parameters pass.
  EXPECT_NO_THROW(Categorical::from_probs(f32({0.25, 0.75}), true));
  EXPECT_NO_THROW(Normal(at::zeros({2}), at::ones({2}), true));
}

TEST(ValidateArgs, ProcessWideSwitchAndPerDistributionOverride) {
  DefaultValidateArgsScope on(true);
  EXPECT_THROW(Normal(at::zeros({1}), f32({0})), std::invalid_argument);
  EXPECT_NO_THROW(Normal(at::zeros({1}), f32({0}), /*validate_args=*/false));
}

TEST(ValidateArgs, SamplesOutsideTheSupportOrOfTheWrongShapeThrow) {
  Beta beta(f32({2, 2}), f32({3, 3}), true);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { beta.log_prob(f32({0.5, 1.5})); }),
            "Beta.log_prob: expected value argument (Tensor of shape [2]) to be within the support "
            "(Interval(lower_bound=0.0, upper_bound=1.0)) of the distribution "
            "Beta(concentration1: [2], concentration0: [2]), but found 1 invalid entry, the first "
            "at index [1] is 1.5");
  auto categorical = Categorical::from_logits(at::zeros({5}), true);
  EXPECT_THAT(error_of<std::invalid_argument>([&] { categorical.log_prob(at::tensor({7})); }),
              HasSubstr("IntegerInterval(lower_bound=0, upper_bound=4)"));
  auto one_hot = OneHotCategorical::from_logits(at::zeros({3}), true);
  EXPECT_THAT(error_of<std::invalid_argument>([&] { one_hot.log_prob(at::tensor({1, 1, 0})); }),
              HasSubstr("OneHot()"));
  Independent independent(std::make_shared<Normal>(at::zeros({2, 3}), at::ones({2, 3})), 1, true);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { independent.log_prob(at::zeros({2, 4})); }),
            "Independent.log_prob: the right-most size of value must match event_shape: [2, 4] vs [3]");
  Normal normal(at::zeros({2, 3}), at::ones({2, 3}), true);
  EXPECT_THAT(error_of<std::invalid_argument>([&] { normal.log_prob(at::zeros({4, 3})); }),
              HasSubstr("value is not broadcastable with batch_shape+event_shape: [4, 3] vs [2, 3]"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { normal.cdf(f32({NAN, 0, 0})); }),
              HasSubstr("Normal.cdf: expected value argument"));
  Uniform uniform(f32({0}), f32({1}), true);
  EXPECT_THROW(uniform.log_prob(f32({2})), std::invalid_argument);
  // Without validation the same value just scores -inf.
  EXPECT_EQ(Uniform(f32({0}), f32({1})).log_prob(f32({2})).item<float>(),
            -std::numeric_limits<float>::infinity());
  // Delta declares no support, so any value of the right shape is accepted.
  EXPECT_NO_THROW(Delta(at::zeros({3}), 1e-6, 1e-6, {}, {}, true).log_prob(f32({NAN, 1, 2})));
}

}  // namespace
}  // namespace tdp::dist
