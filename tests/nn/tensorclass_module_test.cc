// Typed modules: structs declared with TDP_TENSORCLASS read from and written to their keys
// (nested ones included), a TensorClassModuleBase in a TensorDictSequential next to ordinary
// modules, its parameters reachable, and missing inputs named.
#include "sdk/nn/tensorclass_module.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "tests/testing/error_of.h"

namespace typed_test {
struct Observation {
  at::Tensor observation;
  at::Tensor goal;
};
struct Action {
  at::Tensor action;
  at::Tensor log_scale;
};
}  // namespace typed_test

TDP_TENSORCLASS(typed_test::Observation, TDP_FIELD(observation, "observation"), TDP_FIELD(goal, "goal", "position"));
TDP_TENSORCLASS(typed_test::Action, TDP_FIELD(action, "action"), TDP_FIELD(log_scale, "stats", "log_scale"));

namespace tdp::nn {
namespace {

using typed_test::Action;
using typed_test::Observation;

struct TypedPolicy : TensorClassModuleBase<Observation, Action> {
  TypedPolicy() : linear(register_module("linear", torch::nn::Linear(6, 2))) {}
  Action forward(const Observation& in) override {
    const at::Tensor mean = linear->forward(at::cat({in.observation, in.goal}, -1));
    return {at::tanh(mean), at::zeros_like(mean)};
  }
  torch::nn::Linear linear;
};

TEST(TensorClassModuleTest, FieldsComeFromAndGoToTheirKeys) {
  EXPECT_EQ(tensorclass_keys<Observation>(), (std::vector<NestedKey>{"observation", {"goal", "position"}}));
  TensorDict td({{"observation", at::ones({3, 4})}, {{"goal", "position"}, at::zeros({3, 2})}}, {3});
  Observation in = from_tensordict<Observation>(td);
  EXPECT_TRUE(in.observation.is_same(td.get("observation")));
  EXPECT_TRUE(in.goal.is_same(td.get({"goal", "position"})));
}

TEST(TensorClassModuleTest, ATypedModuleRunsInASequenceAsATensorDictModule) {
  torch::manual_seed(0);
  auto typed = std::make_shared<TypedPolicy>();
  std::shared_ptr<TensorDictModuleBase> module = typed->as_td_module();
  EXPECT_EQ(module->in_keys(), (std::vector<NestedKey>{"observation", {"goal", "position"}}));
  EXPECT_EQ(module->out_keys(), (std::vector<NestedKey>{"action", {"stats", "log_scale"}}));
  EXPECT_EQ(module->parameters().size(), 2u) << "the typed module's Linear is reachable";
  TensorDictModule scale([](const at::Tensor& action) { return action * 2; },
                         TensorDictModuleOptions({"action"}, {"scaled"}));
  TensorDictSequential sequence({TensorDictModuleRef(module), scale});
  TensorDict td({{"observation", at::randn({5, 4})}, {{"goal", "position"}, at::randn({5, 2})}}, {5});
  TensorDict out = sequence->forward(td);
  const at::Tensor expected =
      at::tanh(typed->linear->forward(at::cat({td.get("observation"), td.get({"goal", "position"})}, -1)));
  EXPECT_TRUE(at::allclose(out.get("action"), expected));
  EXPECT_TRUE(at::allclose(out.get("scaled"), expected * 2));
  EXPECT_EQ(out.get({"stats", "log_scale"}).sizes().vec(), (std::vector<int64_t>{5, 2}));
}

TEST(TensorClassModuleTest, AMissingInputIsAKeyErrorNamingTheKey) {
  auto module = std::make_shared<TypedPolicy>()->as_td_module();
  TensorDict td({{"observation", at::randn({2, 4})}}, {2});
  EXPECT_THAT(test_util::error_of<KeyError>([&] { module->forward(td); }), ::testing::HasSubstr("goal"));
}

}  // namespace
}  // namespace tdp::nn
