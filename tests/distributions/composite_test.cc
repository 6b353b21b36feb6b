// CompositeDistribution over a TensorDict of parameters, and the composite_lp_aggregate switch.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdlib>
#include <thread>

#include "sdk/distributions/categorical.h"
#include "sdk/distributions/composite_distribution.h"
#include "sdk/distributions/composite_lp_aggregate.h"
#include "sdk/distributions/normal.h"
#include "sdk/distributions/tanh_normal.h"
#include "tests/testing/error_of.h"
#include "tests/testing/random.h"

namespace tdp::dist {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;
using test_util::seeded;

// ---- composite_lp_aggregate -----------------------------------------------------------------

TEST(CompositeLpAggregate, DefaultsToFalseWithoutTheEnvironmentVariable) {
  if (std::getenv("COMPOSITE_LP_AGGREGATE") != nullptr) GTEST_SKIP() << "variable set by caller";
  EXPECT_FALSE(composite_lp_aggregate_mode().has_value());
  EXPECT_FALSE(composite_lp_aggregate());
}

TEST(CompositeLpAggregate, GuardsNestAndRestore) {
  const bool before = composite_lp_aggregate();
  {
    CompositeLpAggregateGuard outer(true);
    EXPECT_TRUE(composite_lp_aggregate());
    {
      CompositeLpAggregateGuard inner(false);
      EXPECT_FALSE(composite_lp_aggregate());
      EXPECT_EQ(composite_lp_aggregate_mode(), std::optional<bool>(false));
    }
    EXPECT_TRUE(composite_lp_aggregate());
  }
  EXPECT_EQ(composite_lp_aggregate(), before);
}

TEST(CompositeLpAggregate, ThreadLocalGuardStaysOnItsThread) {
  CompositeLpAggregateGuard process_wide(false);
  {
    CompositeLpAggregateGuard mine(true, /*thread_local_only=*/true);
    EXPECT_TRUE(composite_lp_aggregate());
    bool seen_elsewhere = true;
    std::thread([&] { seen_elsewhere = composite_lp_aggregate(); }).join();
    EXPECT_FALSE(seen_elsewhere);
    // The thread-local setting wins over a process-wide guard on this thread only.
    CompositeLpAggregateGuard process_wide_true(true);
    CompositeLpAggregateGuard mine_false(false, true);
    EXPECT_FALSE(composite_lp_aggregate());
    std::thread([&] { seen_elsewhere = composite_lp_aggregate(); }).join();
    EXPECT_TRUE(seen_elsewhere);
  }
  EXPECT_FALSE(composite_lp_aggregate());
}

TEST(CompositeLpAggregate, SetForGood) {
  set_composite_lp_aggregate(true);
  EXPECT_TRUE(composite_lp_aggregate());
  bool seen_elsewhere = false;
  std::thread([&] { seen_elsewhere = composite_lp_aggregate(); }).join();
  EXPECT_TRUE(seen_elsewhere);
  set_composite_lp_aggregate(std::nullopt);
  if (std::getenv("COMPOSITE_LP_AGGREGATE") == nullptr) {
    EXPECT_FALSE(composite_lp_aggregate());
  }
}

// ---- CompositeDistribution ------------------------------------------------------------------

class CompositeTest : public ::testing::Test {
 protected:
  CompositeTest()
      : loc_(at::linspace(-1, 1, 12).reshape({3, 4})),
        scale_(at::linspace(0.5, 1.5, 12).reshape({3, 4})),
        logits_(at::linspace(-2, 2, 30).reshape({3, 10})),
        params_({{{"cont", "loc"}, loc_}, {{"cont", "scale"}, scale_},
                 {{"nested", "disc", "logits"}, logits_}},
                {3}),
        dist_(params_, {{"cont", "normal"}, {{"nested", "disc"}, "categorical"}}) {}

