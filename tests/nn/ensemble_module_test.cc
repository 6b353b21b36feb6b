// EnsembleModule: tensordict's shapes (a leading num_copies dim on outputs and batch size),
// independently initialized copies, the batched path equal to the loop path and to each copy run
// by hand, chained ensembles (expand_input false), gradients on the batched path, and errors.
#include "sdk/nn/ensemble_module.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <stdexcept>
#include <vector>

#include "sdk/nn/networks.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/tensordict/tensordict.h"
#include "tests/testing/error_of.h"

namespace tdp::nn {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;

TensorDict batch_of(int64_t rows, int64_t width, uint64_t seed = 0) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return TensorDict({{"obs", at::randn({rows, width}, generator)}}, {rows});
}

TensorDictModule critic(const std::vector<int64_t>& hidden, bool layer_norm = false) {
  return TensorDictModule(Mlp(MlpOptions(5, hidden, 1).activation("tanh").layer_norm(layer_norm)),
                          TensorDictModuleOptions({"obs"}, {"value"}));
}

// A second ensemble with the first one's stacked parameters, forced onto `path`.
EnsembleModule same_copies(const EnsembleModule& ensemble, TensorDictModuleRef template_module, EnsemblePath path) {
  EnsembleModule other(template_module, EnsembleModuleOptions(ensemble->options().num_copies())
                                            .expand_input(ensemble->options().expand_input())
                                            .path(path));
  torch::NoGradGuard no_grad;
  const TensorDict from = ensemble->params();
  const TensorDict to = other->params();
  for (const NestedKey& key : from.keys(/*include_nested=*/true, /*leaves_only=*/true)) to.get(key).copy_(from.get(key));
  return other;
}

