// ProbabilisticTensorDictSequential: the reference's docstring examples, return_composite
// defaults and errors, keys, slicing and det_part.
#include "sdk/probabilistic/probabilistic_sequential.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "sdk/distributions/normal.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "tests/testing/error_of.h"
#include "tests/testing/marking_module.h"

namespace tdp::nn {
namespace {

using test_util::error_of;
using Mod = TensorDictModule;
using Prob = ProbabilisticTensorDictModule;
using Seq = ProbabilisticTensorDictSequential;

Mod plus_one(NestedKey in, NestedKey out) {
  return Mod([](const at::Tensor& x) { return x + 1; },
             TensorDictModuleOptions({std::move(in)}, {std::move(out)}));
}

Prob normal(ProbabilisticTensorDictModuleOptions options) {
  return Prob(options.distribution("normal").distribution_kwargs({{"scale", 1}}));
}

TensorDict input() { return TensorDict({{"x", torch::ones({3})}}, {}); }

const at::Tensor& minus_half_log_2pi() {
  static const at::Tensor value = torch::full({3}, -0.9189385332046727);
  return value;
}

// Docstring: "Typical usage: a single distribution is computed last in the sequence".
TEST(ProbabilisticSequentialDocstring, SingleDistributionLast) {
  CompositeLpAggregateGuard guard(false, true);
  torch::manual_seed(0);
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample"}))});
  EXPECT_FALSE(module->return_composite());
  TensorDict td = module(input().clone(false));
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"x", "loc", "sample"}));
  EXPECT_EQ(td.batch_size(), std::vector<int64_t>{});
  EXPECT_EQ(module->get_dist(input()).to_string(), "Normal(loc: [3], scale: [3])");
  EXPECT_TRUE(std::get<at::Tensor>(module->log_prob(td)).allclose(minus_half_log_2pi()));
}

// Docstring: "Intermediate distributions are ignored when return_composite=False".
TEST(ProbabilisticSequentialDocstring, IntermediateIgnoredWithoutComposite) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample0"})),
              plus_one("sample0", "loc2"),
              normal(ProbabilisticTensorDictModuleOptions(DistKeyMap{{"loc", "loc2"}}, {"sample1"}))},
             ProbabilisticTensorDictSequentialOptions().return_composite(false));
  TensorDict td = module(input());
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"x", "loc", "sample0", "loc2", "sample1"}));
  EXPECT_TRUE(td.get("sample1").equal(torch::full({3}, 3.0)));
  EXPECT_EQ(module->get_dist(input()).to_string(), "Normal(loc: [3], scale: [3])");
  EXPECT_TRUE(std::get<at::Tensor>(module->log_prob(td)).allclose(minus_half_log_2pi()));
}

// Docstring: "Intermediate distributions produce a CompositeDistribution when return_composite=True".
TEST(ProbabilisticSequentialDocstring, IntermediateDistributionsMakeAComposite) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample0"})),
              plus_one("sample0", "loc2"),
              normal(ProbabilisticTensorDictModuleOptions(DistKeyMap{{"loc", "loc2"}}, {"sample1"}))},
             ProbabilisticTensorDictSequentialOptions().return_composite(true));
  TensorDict td = module(input().clone(false));
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"x", "loc", "sample0", "loc2", "sample1"}));
  EXPECT_EQ(module->get_dist(input()).to_string(),
            "CompositeDistribution({'sample0': Normal(loc: [3], scale: [3]), "
            "'sample1': Normal(loc: [3], scale: [3])})");
  TensorDict lp = std::get<TensorDict>(module->log_prob(td));
  EXPECT_EQ(lp.keys(), (std::vector<NestedKey>{"sample0_log_prob", "sample1_log_prob"}));
  EXPECT_EQ(lp.batch_size(), std::vector<int64_t>{});
  EXPECT_TRUE(lp.get("sample0_log_prob").allclose(minus_half_log_2pi()));
  EXPECT_TRUE(lp.get("sample1_log_prob").allclose(minus_half_log_2pi()));
  // More than one probabilistic module: return_composite defaults to true.
  Seq by_default({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample0"})),
                  plus_one("sample0", "loc2"),
                  normal(ProbabilisticTensorDictModuleOptions(DistKeyMap{{"loc", "loc2"}}, {"sample1"}))});
  EXPECT_TRUE(by_default->return_composite());
}

