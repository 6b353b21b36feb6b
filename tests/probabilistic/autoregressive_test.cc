// Autoregressive heads: a ProbabilisticTensorDictSequential with two probabilistic modules and a
// network between them that reads the first sample (observation -> Categorical "action_type"
// -> cat(observation, one_hot(action_type)) -> Normal "action_param"), against what tensordict
// 0.13 computes for the same sequence and weights (tests/probabilistic/autoregressive_golden.txt,
// written by make_autoregressive_golden.py next to it): forward under deterministic and random
// interaction, the log-prob keys and values under composite_lp_aggregate true and false,
// seq.log_prob and get_dist().entropy() (which re-draw the intermediate sample, as tensordict
// does), and get_dist_given_samples() (the teacher-forced joint distribution PPO scores with).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "sdk/distributions/composite_distribution.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/probabilistic/probabilistic_sequential.h"
#include "tests/testing/files.h"
#include "tests/testing/golden_file.h"

namespace tdp::nn {
namespace {

const std::map<std::string, at::Tensor>& golden() {
  static const std::map<std::string, at::Tensor> records =
      test_util::read_golden_file(test_util::runfile("tests/probabilistic/autoregressive_golden.txt"));
  return records;
}

at::Tensor g(const std::string& name) {
  auto it = golden().find(name);
  if (it == golden().end()) {
    ADD_FAILURE() << "no golden record " << name;
    return at::Tensor();
  }
  return it->second;
}

// Every golden record under `prefix/`, keyed by the rest of its name ("param.loc").
std::map<std::string, at::Tensor> records_under(const std::string& prefix) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : golden()) {
    if (name.rfind(prefix + "/", 0) == 0) out[name.substr(prefix.size() + 1)] = t;
  }
  return out;
}

