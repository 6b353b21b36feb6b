// mappings, add_custom_mapping, BiasedSoftplus, inv_softplus, expln and rand_one_hot.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <thread>

#include "sdk/nn/biased_softplus.h"
#include "sdk/nn/mappings.h"
#include "sdk/nn/rand_one_hot.h"
#include "tests/testing/error_of.h"

namespace tdp::nn {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;

TEST(MappingsTest, BuiltIns) {
  at::Tensor x = torch::tensor({-2.0, 0.0, 3.0});
  EXPECT_TRUE(mappings("softplus")(x).allclose(torch::log1p(torch::exp(x))));
  EXPECT_TRUE(mappings("exp")(x).allclose(x.exp()));
  EXPECT_TRUE(mappings("relu")(x).equal(torch::tensor({0.0, 0.0, 3.0})));
  EXPECT_TRUE(mappings("abs")(x).equal(torch::tensor({2.0, 0.0, 3.0})));
  EXPECT_TRUE(mappings("none")(x).equal(x));
  EXPECT_TRUE(mappings("expln")(x).allclose(expln(x)));
  EXPECT_NEAR(mappings("biased_softplus")(torch::zeros({1})).item<double>(), 1.0, 1e-5);
}

TEST(MappingsTest, BiasedSoftplusByName) {
  EXPECT_NEAR(mappings("biased_softplus_2.5")(torch::zeros({1})).item<double>(), 2.5, 1e-5);
  Mapping m = mappings("biased_softplus_2.0_0.5");
  EXPECT_NEAR(m(torch::zeros({1})).item<double>(), 2.0, 1e-5);
  EXPECT_NEAR(m(torch::full({1}, -100.0)).item<double>(), 0.5, 1e-5);
}

TEST(MappingsTest, UnknownNamesListTheKnownOnes) {
  // Other tests in this binary may have registered custom mappings, which are listed too.
  std::vector<std::string> names = mapping_names();
  for (const char* builtin : {"abs", "biased_softplus", "biased_softplus_<bias>",
                              "biased_softplus_<bias>_<min_val>", "exp", "expln", "none", "relu",
                              "softplus"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), builtin), names.end()) << builtin;
  }
  std::string listed;
  for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + name;
  EXPECT_EQ(error_of<std::invalid_argument>([] { mappings("softmax"); }),
            "Unknown mapping 'softmax'; known mappings: " + listed + ".");
  EXPECT_THAT(error_of<std::invalid_argument>([] { mappings("biased_softplus_1_2_3"); }),
              HasSubstr("Unknown mapping 'biased_softplus_1_2_3' (invalid number of args"));
  EXPECT_THAT(error_of<std::invalid_argument>([] { mappings("biased_softplus_one"); }),
              HasSubstr("(the bias and min_val must be numbers)"));
}

TEST(MappingsTest, CustomMappingsAreThreadSafe) {
  add_custom_mapping("zeros", [](const at::Tensor& x) { return torch::zeros_like(x); });
  EXPECT_TRUE(mappings("zeros")(torch::ones({3})).eq(0).all().item<bool>());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        const std::string name = "custom_" + std::to_string(t) + "_" + std::to_string(i);
        add_custom_mapping(name, [i](const at::Tensor& x) { return x + i; });
        EXPECT_EQ(mappings(name)(torch::zeros({})).item<float>(), static_cast<float>(i));
        mappings("softplus");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mappings("custom_3_199")(torch::zeros({})).item<float>(), 199.0f);
  EXPECT_THROW(add_custom_mapping("", [](const at::Tensor& x) { return x; }), std::invalid_argument);
}

TEST(BiasedSoftplusTest, ValuesAndGradientsAreThoseOfTheOutOfPlaceExpression) {
  // forward adds min_val in place on softplus's output; autograd must see the same function.
  BiasedSoftplus module(BiasedSoftplusOptions(1.0).min_val(0.01));
  const at::Tensor input = torch::linspace(-30.0, 30.0, 41).reshape({41, 1});
  at::Tensor x = input.clone().requires_grad_(true);
  at::Tensor reference_x = input.clone().requires_grad_(true);
  at::Tensor y = module(x);
  at::Tensor reference = torch::softplus(reference_x + module->shift()) + 0.01;
  EXPECT_TRUE(y.equal(reference));
  const at::Tensor weights = torch::linspace(0.5, 2.0, 41).reshape({41, 1});
  (y * weights).sum().backward();
  (reference * weights).sum().backward();
  EXPECT_TRUE(x.grad().equal(reference_x.grad()));
}

TEST(BiasedSoftplusTest, ZeroMapsToBias) {
  BiasedSoftplus module(BiasedSoftplusOptions(1.0).min_val(0.1));
  EXPECT_NEAR(module(torch::zeros({2})).max().item<double>(), 1.0, 1e-6);
  EXPECT_GT(module(torch::full({1}, -50.0)).item<double>(), 0.1 - 1e-6);
  EXPECT_NEAR(module->shift(), inv_softplus(0.9), 1e-12);
  std::ostringstream stream;
  stream << *module;
  EXPECT_EQ(stream.str(), "tdp::nn::BiasedSoftplus(bias=1, min_val=0.1)");
}

TEST(InvSoftplusTest, InvertsSoftplus) {
  for (double v : {0.1, 1.0, 5.0}) {
    EXPECT_NEAR(std::log1p(std::exp(inv_softplus(v))), v, 1e-9);
  }
  at::Tensor t = torch::tensor({0.1, 1.0, 5.0}, torch::kFloat64);
  EXPECT_TRUE(torch::softplus(inv_softplus(t)).allclose(t));
  EXPECT_NEAR(inv_softplus(0.0), std::log(1e-6), 1e-12);  // clamped, not -inf
}

TEST(ExplnTest, ValuesAndGradients) {
  at::Tensor x = torch::tensor({-1.0, 0.0, 1.0, 1000.0}, torch::kFloat64).requires_grad_();
  at::Tensor y = expln(x);
  EXPECT_NEAR(y[0].item<double>(), std::exp(-1.0), 1e-12);
  EXPECT_NEAR(y[1].item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(y[2].item<double>(), std::log(2.0) + 1, 1e-12);
  EXPECT_NEAR(y[3].item<double>(), std::log1p(1000.0) + 1, 1e-9);
  y.sum().backward();
  EXPECT_FALSE(x.grad().isnan().any().item<bool>());
}

TEST(RandOneHotTest, OneHotAndReproducible) {
  torch::manual_seed(0);
  at::Tensor logits = torch::randn({64, 6});
  at::Tensor sample = rand_one_hot(logits);
  EXPECT_EQ(sample.scalar_type(), torch::kLong);
  EXPECT_EQ(sample.sizes(), logits.sizes());
  EXPECT_TRUE(sample.sum(-1).eq(1).all().item<bool>());
  at::Generator g1 = at::detail::createCPUGenerator(42);
  at::Generator g2 = at::detail::createCPUGenerator(42);
  EXPECT_TRUE(rand_one_hot(logits, true, g1).equal(rand_one_hot(logits, true, g2)));
  at::Tensor probs = torch::tensor({0.0, 1.0, 0.0}).expand({10, 3});
  EXPECT_TRUE(rand_one_hot(probs, /*do_softmax=*/false).argmax(-1).eq(1).all().item<bool>());
}

}  // namespace
}  // namespace tdp::nn