// Docstring: "Even a single intermediate distribution is wrapped in a CompositeDistribution".
TEST(ProbabilisticSequentialDocstring, SingleIntermediateDistributionIsWrapped) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample0"})),
              plus_one("sample0", "y")},
             ProbabilisticTensorDictSequentialOptions().return_composite(true));
  TensorDict td = module(input());
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"x", "loc", "sample0", "y"}));
  EXPECT_EQ(module->get_dist(input()).to_string(),
            "CompositeDistribution({'sample0': Normal(loc: [3], scale: [3])})");
  TensorDict lp = std::get<TensorDict>(module->log_prob(td));
  EXPECT_EQ(lp.keys(), std::vector<NestedKey>{"sample0_log_prob"});
  EXPECT_TRUE(lp.get("sample0_log_prob").allclose(minus_half_log_2pi()));
}

TEST(ProbabilisticSequential, ReturnCompositeErrorsAndDefaults) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { Seq(std::vector<TensorDictModuleRef>{}); }),
            "ProbabilisticTensorDictSequential must consist of zero or more TensorDictModules "
            "followed by a ProbabilisticTensorDictModule");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              Seq({normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"s"})), plus_one("s", "y")},
                  ProbabilisticTensorDictSequentialOptions().return_composite(false));
            }),
            "The final module passed to ProbabilisticTensorDictSequential must be an instance of "
            "ProbabilisticTensorDictModule or another ProbabilisticTensorDictSequential (unless "
            "return_composite is set to ``True``).");
  // The last module is not probabilistic: defaults to a composite.
  Seq last_plain({normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"s"})), plus_one("s", "y")});
  EXPECT_TRUE(last_plain->return_composite());
  // No probabilistic module: a plain sequence without a distribution.
  Seq none({plus_one("x", "y")});
  EXPECT_EQ(none->det_part(), nullptr);
  EXPECT_TRUE(none(input()).contains("y"));
  EXPECT_EQ(error_of<std::runtime_error>([&] { none->get_dist(input()); }),
            "No distribution module found in ProbabilisticTensorDictSequential(in_keys=['x'], "
            "out_keys=['y']).");
  EXPECT_EQ(error_of<std::runtime_error>([&] { none->build_dist_from_params(input()); }),
            "Could not find any ProbabilisticTensorDictModule in the sequence.");
}

TEST(ProbabilisticSequential, KeysNumSamplesAndDetPart) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"),
              normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample0"}).num_samples({2})
                         .return_log_prob(true)),
              plus_one("sample0", "loc2"),
              normal(ProbabilisticTensorDictModuleOptions(DistKeyMap{{"loc", "loc2"}}, {"sample1"})
                         .num_samples({5}).return_log_prob(true))});
  EXPECT_EQ(module->log_prob_keys(), (std::vector<NestedKey>{"sample1_log_prob", "sample0_log_prob"}));
  EXPECT_EQ(module->dist_sample_keys(), (std::vector<NestedKey>{"sample1", "sample0"}));
  EXPECT_EQ(module->dist_params_keys(), (std::vector<NestedKey>{"loc2", "loc"}));
  EXPECT_EQ(module->num_samples(), (std::vector<int64_t>{5, 2}));
  ASSERT_NE(module->det_part(), nullptr);
  EXPECT_EQ(module->det_part()->size(), 3u);
  EXPECT_EQ(module->det_part()->type_name(), "TensorDictSequential");
  EXPECT_EQ(error_of<std::runtime_error>([&] { module->log_prob_key(); }),
            "composite_lp_aggregate is set to ``False``, hence "
            "ProbabilisticTensorDictSequential.log_prob_key cannot be accessed unless there is one "
            "and only one element in log_prob_keys (got log_prob_keys=['sample1_log_prob', "
            "'sample0_log_prob']). When composite_lp_aggregate() returns ``False``, try to use "
            "ProbabilisticTensorDictSequential.log_prob_keys instead.");
  // Parameters are registered as in Python: det_part is not a child.
  Seq gaussian({Mod(torch::nn::Linear(3, 2), TensorDictModuleOptions({"x"}, {"loc"})),
                normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"a"}))});
  auto names = gaussian->named_parameters().keys();
  EXPECT_EQ(names, (std::vector<std::string>{"module.0.module.weight", "module.0.module.bias"}));
}

