// from_module and soft_update (sdk/nn/from_module.h): keys as TensorDict.from_module names them,
// shared storage, and the target-network rule applied in place.
#include "sdk/nn/from_module.h"

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

}  // namespace
}  // namespace tdp::nn