TEST(EnsembleModuleTest, OutputsAndBatchSizeGainTheCopiesDim) {
  torch::manual_seed(0);
  EnsembleModule ensemble(critic({16}), EnsembleModuleOptions(3));
  EXPECT_EQ(ensemble->in_keys(), std::vector<NestedKey>{"obs"});
  EXPECT_EQ(ensemble->out_keys(), std::vector<NestedKey>{"value"});
  TensorDict out = ensemble->forward(batch_of(10, 5));
  EXPECT_EQ(out.batch_size().vec(), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(out.get("obs").sizes().vec(), (std::vector<int64_t>{3, 10, 5}));
  EXPECT_EQ(out.get("value").sizes().vec(), (std::vector<int64_t>{3, 10, 1}));
  // Independently initialized: the copies disagree.
  EXPECT_FALSE(at::allclose(out.get("value")[0], out.get("value")[1]));
}

TEST(EnsembleModuleTest, StackedParametersAreRegisteredAtTheModulesNames) {
  torch::manual_seed(0);
  auto template_module = critic({16});
  EnsembleModule ensemble(template_module, EnsembleModuleOptions(4));
  const auto named = ensemble->named_parameters();
  ASSERT_NE(named.find("params.module.layers.0.weight"), nullptr);
  EXPECT_EQ(named["params.module.layers.0.weight"].sizes().vec(), (std::vector<int64_t>{4, 16, 5}));
  ASSERT_NE(named.find("module.module.layers.0.weight"), nullptr) << "the template stays registered, as in tensordict";
  EXPECT_EQ(ensemble->params().get({"module", "layers", "2", "bias"}).sizes().vec(), (std::vector<int64_t>{4, 1}));
  // reset_parameters re-initializes every copy and leaves the template alone.
  const at::Tensor before = ensemble->params().get({"module", "layers", "0", "weight"}).clone();
  const at::Tensor template_before = template_module->named_parameters()["module.layers.0.weight"].clone();
  ensemble->reset_parameters_recursive();
  const at::Tensor after = ensemble->params().get({"module", "layers", "0", "weight"});
  for (int64_t copy = 0; copy < 4; ++copy) EXPECT_FALSE(at::equal(before[copy], after[copy])) << copy;
  EXPECT_FALSE(at::equal(after[0], after[1]));
  EXPECT_TRUE(at::equal(template_module->named_parameters()["module.layers.0.weight"], template_before));
}

TEST(EnsembleModuleTest, BatchedEqualsLoopEqualsEachCopyByHand) {
  torch::manual_seed(1);
  auto linear = torch::nn::Linear(5, 3);
  TensorDictModule by_linear(linear, TensorDictModuleOptions({"obs"}, {"out"}));
  TensorDictModule tanh([](const at::Tensor& x) { return at::tanh(x); }, TensorDictModuleOptions({"out"}, {"h"}));
  TensorDictModule head(Mlp(MlpOptions(3, {8, 8}, 2).activation("elu").layer_norm(true)),
                        TensorDictModuleOptions({"h"}, {"y"}));
  TensorDictSequential sequence({by_linear, tanh, head});
  for (const TensorDictModuleRef& module : {TensorDictModuleRef(by_linear), TensorDictModuleRef(critic({16, 16}, true)),
                                            TensorDictModuleRef(sequence)}) {
    EnsembleModule batched(module, EnsembleModuleOptions(5).path(EnsemblePath::kBatched));
    EXPECT_EQ(batched->unbatchable_reason(), "");
    EnsembleModule looped = same_copies(batched, module, EnsemblePath::kLoop);
    for (int64_t rows : {1, 7}) {
      const TensorDict input = batch_of(rows, 5, rows);
      const TensorDict a = batched->forward(input);
      TensorDict b;
      {
        torch::NoGradGuard no_grad;
        b = looped->forward(input);
      }
      for (const NestedKey& key : a.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
        EXPECT_TRUE(at::allclose(a.get(key), b.get(key), 1e-5, 1e-6)) << key.to_string() << " rows " << rows;
      }
    }
  }
  // Copy i of a Linear ensemble is x W_i^T + b_i.
  EnsembleModule ensemble(by_linear, EnsembleModuleOptions(3));
  const TensorDict input = batch_of(4, 5);
  const at::Tensor out = ensemble->forward(input).get("out");
  const TensorDict params = ensemble->params();
  for (int64_t copy = 0; copy < 3; ++copy) {
    const at::Tensor expected = at::linear(input.get("obs"), params.get({"module", "weight"})[copy],
                                           params.get({"module", "bias"})[copy]);
    EXPECT_TRUE(at::allclose(out[copy], expected, 1e-6, 1e-6)) << copy;
  }
}

TEST(EnsembleModuleTest, ChainedEnsemblesTakeTheCopiesDimFromTheFirst) {
  TensorDictModule first(torch::nn::Linear(2, 3), TensorDictModuleOptions({"bork"}, {"dork"}));
  TensorDictModule second(torch::nn::Linear(3, 1), TensorDictModuleOptions({"dork"}, {"spork"}));
  EnsembleModule e0(first, EnsembleModuleOptions(4));
  EnsembleModule e1(second, EnsembleModuleOptions(4).expand_input(false));
  TensorDictSequential chain({e0, e1});
  TensorDict out = chain->forward(TensorDict({{"bork", at::randn({5, 2})}}, {5}));
  EXPECT_EQ(out.batch_size().vec(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(out.get("dork").sizes().vec(), (std::vector<int64_t>{4, 5, 3}));
  EXPECT_EQ(out.get("spork").sizes().vec(), (std::vector<int64_t>{4, 5, 1}));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { e1->forward(TensorDict({{"dork", at::randn({5, 3})}}, {5})); }),
              HasSubstr("the input's batch size must start with num_copies (4), got [5]"));
}

TEST(EnsembleModuleTest, OtherModulesLoopWithoutGradientsAndKBatchedRefusesThem) {
  TensorDictModule gru(torch::nn::GRUCell(3, 4), TensorDictModuleOptions({"x", "h"}, {"h_next"}));
  EnsembleModule ensemble(gru, EnsembleModuleOptions(2));
  EXPECT_THAT(ensemble->unbatchable_reason(), HasSubstr("one Linear or Mlp from one key to one key"));
  EXPECT_FALSE(ensemble->uses_batched(1));
  TensorDict input({{"x", at::randn({6, 3})}, {"h", at::zeros({6, 4})}}, {6});
  EXPECT_THAT(error_of<std::invalid_argument>([&] { ensemble->forward(input); }),
              HasSubstr("the loop path computes no gradients"));
  torch::NoGradGuard no_grad;
  TensorDict out = ensemble->forward(input);
  EXPECT_EQ(out.get("h_next").sizes().vec(), (std::vector<int64_t>{2, 6, 4}));
  EXPECT_FALSE(at::allclose(out.get("h_next")[0], out.get("h_next")[1]));
  EXPECT_THAT(error_of<std::invalid_argument>(
                  [&] { EnsembleModule forced(gru, EnsembleModuleOptions(2).path(EnsemblePath::kBatched)); }),
              HasSubstr("path kBatched: "));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { EnsembleModule none(gru, EnsembleModuleOptions(0)); }),
              HasSubstr("num_copies must be at least 1, got 0"));
}

TEST(EnsembleModuleTest, TheBatchedPathIsDifferentiableAndAutoFollowsTheSizeLimit) {
  EnsembleModule ensemble(critic({8}), EnsembleModuleOptions(3).batched_max_elements(30));
  EXPECT_TRUE(ensemble->uses_batched(10));
  EXPECT_FALSE(ensemble->uses_batched(11));
  const at::Tensor value = ensemble->forward(batch_of(10, 5)).get("value");
  value.sum().backward();
  const at::Tensor grad = ensemble->params().get({"module", "layers", "0", "weight"}).grad();
  ASSERT_TRUE(grad.defined());
  for (int64_t copy = 0; copy < 3; ++copy) EXPECT_GT(grad[copy].abs().sum().item<double>(), 0) << copy;
}

}  // namespace
}  // namespace tdp::nn