// append()/insert() change what the sequence samples with: the last module, det_part and the
// per-module dispatch follow the new module list.
TEST(ProbabilisticSequential, AppendingAProbabilisticModuleMakesItTheOneThatSamples) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample0"}))});
  module->append(plus_one("sample0", "loc2"));
  module->append(normal(ProbabilisticTensorDictModuleOptions(DistKeyMap{{"loc", "loc2"}}, {"sample1"})
                            .default_interaction_type(InteractionType::kMode)
                            .return_log_prob(true)));
  EXPECT_EQ(module->det_part()->size(), 3u);
  EXPECT_EQ(module->default_interaction_type(), InteractionType::kMode);
  EXPECT_EQ(module->dist_sample_keys(), (std::vector<NestedKey>{"sample1", "sample0"}));
  TensorDict td = module(input());
  // sample0 = loc = 2 (deterministic), loc2 = 3, sample1 = its mode, 3.
  EXPECT_TRUE(td.get("sample1").equal(torch::full({3}, 3.0)));
  EXPECT_TRUE(td.get("sample1_log_prob").allclose(minus_half_log_2pi()));
  EXPECT_EQ(module->get_dist(input()).to_string(), "CompositeDistribution({'sample0': Normal(loc: [3], scale: [3]), 'sample1': Normal(loc: [3], scale: [3])})");
}

TEST(ProbabilisticSequential, SlicingReturnsTheRightType) {
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample0"})),
              plus_one("sample0", "loc2"),
              normal(ProbabilisticTensorDictModuleOptions(DistKeyMap{{"loc", "loc2"}}, {"sample1"}))});
  auto head = module->slice(0, 2);
  auto head_prob = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(head);
  ASSERT_NE(head_prob, nullptr);
  EXPECT_TRUE(head_prob->return_composite());
  Seq single({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"s"}))});
  auto plain = single->slice(0, 1);
  EXPECT_EQ(std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(plain), nullptr);
  EXPECT_EQ(plain->type_name(), "TensorDictSequential");
  auto last = single->slice(1, 2);
  auto last_prob = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(last);
  ASSERT_NE(last_prob, nullptr);
  EXPECT_FALSE(last_prob->return_composite());
  EXPECT_NE(std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>((*single)[1]), nullptr);
}

TEST(ProbabilisticSequential, EarlierModuleWritesTheSampleSoOnlyTheLogProbIsComputed) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"), plus_one("loc", "action"),
              normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"action"})
                         .return_log_prob(true)
                         .default_interaction_type(InteractionType::kRandom))});
  TensorDict td = module(input());
  EXPECT_TRUE(td.get("action").equal(torch::full({3}, 3.0)));
  EXPECT_TRUE(td.get("action_log_prob").allclose(torch::full({3}, -0.5 - 0.9189385332046727)));
}

TEST(ProbabilisticSequential, GetDistParamsRunsTheDeterministicPart) {
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"s"}))});
  TensorDict td = input();
  TensorDict params = module->get_dist_params(td);
  EXPECT_TRUE(params.get("loc").equal(torch::full({3}, 2.0)));
  EXPECT_FALSE(params.contains("s"));
  EXPECT_EQ(module->build_dist_from_params(params).to_string(), "Normal(loc: [3], scale: [3])");
}

