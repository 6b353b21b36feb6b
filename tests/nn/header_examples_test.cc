// The usage examples at the top of the sdk/nn headers (and the README), compiled and run, so
// that they stay true.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cmath>

#include "sdk/log/log.h"
#include "sdk/nn/nn.h"
#include "sdk/nn/safe_tanh_clamp.h"

namespace {

struct AddOne : tdp::nn::TensorDictModuleBase {
  AddOne() : TensorDictModuleBase("AddOne", {"a"}, {"b"}) {}
  tdp::TensorDict forward_impl(tdp::TensorDict td, const std::optional<tdp::TensorDict>&) override {
    return td.set("b", td.get("a") + 1);
  }
};

struct AddNoise : tdp::nn::TensorDictModuleWrapperImpl {
  using TensorDictModuleWrapperImpl::TensorDictModuleWrapperImpl;
  tdp::TensorDict forward_impl(tdp::TensorDict td, const std::optional<tdp::TensorDict>& out) override {
    td = TensorDictModuleWrapperImpl::forward_impl(td, out);
    return td.set("action", td.get("action") + 0.1 * torch::randn_like(td.get("action")));
  }
};

struct Scaler {
  at::Tensor apply(at::Tensor x) { return x * 2; }
};

TEST(HeaderExamplesTest, SafeTanhClamp) {
  const at::Tensor pre_tanh = torch::tensor({-30.0f, -0.5f, 0.0f, 0.5f, 30.0f});
  at::Tensor action = tdp::nn::safe_tanh_clamp(pre_tanh.tanh());
  at::Tensor back = tdp::nn::safe_tanh_clamp(action).atanh();
  EXPECT_TRUE(action.abs().lt(1).all().item<bool>());
  EXPECT_TRUE(back.isfinite().all().item<bool>());
  // The limit is 1 - torch.finfo(dtype).resolution, rounded to the dtype.
  EXPECT_EQ(action[4].item<float>(), static_cast<float>(1.0 - 1e-6));
  EXPECT_EQ(action[0].item<float>(), -static_cast<float>(1.0 - 1e-6));
  EXPECT_EQ(action[1].item<float>(), std::tanh(-0.5f));
  EXPECT_EQ(tdp::nn::safe_tanh_clamp(torch::ones({1}, at::kDouble)).item<double>(), 1.0 - 1e-15);
  EXPECT_EQ(tdp::nn::safe_tanh_clamp(torch::ones({1}, at::kHalf)).item<float>(),
            static_cast<float>(static_cast<at::Half>(1.0 - 1e-3)));
  EXPECT_EQ(tdp::nn::safe_tanh_clamp(-torch::ones({1}, at::kBFloat16)).item<float>(),
            -static_cast<float>(static_cast<at::BFloat16>(1.0 - 1e-2)));
}

TEST(HeaderExamplesTest, TensorDictModuleBase) {
  tdp::TensorDict td({{"a", torch::zeros({2})}}, {2});
  auto module = std::make_shared<AddOne>();
  module->forward(td);
  EXPECT_TRUE(td.get("b").eq(1).all().item<bool>());
}

TEST(HeaderExamplesTest, TensorDictModule) {
  tdp::nn::TensorDictModule actor(torch::nn::Linear(17, 6),
      tdp::nn::TensorDictModuleOptions({"observation"}, {"action"}));
  tdp::TensorDict td({{"observation", torch::randn({4, 17})}}, {4});
  actor(td);
  EXPECT_EQ(td.get("action").sizes(), (std::vector<int64_t>{4, 6}));
  tdp::nn::TensorDictModule both([](const at::Tensor& x) { return std::make_tuple(x - 1, x + 1); },
      tdp::nn::TensorDictModuleOptions({"x"}, {"x_minus", "_"}));
  tdp::TensorDict out = both(tdp::TensorDict({{"x", torch::zeros({})}}, {}));
  EXPECT_EQ(out.get("x_minus").item<float>(), -1.0f);
}

TEST(HeaderExamplesTest, TensorDictSequentialAndNn) {
  using tdp::nn::TensorDictModule, tdp::nn::TensorDictModuleOptions;
  tdp::nn::TensorDictSequential policy({
      TensorDictModule(torch::nn::Linear(17, 64), TensorDictModuleOptions({"observation"}, {"hidden"})),
      TensorDictModule(torch::nn::Linear(64, 6), TensorDictModuleOptions({"hidden"}, {"action"}))});
  tdp::TensorDict td({{"observation", torch::randn({4, 17})}}, {4});
  policy(td);
  EXPECT_TRUE(td.contains("hidden"));
  EXPECT_EQ(policy->in_keys(), std::vector<tdp::NestedKey>{"observation"});
  policy->select_out_keys({"action"});
  tdp::TensorDict fresh({{"observation", torch::randn({4, 17})}}, {4});
  policy(fresh);
  EXPECT_FALSE(fresh.contains("hidden"));
  EXPECT_TRUE(fresh.contains("action"));
}

TEST(HeaderExamplesTest, Readme) {
  using namespace tdp::nn;
  tdp::TensorDict td({{"observation", torch::randn({4, 17})}}, {4});
  at::Tensor obs = td.get("observation");
  TensorDictSequential policy({
      TensorDictModule(torch::nn::Linear(17, 64), TensorDictModuleOptions({"observation"}, {"hidden"})),
      TensorDictModule([](const at::Tensor& h) { return h.relu(); }, TensorDictModuleOptions({"hidden"}, {"hidden"})),
      TensorDictModule(torch::nn::Linear(64, 6), TensorDictModuleOptions({"hidden"}, {"action"}))});
  policy(td);
  policy->select_out_keys({"action"});
  at::Tensor action = dispatch(policy, {obs})[0];
  EXPECT_TRUE(action.equal(td.get("action")));
}

TEST(HeaderExamplesTest, WrapModule) {
  tdp::nn::TensorDictModule scale([](const at::Tensor& x) { return x * 2; },
                                  tdp::nn::TensorDictModuleOptions({"cost"}, {"cost"}));
  tdp::nn::WrapModule flatten([](tdp::TensorDict td) { return td.reshape({-1}); });
  tdp::nn::TensorDictSequential seq({scale, flatten});
  tdp::nn::WrapModule reward(
      [](tdp::TensorDict td) { return td.set("reward", -td.get("cost")); },
      tdp::nn::WrapModuleOptions().in_keys({"cost"}).out_keys({"reward"}));
  tdp::TensorDict td = reward(seq(tdp::TensorDict({{"cost", torch::ones({2, 3})}}, {2, 3})));
  EXPECT_EQ(td.batch_size().vec(), (std::vector<int64_t>{6}));
  EXPECT_TRUE(td.get("reward").eq(-2).all().item<bool>());
}

TEST(HeaderExamplesTest, WrapperDispatchAsModule) {
  tdp::nn::TensorDictModule actor(torch::nn::Linear(3, 2), tdp::nn::TensorDictModuleOptions({"obs"}, {"action"}));
  auto noisy = std::make_shared<AddNoise>(actor);
  tdp::TensorDict td = noisy->forward(tdp::TensorDict({{"obs", torch::zeros({1, 3})}}, {1}));
  EXPECT_EQ(td.get("action").sizes(), (std::vector<int64_t>{1, 2}));

  at::Tensor x = torch::zeros({1, 1});
  tdp::nn::TensorDictModule mod(torch::nn::Linear(1, 1),
      tdp::nn::TensorDictModuleOptions({{"a", "c"}}, {"b"}));
  at::Tensor b = tdp::nn::dispatch(mod, {}, {{"a_c", x}})[0];
  at::Tensor b2 = tdp::nn::dispatch(mod, {x})[0];
  EXPECT_TRUE(b.equal(b2));

  auto add_one = tdp::nn::as_tensordict_module(
      [](const at::Tensor& c) { return c + 1; }, {"c"}, {"d"});
  Scaler scaler;
  auto scale = tdp::nn::as_tensordict_module(&Scaler::apply, &scaler, {"x"}, {"y"});
  tdp::TensorDict cd({{"c", torch::zeros({})}, {"x", torch::ones({})}}, {});
  add_one(cd);
  scale(cd);
  EXPECT_EQ(cd.get("d").item<float>(), 1.0f);
  EXPECT_EQ(cd.get("y").item<float>(), 2.0f);
}

TEST(HeaderExamplesTest, MappingsAndHelpers) {
  at::Tensor net_output = torch::zeros({3});
  tdp::nn::Mapping scale = tdp::nn::mappings("biased_softplus_1.0");
  at::Tensor s = scale(net_output);
  EXPECT_TRUE(s.allclose(torch::ones({3})));
  tdp::nn::add_custom_mapping("square", [](const at::Tensor& x) { return x * x; });
  EXPECT_EQ(tdp::nn::mappings("square")(torch::full({}, 3.0)).item<float>(), 9.0f);

  tdp::nn::BiasedSoftplus scale_map(tdp::nn::BiasedSoftplusOptions(1.0).min_val(0.01));
  EXPECT_TRUE(scale_map(torch::zeros({3})).allclose(torch::ones({3})));
  double x = tdp::nn::inv_softplus(2.0);
  EXPECT_NEAR(std::log1p(std::exp(x)), 2.0, 1e-12);

  at::Tensor logits = torch::randn({4, 6});
  at::Tensor action = tdp::nn::rand_one_hot(logits);
  at::Generator gen = at::detail::createCPUGenerator(42);
  at::Tensor same = tdp::nn::rand_one_hot(logits, true, gen);
  EXPECT_EQ(action.sizes(), same.sizes());
}

TEST(HeaderExamplesTest, SkipExisting) {
  tdp::nn::TensorDictModule policy([](const at::Tensor& o) { return o + 1; },
                                   tdp::nn::TensorDictModuleOptions({"obs"}, {"value"}));
  tdp::TensorDict td({{"obs", torch::zeros({})}, {"value", torch::zeros({})}}, {});
  {
    tdp::nn::SkipExistingGuard guard(true);
    policy(td);
  }
  EXPECT_EQ(td.get("value").item<float>(), 0.0f);
  {
    tdp::nn::SkipExistingGuard only({"value"}, /*thread_local_=*/true);
    policy(td);
  }
  EXPECT_EQ(td.get("value").item<float>(), 0.0f);
  policy(td);
  EXPECT_EQ(td.get("value").item<float>(), 1.0f);
  tdp::logger()->debug("the SDK logger is reachable");
}

}  // namespace
