// The usage examples at the top of the sdk/probabilistic headers (and of
// sdk/nn/normal_param_extractor.h), compiled and run, so they stay true.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/probabilistic/any_distribution.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/probabilistic/probabilistic_sequential.h"

namespace {

using namespace tdp::nn;  // NOLINT: as the examples are written

TEST(HeaderExamples, ProbabilisticModule) {
  tdp::TensorDict td({{"loc", torch::zeros({3, 4})}, {"scale", torch::ones({3, 4})}}, {3});
  ProbabilisticTensorDictModule actor(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
      .distribution("normal").return_log_prob(true).seed(0));
  actor(td);
  EXPECT_TRUE(td.contains("action"));
  EXPECT_TRUE(td.contains("action_log_prob"));
  AnyDistribution d = actor->get_dist(td);
  EXPECT_EQ(d.to_string(), "Normal(loc: [3, 4], scale: [3, 4])");
  at::Tensor before = td.get("action");
  {
    InteractionTypeGuard explore(InteractionType::kRandom, /*thread_local_only=*/true);
    actor(td);
  }
  EXPECT_FALSE(td.get("action").equal(before));
}

TEST(HeaderExamples, AnyDistribution) {
  tdp::TensorDict td({{"loc", torch::zeros({3, 4})}, {"scale", torch::ones({3, 4})},
                      {"action", torch::zeros({3, 4})}},
                     {3});
  ProbabilisticTensorDictModule actor(
      ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"}).distribution("normal"));
  AnyDistribution d = actor->get_dist(td);
  ASSERT_FALSE(d.is_composite());
  at::Tensor lp = d.distribution()->log_prob(td.get("action"));
  EXPECT_EQ(lp.sizes(), (std::vector<int64_t>{3, 4}));
  std::ostringstream out;
  out << d;
  EXPECT_EQ(out.str(), "Normal(loc: [3, 4], scale: [3, 4])");
  EXPECT_THROW(d.composite(), std::logic_error);
}

TEST(HeaderExamples, ProbabilisticSequential) {
  torch::nn::Sequential mlp(torch::nn::Linear(17, 64), torch::nn::Tanh(), torch::nn::Linear(64, 12));
  ProbabilisticTensorDictSequential actor({
      TensorDictModule(mlp, TensorDictModuleOptions({"observation"}, {"param"})),
      TensorDictModule(NormalParamExtractor(), TensorDictModuleOptions({"param"}, {"loc", "scale"})),
      ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
          .distribution("normal").return_log_prob(true))});
  tdp::TensorDict td({{"observation", torch::randn({5, 17})}}, {5});
  actor(td);
  EXPECT_EQ(td.keys(), (std::vector<tdp::NestedKey>{"observation", "param", "loc", "scale", "action",
                                                    "action_log_prob"}));
  AnyDistribution d = actor->get_dist(td);
  EXPECT_EQ(d.to_string(), "Normal(loc: [5, 6], scale: [5, 6])");
  LogProb lp = actor->log_prob(td);
  EXPECT_TRUE(std::get<at::Tensor>(lp).allclose(td.get("action_log_prob")));
}

TEST(HeaderExamples, NormalParamExtractor) {
  NormalParamExtractor extractor;
  auto [loc, scale] = extractor(torch::randn({3, 4}));
  EXPECT_EQ(loc.sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(scale.sizes(), (std::vector<int64_t>{3, 2}));
  AddStateIndependentNormalScale add_scale(AddStateIndependentNormalScaleOptions({2}));
  auto [loc2, scale2] = add_scale(loc);
  EXPECT_TRUE(scale2.equal(torch::ones({3, 2})));
  TensorDictModule params(extractor, TensorDictModuleOptions({"param"}, {"loc", "scale"}));
  EXPECT_EQ(params->out_keys(), (std::vector<tdp::NestedKey>{"loc", "scale"}));
}

TEST(HeaderExamples, CompositeLpAggregate) {
  CompositeLpAggregateGuard aggregate(true, /*thread_local_only=*/true);
  ProbabilisticTensorDictModule actor(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"a"})
                                          .distribution("normal").return_log_prob(true));
  EXPECT_TRUE(composite_lp_aggregate());
  EXPECT_EQ(actor->log_prob_key(), tdp::NestedKey("sample_log_prob"));
}

}  // namespace
