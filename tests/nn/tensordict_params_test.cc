// Parameters as a TensorDict (sdk/nn/tensordict_params.h): keys as TensorDict.from_module names them,
// shared storage, and the target-network rule applied in place.
#include "sdk/nn/tensordict_params.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <stdexcept>

#include "tests/testing/error_of.h"

namespace tdp::nn {
namespace {

using ::testing::UnorderedElementsAre;
using ::tdp::test_util::error_of;

torch::nn::Sequential make_net() { return torch::nn::Sequential(torch::nn::Linear(2, 3), torch::nn::BatchNorm1d(3)); }

TEST(FromModule, NestsParametersAndBuffersBySubmodulePathAndSharesTheirStorage) {
  torch::nn::Sequential net = make_net();
  TensorDict params = from_module(*net);
  EXPECT_TRUE(params.batch_size().empty());
  // The keys tensordict 0.13's TensorDict.from_module gives for the same torch.nn.Sequential.
  EXPECT_THAT(params.keys(/*include_nested=*/true, /*leaves_only=*/true),
              UnorderedElementsAre(NestedKey{"0", "weight"}, NestedKey{"0", "bias"}, NestedKey{"1", "weight"},
                                   NestedKey{"1", "bias"}, NestedKey{"1", "running_mean"},
                                   NestedKey{"1", "running_var"}, NestedKey{"1", "num_batches_tracked"}));
  EXPECT_EQ(params.get({"0", "weight"}).data_ptr(), net[0]->as<torch::nn::Linear>()->weight.data_ptr());
}

TEST(SoftUpdate, MovesTheTargetTauOfTheWayToTheSourceInPlace) {
  torch::manual_seed(0);
  torch::nn::Sequential source_net = make_net();
  torch::nn::Sequential target_net = make_net();
  TensorDict source = from_module(*source_net);
  TensorDict target = from_module(*target_net);
  const at::Tensor before = target.get({"0", "weight"}).clone();
  const at::Tensor toward = source.get({"0", "weight"});
  target.get({"1", "num_batches_tracked"}).fill_(7);
  soft_update(target, source, 0.25);
  const at::Tensor expected = 0.75 * before + 0.25 * toward;
  EXPECT_TRUE(target_net[0]->as<torch::nn::Linear>()->weight.allclose(expected, 1e-6, 1e-6));
  EXPECT_EQ(target.get({"1", "num_batches_tracked"}).item<int64_t>(), 7);  // integer buffers are kept
  soft_update(target, source, 1.0);
  EXPECT_TRUE(target.get({"0", "bias"}).equal(source.get({"0", "bias"})));
}

TEST(SoftUpdate, BadTauOrMismatchedEntriesAreErrorsThatChangeNothing) {
  TensorDict target = from_module(*make_net());
  const at::Tensor before = target.get({"0", "weight"}).clone();
  EXPECT_EQ(error_of<std::invalid_argument>([&] { soft_update(target, from_module(*make_net()), 1.5); }),
            "soft_update: tau must be in [0, 1], got 1.500000");
  TensorDict other = from_module(*torch::nn::Sequential(torch::nn::Linear(2, 4), torch::nn::BatchNorm1d(4)));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { soft_update(target, other, 0.5); }),
              ::testing::HasSubstr("in the source and"));
  TensorDict partial = from_module(*torch::nn::Sequential(torch::nn::Linear(2, 3)));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { soft_update(target, partial, 0.5); }),
              ::testing::HasSubstr("the source has no entry"));
  EXPECT_TRUE(target.get({"0", "weight"}).equal(before));
}

TEST(FromModules, StacksSameShapedModulesOnANewLeadingDim) {
  std::vector<std::shared_ptr<torch::nn::Module>> nets = {make_net().ptr(), make_net().ptr(), make_net().ptr()};
  TensorDict stacked = from_modules(nets);
  EXPECT_EQ(stacked.batch_size().vec(), (std::vector<int64_t>{3}));
  EXPECT_EQ(stacked.get({"0", "weight"}).sizes().vec(), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_TRUE(stacked.get({"0", "weight"})[1].equal(from_module(*nets[1]).get({"0", "weight"})));
  nets.push_back(torch::nn::Sequential(torch::nn::Linear(2, 4), torch::nn::BatchNorm1d(4)).ptr());
  EXPECT_EQ(error_of<std::invalid_argument>([&] { from_modules(nets); }),
            "from_modules: entry ('0', 'weight') is [4, 2] in module 3 and [3, 2] in module 0");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { from_modules({}); }), "from_modules: no modules");
}

TEST(ToModule, RunsTheModuleWithOtherParametersAndRestoresItsOwnEvenOnAnException) {
  torch::nn::Linear linear(2, 3);
  torch::nn::Linear other(2, 3);
  const at::Tensor x = at::randn({4, 2});
  const at::Tensor own = linear->forward(x);
  {
    ToModule swapped(*linear, from_module(*other));
    EXPECT_TRUE(linear->forward(x).allclose(other->forward(x)));
  }
  EXPECT_TRUE(linear->forward(x).equal(own));
  try {
    ToModule swapped(*linear, from_module(*other));
    throw std::runtime_error("inside");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(linear->forward(x).equal(own));
  // Entries the module does not have, or has with another shape, change nothing.
  TensorDict wrong = from_module(*torch::nn::Linear(2, 5));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { ToModule swapped(*linear, wrong); }),
            "to_module: entry 'weight' is Float[5, 2]; the module's is Float[3, 2]");
  TensorDict extra({{"scale", at::ones({1})}}, {});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { ToModule swapped(*linear, extra); }),
            "to_module: the module has no parameter or buffer 'scale'");
  EXPECT_TRUE(linear->forward(x).equal(own));
}

TEST(TensorDictParams, RegistersTheEntriesAsParametersAndBuffers) {
  TensorDict td({{{"layer", "weight"}, at::randn({3, 2})}, {"steps", at::zeros({1}, at::kLong)}}, {});
  TensorDictParams params(td);
  const auto named = params->named_parameters();
  ASSERT_NE(named.find("layer.weight"), nullptr);
  EXPECT_TRUE(named["layer.weight"].requires_grad());
  EXPECT_TRUE(params->data().get({"layer", "weight"}).is_same(named["layer.weight"]));
  EXPECT_NE(params->named_buffers().find("steps"), nullptr);
  // no_convert keeps a from_module() result's parameters and buffers apart.
  TensorDictParams kept(from_module(*make_net()), /*no_convert=*/true);
  EXPECT_NE(kept->named_parameters().find("0.weight"), nullptr);
  EXPECT_EQ(kept->named_parameters().find("1.running_mean"), nullptr);
  EXPECT_NE(kept->named_buffers().find("1.running_mean"), nullptr);
}

}  // namespace
}  // namespace tdp::nn