TEST(ProbabilisticSequential, SelectedOutKeysAndInplace) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"s"})
                                                .return_log_prob(true))},
             ProbabilisticTensorDictSequentialOptions().selected_out_keys({"s"}));
  TensorDict td = module(input());
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"x", "s"}));
  Seq fresh({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"s"}))},
            ProbabilisticTensorDictSequentialOptions().inplace(false));
  TensorDict in = input();
  TensorDict out = fresh(in);
  EXPECT_FALSE(out.is_same(in));
  EXPECT_EQ(out.keys(), (std::vector<NestedKey>{"loc", "s"}));
  // As in the reference, the modules still run on the input; inplace only picks what is returned.
  EXPECT_EQ(in.keys(), (std::vector<NestedKey>{"x", "loc", "s"}));
}

TEST(ProbabilisticSequential, CompositeGetDistDrawsIntermediateSamplesWithTheSeedStream) {
  CompositeLpAggregateGuard guard(false, true);
  auto random_normal = [](ProbabilisticTensorDictModuleOptions options) {
    return Prob(options.distribution("normal")
                    .distribution_kwargs({{"scale", 1}})
                    .default_interaction_type(InteractionType::kRandom)
                    .generator_key("rng"));
  };
  Seq module({plus_one("x", "loc"), random_normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"s0"})),
              plus_one("s0", "loc2"),
              random_normal(ProbabilisticTensorDictModuleOptions(DistKeyMap{{"loc", "loc2"}}, {"s1"}))});
  TensorDict td({{"x", torch::zeros({3})}, {"rng", torch::tensor(int64_t{7})}}, {});
  AnyDistribution d = module->get_dist(td);
  ASSERT_TRUE(d.is_composite());
  // s1's loc is s0 + 1, where s0 was drawn with seed 7.
  at::Tensor s0 = torch::ones({3}) + torch::empty({3}).normal_(0, 1, at::detail::createCPUGenerator(7));
  const auto& s1 = dynamic_cast<const dist::Normal&>(*d.composite()->get("s1"));
  EXPECT_TRUE(s1.mean().allclose(s0 + 1));
  EXPECT_EQ(td.get("rng").item<int64_t>(), 7);  // the caller's TensorDict is not touched
}

TEST(ProbabilisticSequential, Repr) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"s"}))});
  const std::string repr = module->to_string();
  EXPECT_EQ(repr.rfind("ProbabilisticTensorDictSequential(\n    module=ModuleList(\n", 0), 0u) << repr;
  EXPECT_NE(repr.find("    return_composite=False,\n    in_keys=['x'],\n    out_keys=['loc', 's'])"),
            std::string::npos)
      << repr;
  EXPECT_NE(repr.find("distribution_class=normal"), std::string::npos) << repr;
}

