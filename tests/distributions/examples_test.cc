// The usage examples at the top of each sdk/distributions header, run as written (with the
// free variables given values), so the documentation cannot drift from the code.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <variant>

#include "sdk/distributions/bernoulli.h"
#include "sdk/distributions/beta.h"
#include "sdk/distributions/categorical.h"
#include "sdk/distributions/composite_distribution.h"
#include "sdk/distributions/composite_lp_aggregate.h"
#include "sdk/distributions/delta.h"
#include "sdk/distributions/independent.h"
#include "sdk/distributions/normal.h"
#include "sdk/distributions/one_hot_categorical.h"
#include "sdk/distributions/registry.h"
#include "sdk/distributions/support.h"
#include "sdk/distributions/tanh_normal.h"
#include "sdk/distributions/truncated_normal.h"
#include "sdk/distributions/uniform.h"

namespace {

using Shape = std::vector<int64_t>;

TEST(HeaderExamples, Distribution) {
  at::Tensor loc = at::zeros({3, 4}), scale = at::ones({3, 4});
  tdp::dist::Normal normal(loc, scale);
  at::Generator gen = at::detail::createCPUGenerator(42);
  at::Tensor x = normal.rsample({10}, gen);
  at::Tensor lp = normal.log_prob(x);
  std::ostringstream out;
  out << normal;
  EXPECT_EQ(x.sizes(), (Shape{10, 3, 4}));
  EXPECT_EQ(lp.sizes(), (Shape{10, 3, 4}));
  EXPECT_EQ(out.str(), "Normal(loc: [3, 4], scale: [3, 4])");
}

TEST(HeaderExamples, Support) {
  at::Tensor values = at::tensor({0, 9, 10});
  tdp::dist::Support s = tdp::dist::Support::integer_interval(0, 9);
  EXPECT_EQ(s.to_string(), "IntegerInterval(lower_bound=0, upper_bound=9)");
  at::Tensor ok = s.check(values);
  EXPECT_TRUE(at::equal(ok, at::tensor({1, 1, 0}).to(at::kBool)));
  EXPECT_TRUE(s.is_discrete());
  EXPECT_TRUE(tdp::dist::Support::real().is_real());
}

TEST(HeaderExamples, Normal) {
  at::Generator generator = at::detail::createCPUGenerator(1);
  tdp::dist::Normal normal(at::zeros({3, 4}), at::ones({3, 4}));
  at::Tensor x = normal.rsample({8}, generator);
  at::Tensor lp = normal.log_prob(x);
  at::Tensor q = normal.icdf(at::full({3, 4}, 0.975));
  EXPECT_EQ(lp.sizes(), (Shape{8, 3, 4}));
  EXPECT_NEAR(q[0][0].item<float>(), 1.96, 1e-3);
  EXPECT_EQ(normal.to_string(), "Normal(loc: [3, 4], scale: [3, 4])");
}

TEST(HeaderExamples, Independent) {
  at::Tensor loc = at::zeros({32, 6}), scale = at::ones({32, 6});
  auto base = std::make_shared<tdp::dist::Normal>(loc, scale);
  tdp::dist::Independent policy(base, /*reinterpreted_batch_ndims=*/1);
  EXPECT_EQ(policy.batch_shape(), (Shape{32}));
  EXPECT_EQ(policy.event_shape(), (Shape{6}));
  at::Tensor lp = policy.log_prob(policy.sample());
  EXPECT_EQ(lp.sizes(), (Shape{32}));
}

TEST(HeaderExamples, Categorical) {
  at::Generator generator = at::detail::createCPUGenerator(2);
  at::Tensor scores = at::randn({32, 5}, generator);
  auto policy = tdp::dist::Categorical::from_logits(scores);
  at::Tensor action = policy.sample({}, generator);
  at::Tensor lp = policy.log_prob(action);
  at::Tensor greedy = policy.mode();
  at::Tensor h = policy.entropy();
  EXPECT_EQ(action.sizes(), (Shape{32}));
  EXPECT_EQ(action.scalar_type(), at::kLong);
  EXPECT_TRUE(((action >= 0) & (action < 5)).all().item<bool>());
  EXPECT_EQ(lp.sizes(), (Shape{32}));
  EXPECT_TRUE(at::equal(greedy, scores.argmax(-1)));
  EXPECT_EQ(h.sizes(), (Shape{32}));
}

TEST(HeaderExamples, OneHotCategorical) {
  at::Generator generator = at::detail::createCPUGenerator(3);
  at::Tensor scores = at::randn({32, 5}, generator).requires_grad_();
  auto policy = tdp::dist::OneHotCategorical::from_logits(scores);
  at::Tensor a = policy.sample({}, generator);
  at::Tensor lp = policy.log_prob(a);
  at::Tensor st = policy.rsample({}, generator);
  EXPECT_EQ(a.sizes(), (Shape{32, 5}));
  EXPECT_EQ(a.scalar_type(), at::kLong);
  EXPECT_EQ(lp.sizes(), (Shape{32}));
  EXPECT_TRUE((st.sum(-1) == 1).all().item<bool>());
  EXPECT_TRUE(st.requires_grad());
  EXPECT_EQ(policy.event_shape(), (Shape{5}));
}

TEST(HeaderExamples, Bernoulli) {
  at::Generator generator = at::detail::createCPUGenerator(4);
  at::Tensor scores = at::zeros({32, 3});
  auto press = tdp::dist::Bernoulli::from_logits(scores);
  at::Tensor buttons = press.sample({}, generator);
  at::Tensor lp = press.log_prob(buttons);
  at::Tensor greedy = press.mode();
  EXPECT_EQ(buttons.sizes(), (Shape{32, 3}));
  EXPECT_EQ(lp.sizes(), (Shape{32, 3}));
  EXPECT_TRUE(greedy.isnan().all().item<bool>());  // sigmoid(0) == 0.5
  EXPECT_EQ(press.entropy().sizes(), (Shape{32, 3}));
}

TEST(HeaderExamples, Uniform) {
  at::Generator generator = at::detail::createCPUGenerator(5);
  tdp::dist::Uniform noise(at::full({4}, -0.5), at::full({4}, 0.5));
  at::Tensor u = noise.rsample({100}, generator);
  at::Tensor lp = noise.log_prob(u);
  at::Tensor c = noise.cdf(at::zeros({4}));
  EXPECT_EQ(u.sizes(), (Shape{100, 4}));
  EXPECT_TRUE((lp == 0).all().item<bool>());
  EXPECT_TRUE((c == 0.5).all().item<bool>());
  EXPECT_TRUE((noise.mean() == 0).all().item<bool>());
}

TEST(HeaderExamples, Beta) {
  at::Generator generator = at::detail::createCPUGenerator(6);
  tdp::dist::Beta gripper(at::full({8}, 2.0), at::full({8}, 5.0));
  at::Tensor x = gripper.rsample({}, generator);
  at::Tensor lp = gripper.log_prob(x);
  EXPECT_EQ(lp.sizes(), (Shape{8}));
  EXPECT_NEAR(gripper.mean()[0].item<float>(), 2.0 / 7, 1e-6);
  EXPECT_NEAR(gripper.mode()[0].item<float>(), 1.0 / 5, 1e-6);
}

TEST(HeaderExamples, Delta) {
  at::Tensor action = at::randn({32, 6});
  tdp::dist::Delta actor(action);
  EXPECT_EQ(actor.sample({4}).sizes(), (Shape{4, 32, 6}));
  EXPECT_TRUE(at::equal(actor.mode(), action));
  EXPECT_TRUE((actor.log_prob(action) == INFINITY).all().item<bool>());
  EXPECT_EQ(actor.log_prob(action).sizes(), (Shape{32}));
  EXPECT_TRUE((actor.log_prob(action + 1) == -INFINITY).all().item<bool>());
}

TEST(HeaderExamples, TruncatedNormal) {
  at::Generator generator = at::detail::createCPUGenerator(7);
  at::Tensor loc = at::full({6}, 1.5), scale = at::ones({6});
  tdp::dist::TruncatedNormal torque(loc, scale, at::full({6}, -2.0), at::full({6}, 2.0));
  at::Tensor u = torque.rsample({}, generator);
  at::Tensor lp = torque.log_prob(u);
  at::Tensor m = torque.mean();
  at::Tensor median = torque.icdf(at::full({6}, 0.5));
  EXPECT_EQ(u.sizes(), (Shape{6}));
  EXPECT_TRUE(((u >= -2) & (u <= 2)).all().item<bool>());
  EXPECT_TRUE(lp.isfinite().all().item<bool>());
  EXPECT_TRUE((m < loc).all().item<bool>());  // pulled toward the interval's centre
  EXPECT_TRUE(at::allclose(torque.cdf(median), at::full({6}, 0.5), 1e-4, 1e-5));
}

TEST(HeaderExamples, TanhNormal) {
  at::Generator generator = at::detail::createCPUGenerator(8);
  at::Tensor loc = at::randn({32, 6}, generator), scale = at::ones({32, 6});
  tdp::dist::TanhNormal policy(loc, scale, tdp::dist::TanhNormalOptions().low(-2.0).high(2.0));
  at::Tensor action = policy.rsample({}, generator);
  at::Tensor lp = policy.log_prob(action);
  at::Tensor greedy = policy.deterministic_sample();
  EXPECT_EQ(action.sizes(), (Shape{32, 6}));
  EXPECT_TRUE(((action > -2) & (action < 2)).all().item<bool>());
  EXPECT_EQ(lp.sizes(), (Shape{32}));
  EXPECT_TRUE(at::allclose(greedy, 2 * loc.tanh()));
  EXPECT_THROW(policy.mode(), tdp::dist::NotImplementedError);
}

TEST(HeaderExamples, CompositeDistributionAndLpAggregate) {
  at::Generator generator = at::detail::createCPUGenerator(9);
  at::Tensor loc = at::zeros({3, 4}), scale = at::ones({3, 4}), logits = at::zeros({3, 10});
  tdp::TensorDict params({{{"cont", "loc"}, loc}, {{"cont", "scale"}, scale},
                          {{"nested", "disc", "logits"}, logits}}, {3});
  tdp::dist::CompositeDistribution dist(params, {{"cont", "normal"},
                                                 {{"nested", "disc"}, "categorical"}});
  tdp::TensorDict sample = dist.sample({4}, generator);
  EXPECT_EQ(sample.get("cont").sizes(), (Shape{4, 3, 4}));
  EXPECT_EQ(sample.get({"nested", "disc"}).sizes(), (Shape{4, 3}));
  {
    tdp::dist::CompositeLpAggregateGuard per_part(false);
    auto lp = dist.log_prob(sample);
    ASSERT_TRUE(std::holds_alternative<tdp::TensorDict>(lp));
    EXPECT_TRUE(std::get<tdp::TensorDict>(lp).contains("cont_log_prob"));
    EXPECT_TRUE(std::get<tdp::TensorDict>(lp).contains({"nested", "disc_log_prob"}));
  }
  {
    tdp::dist::CompositeLpAggregateGuard aggregate(true);
    at::Tensor lp = std::get<at::Tensor>(dist.log_prob(sample));
    EXPECT_EQ(lp.sizes(), (Shape{4, 3}));
  }
  tdp::dist::CompositeLpAggregateGuard mine(false, /*thread_local_only=*/true);
  EXPECT_FALSE(tdp::dist::composite_lp_aggregate());
}

TEST(HeaderExamples, Registry) {
  at::Tensor loc = at::zeros({2, 3}), scale = at::ones({2, 3});
  auto d = tdp::dist::make_distribution("tanh_normal", {{"loc", loc}, {"scale", scale}},
                                        {{"low", -2.0}, {"high", 2.0}, {"tanh_loc", true}});
  EXPECT_EQ(d->to_string(), "TanhNormal(loc: [2, 3], scale: [2, 3], low: -2, high: 2)");
  auto make_mine = [](const tdp::dist::Params& p) {
    return std::make_shared<tdp::dist::Normal>(p.at("loc"), p.at("scale"));
  };
  // Registered once per process (the test may be repeated with --gtest_repeat).
  if (!tdp::dist::DistributionRegistry::global().contains("laplace_like"))
  tdp::dist::DistributionRegistry::global().register_distribution(
      "laplace_like", {{{"loc", "scale"}}, {}},
      [&](const tdp::dist::Params& p, const tdp::dist::DistributionKwargs&) { return make_mine(p); });
  EXPECT_EQ(tdp::dist::make_distribution("laplace_like", {{"loc", loc}, {"scale", scale}})->name(),
            "Normal");
}

}  // namespace