  at::Tensor loc_, scale_, logits_;
  TensorDict params_;
  CompositeDistribution dist_;
};

TEST_F(CompositeTest, SampleShapesAndReproducibility) {
  EXPECT_EQ(dist_.batch_shape(), std::vector<int64_t>({3}));
  TensorDict sample = dist_.sample({4}, seeded(1));
  EXPECT_EQ(sample.batch_size().vec(), std::vector<int64_t>({4, 3}));
  EXPECT_EQ(sample.get("cont").sizes(), (std::vector<int64_t>{4, 3, 4}));
  EXPECT_EQ(sample.get({"nested", "disc"}).sizes(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(sample.get({"nested", "disc"}).scalar_type(), at::kLong);
  EXPECT_TRUE(sample.equal(dist_.sample({4}, seeded(1))));
  EXPECT_FALSE(sample.equal(dist_.sample({4}, seeded(2))));
  // One generator feeds the parts in order, as separate calls would.
  at::Generator gen = seeded(3);
  at::Tensor cont = Normal(loc_, scale_).sample({4}, gen);
  at::Tensor disc = Categorical::from_logits(logits_).sample({4}, gen);
  TensorDict again = dist_.sample({4}, seeded(3));
  EXPECT_TRUE(at::equal(again.get("cont"), cont));
  EXPECT_TRUE(at::equal(again.get({"nested", "disc"}), disc));
}

TEST_F(CompositeTest, LogProbPerPartByDefault) {
  CompositeLpAggregateGuard per_part(false);
  TensorDict sample = dist_.sample({4}, seeded(1));
  auto result = dist_.log_prob(sample);
  ASSERT_TRUE(std::holds_alternative<TensorDict>(result));
  TensorDict lp = std::get<TensorDict>(result);
  EXPECT_FALSE(lp.is_same(sample));
  EXPECT_FALSE(lp.contains("cont"));  // a new TensorDict, not the sample
  EXPECT_FALSE(lp.contains("sample_log_prob"));
  EXPECT_EQ(lp.batch_size().vec(), std::vector<int64_t>({4, 3}));
  EXPECT_TRUE(at::equal(lp.get("cont_log_prob"), Normal(loc_, scale_).log_prob(sample.get("cont"))));
  EXPECT_TRUE(at::equal(lp.get({"nested", "disc_log_prob"}),
                        Categorical::from_logits(logits_).log_prob(sample.get({"nested", "disc"}))));
  EXPECT_FALSE(sample.contains("cont_log_prob"));
  // include_sum adds the aggregate under log_prob_key.
  TensorDict with_sum = dist_.log_prob_composite(sample, true);
  EXPECT_EQ(with_sum.get("sample_log_prob").sizes(), (std::vector<int64_t>{4, 3}));
}

TEST_F(CompositeTest, LogProbAggregatedSumsOverEventDims) {
  CompositeLpAggregateGuard aggregate(true);
  TensorDict sample = dist_.sample({4}, seeded(1));
  auto result = dist_.log_prob(sample);
  ASSERT_TRUE(std::holds_alternative<at::Tensor>(result));
  at::Tensor expected = Normal(loc_, scale_).log_prob(sample.get("cont")).sum(-1) +
                        Categorical::from_logits(logits_).log_prob(sample.get({"nested", "disc"}));
  EXPECT_TRUE(at::allclose(std::get<at::Tensor>(result), expected));
  // log_prob_composite writes into the sample when aggregating, with the sum.
  TensorDict written = dist_.log_prob_composite(sample);
  EXPECT_TRUE(written.is_same(sample));
  EXPECT_TRUE(sample.contains("cont_log_prob"));
  EXPECT_TRUE(sample.contains({"nested", "disc_log_prob"}));
  EXPECT_TRUE(at::allclose(sample.get("sample_log_prob"), expected));
}

TEST_F(CompositeTest, EntropyFollowsTheSwitch) {
  {
    CompositeLpAggregateGuard aggregate(true);
    auto e = dist_.entropy();
    ASSERT_TRUE(std::holds_alternative<at::Tensor>(e));
    at::Tensor expected = Normal(loc_, scale_).entropy().sum(-1) +
                          Categorical::from_logits(logits_).entropy();
    EXPECT_TRUE(at::allclose(std::get<at::Tensor>(e), expected));
  }
  {
    CompositeLpAggregateGuard per_part(false);
    auto e = dist_.entropy();
    ASSERT_TRUE(std::holds_alternative<TensorDict>(e));
    TensorDict td = std::get<TensorDict>(e);
    EXPECT_EQ(td.get("cont_entropy").sizes(), (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(td.get({"nested", "disc_entropy"}).sizes(), (std::vector<int64_t>{3}));
    EXPECT_FALSE(td.contains("entropy"));
    EXPECT_TRUE(dist_.entropy_composite(1, true).contains("entropy"));
  }
}

TEST_F(CompositeTest, EntropyFallsBackOnMonteCarlo) {
  TensorDict params({{{"act", "loc"}, loc_}, {{"act", "scale"}, scale_}}, {3});
  CompositeDistribution dist(params, {{"act", "tanh_normal"}},
                             CompositeDistributionOptions().entropy_key("h"));
  CompositeLpAggregateGuard per_part(false);
  TensorDict e = dist.entropy_composite(2000, true, seeded(4));
  at::Tensor estimate = e.get("act_entropy");
  EXPECT_EQ(estimate.sizes(), (std::vector<int64_t>{3}));
  EXPECT_TRUE(at::equal(e.get("h"), estimate));
  // -E[log p(x)] from an independent, larger sample agrees.
  TanhNormal direct(loc_, scale_);
  at::Tensor reference = -direct.log_prob(direct.sample({20000}, seeded(5))).mean(0);
  EXPECT_TRUE(at::allclose(estimate, reference, 0.05, 0.1)) << estimate << reference;
}

TEST_F(CompositeTest, ModeMeanDeterministicSample) {
  EXPECT_TRUE(at::equal(dist_.mode().get("cont"), loc_));
  EXPECT_TRUE(at::equal(dist_.mean().get("cont"), loc_));
  EXPECT_TRUE(at::equal(dist_.deterministic_sample().get({"nested", "disc"}), logits_.argmax(-1)));
  EXPECT_EQ(dist_.mode().batch_size().vec(), std::vector<int64_t>({3}));
}

TEST_F(CompositeTest, NameMapExtraKwargsAndFactories) {
  TensorDict params({{{"cont", "loc"}, loc_}, {{"cont", "scale"}, scale_},
                     {{"squashed", "loc"}, loc_}, {{"squashed", "scale"}, scale_}},
                    {3});
  DistributionFactory my_normal = [](const Params& p, const DistributionKwargs&) {
    return std::make_shared<Normal>(p.at("loc"), p.at("scale") * 2);
  };
  CompositeDistribution dist(
      params, {{"cont", my_normal}, {"squashed", "tanh_normal"}},
      CompositeDistributionOptions()
          .name_map({{"cont", {"action", "cont"}}})
          .extra_kwargs({{"squashed", {{"low", -3.0}, {"high", 5.0}}}}));
  TensorDict sample = dist.sample({1000}, seeded(6));
  EXPECT_TRUE(sample.contains({"action", "cont"}));
  EXPECT_FALSE(sample.contains("cont"));
  at::Tensor squashed = sample.get("squashed");
  EXPECT_TRUE(((squashed > -3) & (squashed < 5)).all().item<bool>());
  EXPECT_GT(squashed.max().item<float>(), 1.0f);
  EXPECT_TRUE(at::allclose(dist.get({"action", "cont"})->stddev(), scale_ * 2));
  EXPECT_EQ(dist.to_string(),
            "CompositeDistribution({('action', 'cont'): Normal(loc: [3, 4], scale: [3, 4]), "
            "'squashed': TanhNormal(loc: [3, 4], scale: [3, 4], low: -3, high: 5)})");
}

TEST_F(CompositeTest, RsampleGradientsReachTheParams) {
  at::Tensor loc = loc_.clone().requires_grad_();
  TensorDict params({{{"cont", "loc"}, loc}, {{"cont", "scale"}, scale_}}, {3});
  CompositeDistribution dist(params, {{"cont", "normal"}});
  at::Tensor x = dist.rsample({2}, seeded(7)).get("cont");
  auto grads = torch::autograd::grad({x.sum()}, {loc});
  EXPECT_TRUE(at::allclose(grads[0], at::full_like(loc_, 2.0)));
}

TEST_F(CompositeTest, CdfAndIcdf) {
  TensorDict params({{{"cont", "loc"}, loc_}, {{"cont", "scale"}, scale_}}, {3});
  CompositeDistribution dist(params, {{"cont", "normal"}});
  TensorDict sample = dist.sample({}, seeded(8));
  TensorDict with_cdf = dist.cdf(sample);
  EXPECT_TRUE(with_cdf.is_same(sample));
  EXPECT_TRUE(at::equal(sample.get("cont_cdf"), Normal(loc_, scale_).cdf(sample.get("cont"))));
  dist.icdf(sample);
  EXPECT_TRUE(at::allclose(sample.get("cont_icdf"), sample.get("cont"), 1e-4, 1e-4));
  // Without the cdf entry, icdf takes the cdf of the sample itself.
  TensorDict bare({{"cont", sample.get("cont")}}, {3});
  dist.icdf(bare);
  EXPECT_TRUE(at::allclose(bare.get("cont_icdf"), sample.get("cont"), 1e-4, 1e-4));
  TensorDict empty(std::vector<int64_t>{3});
  EXPECT_THAT(error_of<KeyError>([&] { dist.icdf(empty); }),
              HasSubstr("neither 'cont' nor 'cont_cdf' could be found"));
}

TEST_F(CompositeTest, FromDistributions) {
  auto normal = std::make_shared<Normal>(loc_, scale_);
  CompositeDistribution dist =
      CompositeDistribution::from_distributions({3}, {{{"a", "b"}, normal}});
  EXPECT_EQ(dist.sample({2}).get({"a", "b"}).sizes(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(dist.get({"a", "b"}).get(), normal.get());
  EXPECT_THROW(dist.get("missing"), KeyError);
}

TEST_F(CompositeTest, InlineLambdaFactory) {
  CompositeDistribution dist(params_, {{"cont", [](const Params& p, const DistributionKwargs& k) {
                                          EXPECT_EQ(k.at("shift").toDouble(), 1.5);
                                          return std::make_shared<Normal>(p.at("loc") + 1.5, p.at("scale"));
                                        }}},
                             CompositeDistributionOptions().extra_kwargs({{"cont", {{"shift", 1.5}}}}));
  EXPECT_TRUE(at::allclose(dist.mean().get("cont"), loc_ + 1.5));
}

TEST_F(CompositeTest, ErrorsNameTheKeyAndTheDistribution) {
  EXPECT_THAT(error_of<KeyError>([&] { CompositeDistribution(params_, {{"missing", "normal"}}); }),
              HasSubstr("CompositeDistribution: no params for 'missing' in params with keys"));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { CompositeDistribution(params_, {{"cont", "categorical"}}); }),
            "CompositeDistribution: building 'cont' (categorical): categorical: expected "
            "parameters {logits} or {probs}, got {loc, scale}");
  TensorDict flat({{"cont", loc_}}, {3});
  EXPECT_THAT(error_of<std::invalid_argument>([&] { CompositeDistribution(flat, {{"cont", "normal"}}); }),
              HasSubstr("params at 'cont' must be a TensorDict of parameter tensors"));
  EXPECT_THROW(CompositeDistribution(params_, {{"cont", "normal"}},
                                     CompositeDistributionOptions().name_map({{"typo", "x"}})),
               std::invalid_argument);
}

}  // namespace
}  // namespace tdp::dist