::testing::AssertionResult close(const at::Tensor& actual, const at::Tensor& expected) {
  if (!actual.defined() || !expected.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << actual.sizes() << " vs " << expected.sizes();
  }
  if (expected.scalar_type() == at::kLong) {
    if (actual.to(at::kLong).equal(expected)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << actual << " vs " << expected;
  }
  if (actual.to(at::kDouble).allclose(expected.to(at::kDouble), 1e-5, 1e-5)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << "\nvs\n" << expected;
}

// Every leaf of `td` equals the golden records under `prefix`, and the key sets agree.
void expect_matches(const TensorDict& td, const std::string& prefix) {
  const TensorDict flat = td.flatten_keys(".");
  const auto expected = records_under(prefix);
  std::vector<std::string> actual_keys, expected_keys;
  for (const NestedKey& key : flat.keys()) {
    std::string text = key.to_string();  // quoted: 'param.loc'
    if (text.size() >= 2 && text.front() == '\'') text = text.substr(1, text.size() - 2);
    actual_keys.push_back(text);
  }
  for (const auto& [key, t] : expected) expected_keys.push_back(key);
  std::sort(actual_keys.begin(), actual_keys.end());
  EXPECT_EQ(actual_keys, expected_keys) << prefix;
  for (const auto& [key, t] : expected) {
    if (!flat.contains(NestedKey(key))) continue;
    EXPECT_TRUE(close(flat.get(NestedKey(key)), t)) << prefix << "/" << key;
  }
}

void expect_matches(const LogProb& value, const std::string& prefix, const std::string& tensor_name) {
  if (const auto* t = std::get_if<at::Tensor>(&value)) {
    EXPECT_TRUE(close(*t, g(prefix + "/" + tensor_name))) << prefix;
    EXPECT_EQ(records_under(prefix).size(), 1u) << prefix << ": tensordict gave a TensorDict";
  } else {
    expect_matches(std::get<TensorDict>(value), prefix);
  }
}

// The golden sequence, built under the current composite_lp_aggregate (which fixes its
// log-prob keys, as in tensordict).
ProbabilisticTensorDictSequential build() {
  torch::nn::Linear type_head(4, 2), param_head(6, 2);
  {
    torch::NoGradGuard no_grad;
    type_head->weight.copy_(g("weights/w1"));
    type_head->bias.copy_(g("weights/b1"));
    param_head->weight.copy_(g("weights/w2"));
    param_head->bias.copy_(g("weights/b2"));
  }
  auto one_hot = TensorDictModule(OneHot(2), TensorDictModuleOptions({"action_type"}, {"action_type_one_hot"}));
  Cat cat;
  auto condition = std::make_shared<TensorDictModuleImpl>(
      cat.ptr(), [c = cat.ptr()](TensorList& in) { return TensorList{c->forward(in)}; },
      TensorDictModuleOptions({"observation", "action_type_one_hot"}, {"param_input"}), "Cat");
  return ProbabilisticTensorDictSequential(
      {TensorDictModule(type_head, TensorDictModuleOptions({"observation"}, {{"type", "logits"}})),
       ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({{"type", "logits"}}, {"action_type"})
                                         .distribution("categorical")
                                         .return_log_prob(true)),
       one_hot, TensorDictModuleRef(condition),
       TensorDictModule(param_head, TensorDictModuleOptions({"param_input"}, {"param_head_out"})),
       TensorDictModule(NormalParamExtractor(),
                        TensorDictModuleOptions({"param_head_out"}, {{"param", "loc"}, {"param", "scale"}})),
       ProbabilisticTensorDictModule(
           ProbabilisticTensorDictModuleOptions({{"param", "loc"}, {"param", "scale"}}, {"action_param"})
               .distribution("normal")
               .return_log_prob(true))});
}

TensorDict observation_td() { return TensorDict({{"observation", g("input/observation")}}, {5}); }

TensorDict given_td() {
  return TensorDict({{"observation", g("input/observation")},
                     {"action_type", g("input/action_type")},
                     {"action_param", g("input/action_param")}},
                    {5});
}

// The one-hot entry is a C++ step of its own (tensordict's reference does one_hot and cat in
// one lambda): drop it before comparing the written keys.
TensorDict without_one_hot(TensorDict td) {
  td.erase("action_type_one_hot");
  return td;
}

class Autoregressive : public ::testing::TestWithParam<bool> {
 protected:
  bool aggregate() const { return GetParam(); }
  std::string mode() const { return aggregate() ? "aggregate" : "per_part"; }
};

TEST_P(Autoregressive, IsCompositeByDefault) {
  CompositeLpAggregateGuard guard(aggregate(), true);
  auto seq = build();
  EXPECT_TRUE(seq->return_composite());
  EXPECT_EQ(seq->dist_sample_keys(), (std::vector<NestedKey>{"action_param", "action_type"}));
}

TEST_P(Autoregressive, ForwardDeterministicMatchesTensordict) {
  CompositeLpAggregateGuard guard(aggregate(), true);
  auto seq = build();
  InteractionTypeGuard type(InteractionType::kDeterministic, true);
  TensorDict out = seq(observation_td());
  // The Normal reads the one-hot of the type it was given: flip it and the loc changes.
  EXPECT_TRUE(out.get("param_input").narrow(1, 4, 2).equal(at::one_hot(out.get("action_type"), 2).to(at::kFloat)));
  expect_matches(without_one_hot(out), mode() + "/forward_deterministic");
}

// Under aggregation both modules write "sample_log_prob" (each module's key when built while
// aggregating): the later one, the Normal's, is what remains, as in tensordict.
TEST_P(Autoregressive, ForwardRandomMatchesTensordict) {
  CompositeLpAggregateGuard guard(aggregate(), true);
  auto seq = build();
  torch::manual_seed(7);
  InteractionTypeGuard type(InteractionType::kRandom, true);
  TensorDict out = seq(observation_td());
  expect_matches(without_one_hot(out), mode() + "/random");
}

TEST_P(Autoregressive, LogProbMatchesTensordict) {
  CompositeLpAggregateGuard guard(aggregate(), true);
  auto seq = build();
  expect_matches(seq->log_prob(given_td()), mode() + "/log_prob", "sample_log_prob");
}

TEST_P(Autoregressive, EntropyMatchesTensordict) {
  CompositeLpAggregateGuard guard(aggregate(), true);
  auto seq = build();
  AnyDistribution d = seq->get_dist(given_td());
  ASSERT_TRUE(d.is_composite());
  expect_matches(d.composite()->entropy(), mode() + "/entropy", "entropy");
}

TEST_P(Autoregressive, GivenSamplesLogProbAndEntropyMatchTensordict) {
  CompositeLpAggregateGuard guard(aggregate(), true);
  auto seq = build();
  AnyDistribution d = seq->get_dist_given_samples(given_td());
  ASSERT_TRUE(d.is_composite());
  expect_matches(seq->log_prob(given_td(), d), mode() + "/given/log_prob", "sample_log_prob");
  expect_matches(d.composite()->entropy(), mode() + "/given/entropy", "entropy");
}

// The teacher-forced joint log-prob is the sum of the two parts' log-probs, the second
// conditioned on the given type; it differs from log_prob (re-drawn type) where the given type
// is not the argmax.
TEST_P(Autoregressive, GivenSamplesJointIsSumOfParts) {
  CompositeLpAggregateGuard guard(aggregate(), true);
  auto seq = build();
  TensorDict given = given_td();
  AnyDistribution teacher_forced = seq->get_dist_given_samples(given);
  AnyDistribution redrawn = seq->get_dist(given);
  // Scoring through the composite itself: the summed form whatever the modules were built with.
  dist::CompositeLpAggregateGuard sum(true, true);
  const at::Tensor joint = std::get<at::Tensor>(teacher_forced.composite()->log_prob(given));
  const at::Tensor type_lp = g("per_part/given/log_prob/action_type_log_prob");
  const at::Tensor param_lp = g("per_part/given/log_prob/action_param_log_prob").sum(-1);
  EXPECT_TRUE(close(joint, type_lp + param_lp));
  EXPECT_TRUE(close(joint, g("aggregate/given/log_prob/sample_log_prob")));
  EXPECT_FALSE(std::get<at::Tensor>(redrawn.composite()->log_prob(given)).allclose(joint));
}

// Without a given type, get_dist_given_samples draws it as get_dist does.
TEST_P(Autoregressive, GivenSamplesDrawsWhatIsMissing) {
  CompositeLpAggregateGuard guard(aggregate(), true);
  auto seq = build();
  TensorDict no_type = given_td();
  no_type.erase("action_type");
  AnyDistribution drawn = seq->get_dist_given_samples(no_type);
  AnyDistribution redrawn = seq->get_dist(given_td());
  dist::CompositeLpAggregateGuard sum(true, true);
  EXPECT_TRUE(close(std::get<at::Tensor>(drawn.composite()->log_prob(given_td())),
                    std::get<at::Tensor>(redrawn.composite()->log_prob(given_td()))));
}

INSTANTIATE_TEST_SUITE_P(AggregationModes, Autoregressive, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Aggregate" : "PerPart"; });

TEST(OneHot, MatchesTorchAndRejectsFloats) {
  OneHot one_hot(3);
  EXPECT_TRUE(one_hot(at::tensor({2, 0}, at::kLong)).equal(at::tensor({0.f, 0.f, 1.f, 1.f, 0.f, 0.f}).reshape({2, 3})));
  EXPECT_EQ(one_hot(at::tensor({1}, at::kInt)).scalar_type(), at::kFloat);
  EXPECT_THROW(one_hot(at::tensor({1.0f})), std::invalid_argument);
  EXPECT_THROW(one_hot(at::tensor({3}, at::kLong)), c10::Error);
  EXPECT_THROW(OneHot(0), std::invalid_argument);
}

TEST(Cat, JoinsOnTheLastDim) {
  Cat cat;
  EXPECT_EQ(cat->forward({at::ones({2, 3}), at::zeros({2, 1})}).sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_THROW(cat->forward({}), std::invalid_argument);
}

}  // namespace
}  // namespace tdp::nn