// tensordict's OrderedDict form: ProbabilisticTensorDictSequential(OrderedDict(loc=..., sample=...)).
TEST(ProbabilisticSequential, NamedFormKeepsTheNamesAndTheRules) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module(std::vector<std::pair<std::string, TensorDictModuleRef>>{
      {"loc", plus_one("x", "loc")}, {"sample", normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample"}))}});
  EXPECT_TRUE(module->is_named());
  EXPECT_EQ(module->names(), (std::vector<std::string>{"loc", "sample"}));
  EXPECT_EQ((*module)["sample"].get(), module->modules()[1].get());
  EXPECT_FALSE(module->return_composite());
  TensorDict td = module(input().clone(false));
  EXPECT_TRUE(std::get<at::Tensor>(module->log_prob(td)).allclose(minus_half_log_2pi()));
  EXPECT_EQ(module->named_parameters().size(), 0u);
  EXPECT_THROW(Seq(std::vector<std::pair<std::string, TensorDictModuleRef>>{{"loc", plus_one("x", "loc")}},
                   ProbabilisticTensorDictSequentialOptions().return_composite(false)),
               std::invalid_argument);
}

TEST(ProbabilisticSequential, LogProbWritesPerPartEntriesIntoTheGivenTensorDict) {
  CompositeLpAggregateGuard guard(false, true);
  Seq module({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample0"})),
              plus_one("sample0", "loc2"),
              normal(ProbabilisticTensorDictModuleOptions(DistKeyMap{{"loc", "loc2"}}, {"sample1"}))});
  TensorDict td = module(input().clone(false));
  TensorDict given({{"kept", torch::zeros({3})}}, {});
  TensorDict before = td.clone(/*deep=*/false);
  LogProb lp = module->log_prob(td, given);
  ASSERT_TRUE(std::holds_alternative<TensorDict>(lp));
  EXPECT_TRUE(std::get<TensorDict>(lp).is_same(given));
  EXPECT_EQ(given.keys(), (std::vector<NestedKey>{"kept", "sample0_log_prob", "sample1_log_prob"}));
  EXPECT_TRUE(given.get("sample1_log_prob").allclose(minus_half_log_2pi()));
  EXPECT_EQ(td.keys(), before.keys());  // the input is left as it was

  // One log-prob tensor is returned as is, and the given TensorDict is not touched.
  CompositeLpAggregateGuard aggregated(true, true);
  Seq single({plus_one("x", "loc"), normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample"}))});
  TensorDict out({}, {});
  LogProb one = single->log_prob(single(input().clone(false)), out);
  ASSERT_TRUE(std::holds_alternative<at::Tensor>(one));
  EXPECT_TRUE(std::get<at::Tensor>(one).allclose(minus_half_log_2pi()));
  EXPECT_TRUE(out.keys().empty());
}

Seq seeded_actor() {
  torch::manual_seed(0);
  return Seq({Mod(torch::nn::Linear(3, 4), TensorDictModuleOptions({"x"}, {"param"})),
              Mod(NormalParamExtractor(), TensorDictModuleOptions({"param"}, {"loc", "scale"})),
              Prob(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
                       .distribution("normal")
                       .default_interaction_type(InteractionType::kRandom)
                       .return_log_prob(true)
                       .seed(7))});
}

TEST(ProbabilisticSequential, AModulesOutKeySelectionMadeAfterTheSequenceWasBuiltIsHonoured) {
  Mod two_outputs([](const at::Tensor& x) { return std::make_tuple(x + 1, x * 2); },
                  TensorDictModuleOptions({"x"}, {"loc", "extra"}));
  Seq actor({two_outputs, normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample"}))});
  two_outputs->select_out_keys({"loc"});  // after the sequence was built
  EXPECT_EQ(actor(input()).keys(), (std::vector<NestedKey>{"x", "loc", "sample"}));
  TensorDict into = input();
  EXPECT_EQ(actor->forward(input(), into).keys(), (std::vector<NestedKey>{"x", "loc", "sample"}));
}

// A failure inside a module is rethrown with the sequence and the module named.
TEST(ProbabilisticSequential, AFailureNamesTheModuleThatFailed) {
  Seq actor = seeded_actor();
  const std::string plain = error_of<c10::Error>([&] { actor(TensorDict({{"x", torch::ones({5})}}, {})); });
  EXPECT_NE(plain.find("failed while executing module '0'"), std::string::npos) << plain;
  TensorDict into;
  const std::string with_out = error_of<c10::Error>([&] {
    actor->forward(TensorDict({{"x", torch::ones({5})}}, {}), into);
  });
  EXPECT_NE(with_out.find("failed while executing module '0'"), std::string::npos) << with_out;
}

// A subclass of TensorDictModule runs its own forward.
TEST(ProbabilisticSequential, ASubclassOfTensorDictModuleRunsItsOwnForward) {
  auto marking = std::make_shared<test_util::MarkingModuleImpl>([](const at::Tensor& x) { return x + 1; },
                                                                TensorDictModuleOptions({"x"}, {"loc"}));
  Seq actor({marking, normal(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample"}))});
  EXPECT_EQ(actor(input()).get("marked").item<float>(), 1.0f);
}

}  // namespace
}  // namespace tdp::nn
