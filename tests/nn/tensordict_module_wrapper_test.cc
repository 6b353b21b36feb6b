// TensorDictModuleWrapper (sdk/nn/tensordict_module_wrapper.h): forwarding to the wrapped module.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_module_wrapper.h"
#include "tests/testing/module_keys.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using test_util::keys;
using test_util::make_td;

struct Doubling : TensorDictModuleWrapperImpl {
  using TensorDictModuleWrapperImpl::TensorDictModuleWrapperImpl;
  TensorDict forward_impl(TensorDict td, const std::optional<TensorDict>& out) override {
    td = TensorDictModuleWrapperImpl::forward_impl(td, out);
    return td.set("y", td.get("y") * 2);
  }
};

TEST(TensorDictModuleWrapperTest, ForwardsAndSharesParameters) {
  torch::nn::Linear linear(2, 2);
  TensorDictModule inner(linear, keys({"x"}, {"y"}));
  TensorDictModuleWrapper wrapper(inner);
  EXPECT_EQ(wrapper->in_keys(), inner->in_keys());
  EXPECT_TRUE(wrapper->named_parameters()["td_module.module.weight"].is_same(linear->weight));
  TensorDict td = make_td({{"x", torch::ones({1, 2})}}, {1});
  at::Tensor direct = inner(td.clone()).get("y");
  EXPECT_TRUE(wrapper(td.clone()).get("y").equal(direct));
  auto doubling = std::make_shared<Doubling>(inner);
  EXPECT_TRUE(doubling->forward(td.clone()).get("y").equal(direct * 2));
}

}  // namespace
}  // namespace tdp::nn
