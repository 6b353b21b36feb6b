// TensorDictSequential: the behaviours of tensordict's TestTDSequence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/nn/wrap_module.h"
#include "tests/testing/error_of.h"
#include "tests/testing/marking_module.h"
#include "tests/testing/module_keys.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using test_util::error_of;
using test_util::key_strings;
using test_util::keys;
using test_util::make_td;

at::Tensor plus_one(const at::Tensor& x) { return x + 1; }
at::Tensor add(const at::Tensor& x, const at::Tensor& y) { return x + y; }

struct InplaceCase {
  std::optional<Inplace> inplace;
  bool module_inplace;
};

class SequentialInplaceTest : public ::testing::TestWithParam<InplaceCase> {};

TEST_P(SequentialInplaceTest, OutputFollowsInplace) {
  const auto [inplace, module_inplace] = GetParam();
  TensorDictSequentialOptions options;
  options.inplace(inplace);
  TensorDictSequential model(
      {TensorDictModule([](const at::Tensor& x) { return std::make_tuple(x + 1, x - 1); },
                        keys({"input"}, {{"intermediate", "0"}, {"intermediate", "1"}})
                            .inplace(module_inplace)),
       TensorDictModule([](const at::Tensor& y0, const at::Tensor& y1) { return y0 * y1; },
                        keys({{"intermediate", "0"}, {"intermediate", "1"}}, {"output"})
                            .inplace(module_inplace))},
      options);
  TensorDict input = make_td({{"input", torch::zeros({})}});
  TensorDict output = model(input);
  if (inplace == Inplace::kTrue) {
    EXPECT_TRUE(output.is_same(input));
    EXPECT_TRUE(output.contains("input"));
  } else if (!module_inplace || inplace == Inplace::kFalse) {
    EXPECT_FALSE(output.is_same(input));
    EXPECT_FALSE(output.contains("input"));
  } else {
    EXPECT_TRUE(output.is_same(input));
    EXPECT_TRUE(output.contains("input"));
  }
  EXPECT_TRUE(output.contains("output"));
  EXPECT_EQ(output.get("output").item<float>(), -1.0f);
}

INSTANTIATE_TEST_SUITE_P(
    AllCombinations, SequentialInplaceTest,
    ::testing::Values(InplaceCase{Inplace::kTrue, true}, InplaceCase{Inplace::kTrue, false},
                      InplaceCase{Inplace::kFalse, true}, InplaceCase{Inplace::kFalse, false},
                      InplaceCase{std::nullopt, true}, InplaceCase{std::nullopt, false}));

TEST(TensorDictSequentialTest, NamedModules) {
  torch::nn::Linear linear(3, 4);
  {
    torch::NoGradGuard no_grad;
    linear->weight.fill_(0);
    linear->bias.fill_(1);
  }
  TensorDictModule layer0(linear, keys({"x"}, {"y"}));
  WrapModule layer1([](TensorDict td) { return td.apply([](const at::Tensor& t) { return t + 1; }); });
  TensorDictSequential seq({{"layer0", layer0}, {"layer1", layer1}});
  TensorDict td = seq(make_td({{"x", torch::ones({3})}}));
  EXPECT_TRUE(td.get("x").eq(2).all().item<bool>());
  EXPECT_TRUE(td.get("y").eq(2).all().item<bool>());
  EXPECT_EQ((*seq)["layer0"], layer0.ptr());
  EXPECT_TRUE(seq->is_named());
  EXPECT_TRUE(seq->named_parameters().contains("module.layer0.module.weight"));
  EXPECT_EQ(error_of<KeyError>([&] { (*seq)["layer9"]; }),
            "TensorDictSequential: no module named 'layer9'; the modules are ['layer0', 'layer1'].");
}

TEST(TensorDictSequentialTest, NamedSelectSubsequenceKeepsNames) {
  TensorDictSequential seq({{"layer0", TensorDictModule(plus_one, keys({"x"}, {"y"}))},
                            {"layer1", TensorDictModule(plus_one, keys({"y"}, {"z"}))},
                            {"layer2", TensorDictModule(add, keys({"x", "y"}, {"a"}))}});
  EXPECT_EQ(seq->size(), 3u);
  auto selected = seq->select_subsequence(std::nullopt, std::vector<NestedKey>{"a"});
  EXPECT_EQ(selected->size(), 2u);
  EXPECT_TRUE(selected->is_named());
  EXPECT_EQ(selected->names(), (std::vector<std::string>{"layer0", "layer2"}));
}

TEST(TensorDictSequentialTest, NamedSelectOutKeys) {
  TensorDictSequential seq({{"layer0", TensorDictModule(plus_one, keys({"x"}, {"intermediate"}))},
                            {"layer1", TensorDictModule(plus_one, keys({"intermediate"}, {"z"}))},
                            {"layer2", TensorDictModule(add, keys({"x", "z"}, {"a"}))}});
  seq->select_out_keys({"z", "a"});
  TensorDict td = seq(make_td({{"x", torch::zeros({})}}));
  EXPECT_FALSE(td.contains("intermediate"));
  EXPECT_TRUE(td.contains("z"));
  EXPECT_TRUE(td.contains("a"));
}

TEST(TensorDictSequentialTest, InputKeysSkipIntermediates) {
  TensorDictSequential seq({TensorDictModule(plus_one, keys({"input"}, {"1"})),
                            TensorDictModule(plus_one, keys({"1"}, {"a"}))});
  EXPECT_EQ(key_strings(seq->in_keys()), (std::vector<std::string>{"'input'"}));
  EXPECT_EQ(key_strings(seq->out_keys()), (std::vector<std::string>{"'1'", "'a'"}));
  EXPECT_EQ(seq(make_td({{"input", torch::ones({1})}})).get("a").item<float>(), 3.0f);
}

TEST(TensorDictSequentialTest, TensordictOutReceivesOnlyOutKeys) {
  TensorDictSequential mod(
      {TensorDictModule([](const at::Tensor& x) { return x + 2; }, keys({"a"}, {"c"})),
       TensorDictModule([](const at::Tensor& x) { return std::make_tuple(x + 2, x); },
                        keys({"b"}, {"d", "e"}))});
  TensorDict inp = make_td({{"a", torch::zeros({})}, {"b", torch::ones({})}});
  TensorDict out;
  TensorDict out2 = mod(inp, out);
  EXPECT_TRUE(out2.is_same(out));
  EXPECT_THAT(key_strings(out.keys()), UnorderedElementsAre("'c'", "'d'", "'e'"));
  EXPECT_THAT(key_strings(inp.keys()), UnorderedElementsAre("'a'", "'b'"));
  mod->select_out_keys({"d"});
  out = TensorDict();
  mod(inp, out);
  EXPECT_THAT(key_strings(out.keys()), UnorderedElementsAre("'d'"));
  EXPECT_THAT(key_strings(inp.keys()), UnorderedElementsAre("'a'", "'b'"));
}

TensorDictSequential key_exclusion_seq(TensorDictSequentialOptions options = {}) {
  return TensorDictSequential({TensorDictModule(add, keys({"key1", "key2"}, {"foo1"})),
                               TensorDictModule(add, keys({"key1", "key3"}, {"key1"})),
                               TensorDictModule(add, keys({"foo1", "key3"}, {"key2"}))},
                              options);
}

TEST(TensorDictSequentialTest, KeyExclusion) {
  auto seq = key_exclusion_seq();
  EXPECT_THAT(key_strings(seq->in_keys()), UnorderedElementsAre("'key1'", "'key2'", "'key3'"));
  EXPECT_THAT(key_strings(seq->out_keys()), UnorderedElementsAre("'foo1'", "'key1'", "'key2'"));
}

TEST(TensorDictSequentialTest, KeyExclusionConstructorExec) {
  auto seq = key_exclusion_seq(TensorDictSequentialOptions().selected_out_keys({"key2"}));
  EXPECT_THAT(key_strings(seq->in_keys()), UnorderedElementsAre("'key1'", "'key2'", "'key3'"));
  EXPECT_EQ(key_strings(seq->out_keys()), (std::vector<std::string>{"'key2'"}));
  TensorDict td = make_td({{"key1", torch::zeros({})}, {"key2", torch::zeros({})}, {"key3", torch::ones({})}});
  TensorDict out = seq(td);
  EXPECT_TRUE(out.is_same(td));
  EXPECT_TRUE(out.contains("key1"));
  EXPECT_TRUE(out.contains("key2"));
  EXPECT_TRUE(out.contains("key3"));
  EXPECT_FALSE(out.contains("foo1"));
  EXPECT_EQ(out.get("key2").item<float>(), 1.0f);
  // key1 was an input: the value the second module wrote is kept.
  EXPECT_EQ(out.get("key1").item<float>(), 1.0f);
}

TEST(TensorDictSequentialTest, SelectedOutKeysMustBeOutKeys) {
  EXPECT_EQ(error_of<std::invalid_argument>(
                [] { key_exclusion_seq(TensorDictSequentialOptions().selected_out_keys({"nope"})); }),
            "All keys in selected_out_keys must be in out_keys. TensorDictSequential(in_keys=["
            "'key1', 'key2', 'key3'], out_keys=['foo1', 'key1', 'key2']) has no out_key 'nope'.");
}

TensorDictSequential flat_module() {
  return TensorDictSequential({TensorDictModule(plus_one, keys({"a"}, {"b"})),
                               TensorDictModule(plus_one, keys({"b"}, {"c"})),
                               TensorDictModule(plus_one, keys({"b"}, {"d"})),
                               TensorDictModule(plus_one, keys({"d"}, {"e"}))});
}

TensorDictSequential nested_module() {
  return TensorDictSequential(
      {TensorDictSequential({TensorDictModule(plus_one, keys({"a"}, {"b"})),
                             TensorDictModule(plus_one, keys({"b"}, {"c"}))}),
       TensorDictSequential({TensorDictModule(plus_one, keys({"b"}, {"d"})),
                             TensorDictModule(plus_one, keys({"d"}, {"e"}))})});
}

TEST(TensorDictSequentialTest, NestedSequenceKeys) {
  auto nested = nested_module();
  EXPECT_EQ(key_strings(nested->in_keys()), (std::vector<std::string>{"'a'"}));
  EXPECT_EQ(key_strings(nested->out_keys()), (std::vector<std::string>{"'b'", "'c'", "'d'", "'e'"}));
}

using OptKeys = std::optional<std::vector<NestedKey>>;
class SubsequenceNestedTest : public ::testing::TestWithParam<std::tuple<OptKeys, OptKeys>> {};

TEST_P(SubsequenceNestedTest, FlatAndNestedAgree) {
  const auto& [in_keys, out_keys] = GetParam();
  auto flat = flat_module();
  auto nested = nested_module();
  std::shared_ptr<TensorDictSequentialImpl> selected_flat;
  try {
    selected_flat = flat->select_subsequence(in_keys, out_keys);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "No modules left after selection. Make sure that in_keys and out_keys are "
                 "coherent.");
    return;  // incongruent keys
  }
  auto selected_nested = nested->select_subsequence(in_keys, out_keys);
  TensorDict td = make_td({{"a", torch::zeros({})}, {"b", torch::zeros({})}, {"c", torch::zeros({})},
                           {"d", torch::zeros({})}, {"e", torch::zeros({})}});
  EXPECT_TRUE(selected_flat->forward(td.clone()).equal(selected_nested->forward(td.clone())));
}

std::vector<OptKeys> subsequence_in_keys() {
  return {std::nullopt, OptKeys({"a"}), OptKeys({"b"}), OptKeys({"d"}), OptKeys({"b", "d"}),
          OptKeys({"a", "d"})};
}
std::vector<OptKeys> subsequence_out_keys() {
  return {std::nullopt,        OptKeys({"b"}),      OptKeys({"c"}),     OptKeys({"d"}),
          OptKeys({"e"}),      OptKeys({"b", "c"}), OptKeys({"b", "d"}), OptKeys({"b", "e"})};
}

INSTANTIATE_TEST_SUITE_P(Grid, SubsequenceNestedTest,
                         ::testing::Combine(::testing::ValuesIn(subsequence_in_keys()),
                                            ::testing::ValuesIn(subsequence_out_keys())));

TEST(TensorDictSequentialTest, SelectSubsequenceExamples) {
  auto idn = [](const at::Tensor& x) { return x; };
  TensorDictSequential module({TensorDictModule(idn, keys({"a"}, {"b"})),
                               TensorDictModule(idn, keys({"b"}, {"c"})),
                               TensorDictModule(idn, keys({"c"}, {"d"})),
                               TensorDictModule(idn, keys({"a"}, {"e"}))});
  EXPECT_EQ(module->select_subsequence(std::vector<NestedKey>{"a"})->size(), 4u);
  auto from_c = module->select_subsequence(std::vector<NestedKey>{"c"});
  ASSERT_EQ(from_c->size(), 1u);
  EXPECT_EQ((*from_c)[0], (*module)[2]);
  auto to_c = module->select_subsequence(std::nullopt, std::vector<NestedKey>{"c"});
  EXPECT_EQ(key_strings(to_c->out_keys()), (std::vector<std::string>{"'b'", "'c'"}));
  auto to_e = module->select_subsequence(std::nullopt, std::vector<NestedKey>{"e"});
  ASSERT_EQ(to_e->size(), 1u);
  EXPECT_EQ((*to_e)[0], (*module)[3]);

  auto nested = nested_module();
  auto narrowed = nested->select_subsequence(std::vector<NestedKey>{"b", "d"}, std::vector<NestedKey>{"e"});
  ASSERT_EQ(narrowed->size(), 1u);
  EXPECT_EQ(key_strings(narrowed->in_keys()), (std::vector<std::string>{"'b'"}));
  EXPECT_EQ(key_strings(narrowed->out_keys()), (std::vector<std::string>{"'d'", "'e'"}));
}

TEST(TensorDictSequentialTest, SubsequenceSharesWeights) {
  torch::manual_seed(0);
  TensorDictModule first(torch::nn::Linear(3, 2), keys({"in"}, {"hidden"}));
  TensorDictModule second(torch::nn::Linear(2, 4), keys({"hidden"}, {"out"}));
  TensorDictSequential td_module({first, second});
  auto sub = td_module->select_subsequence(std::nullopt, std::vector<NestedKey>{"hidden"});
  auto sub_first = sub->at<TensorDictModuleImpl>(0);
  at::Tensor before = sub_first->module()->named_parameters()["weight"].clone();

  torch::optim::SGD opt(td_module->parameters(), 0.1);
  opt.zero_grad();
  TensorDict td = td_module(make_td({{"in", torch::randn({5, 3})}}, {5}));
  td.get("out").mean().backward();
  opt.step();
  at::Tensor after = sub_first->module()->named_parameters()["weight"];
  EXPECT_FALSE(torch::allclose(before, after));
  EXPECT_TRUE(after.is_same(first->module()->named_parameters()["weight"]));
}

TEST(TensorDictSequentialTest, PartialTolerantSkipsModulesWithMissingInputs) {
  auto make = [](bool tolerant) {
    return TensorDictSequential({TensorDictModule(plus_one, keys({"a"}, {"b"}).strict(true)),
                                 TensorDictModule(plus_one, keys({"x"}, {"y"}).strict(true))},
                                TensorDictSequentialOptions().partial_tolerant(tolerant));
  };
  TensorDict td = make(true)(make_td({{"a", torch::zeros({})}}));
  EXPECT_TRUE(td.contains("b"));
  EXPECT_FALSE(td.contains("y"));
  EXPECT_EQ(error_of<KeyError>([&] { make(false)(make_td({{"a", torch::zeros({})}})); }),
            "TensorDictSequential(in_keys=['a', 'x'], out_keys=['b', 'y']): failed while "
            "executing module '1': TensorDictModule(in_keys=['x'], out_keys=['y']): the input "
            "TensorDict has no entry 'x' (strict=True); it has keys ['a', 'b'].");
}

TEST(TensorDictSequentialTest, IndexingSliceAppendInsert) {
  TensorDictModule m0(plus_one, keys({"a"}, {"b"}));
  TensorDictModule m1(plus_one, keys({"b"}, {"c"}));
  TensorDictModule m2(plus_one, keys({"c"}, {"d"}));
  TensorDictSequential seq({m0, m1});
  EXPECT_EQ(seq->size(), 2u);
  EXPECT_EQ((*seq)[0], m0.ptr());
  EXPECT_EQ((*seq)[-1], m1.ptr());
  EXPECT_EQ(error_of<std::out_of_range>([&] { (*seq)[2]; }),
            "TensorDictSequential: index 2 is out of range for 2 module(s).");
  seq->append(m2);
  EXPECT_EQ(seq->size(), 3u);
  EXPECT_EQ(key_strings(seq->out_keys()), (std::vector<std::string>{"'b'", "'c'", "'d'"}));
  TensorDictModule m_first(plus_one, keys({"z"}, {"a"}));
  seq->insert(0, m_first);
  EXPECT_EQ(key_strings(seq->in_keys()), (std::vector<std::string>{"'z'"}));
  EXPECT_TRUE(seq->named_parameters().is_empty());
  EXPECT_EQ(seq(make_td({{"z", torch::zeros({})}})).get("d").item<float>(), 4.0f);
  auto tail = seq->slice(1, 3);
  EXPECT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0], m0.ptr());
  EXPECT_EQ(key_strings(tail->in_keys()), (std::vector<std::string>{"'a'"}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { seq->at<TensorDictSequentialImpl>(0); }),
            "TensorDictSequential: module 0 is a TensorDictModule, not the type asked for.");
  EXPECT_EQ(seq->at<TensorDictModuleImpl>(1), m0.ptr());
}

TEST(TensorDictSequentialTest, ResetParametersThroughTheSequence) {
  torch::manual_seed(0);
  torch::nn::Linear linear(2, 2);
  at::Tensor old = linear->weight.clone();
  TensorDictSequential seq({TensorDictModule(linear, keys({"x"}, {"y"}))});
  EXPECT_TRUE(seq->reset_parameters_recursive());
  EXPECT_FALSE(torch::equal(old, linear->weight));
}

TEST(TensorDictSequentialTest, Repr) {
  TensorDictSequential seq({TensorDictModule(plus_one, keys({"a"}, {"b"}))});
  EXPECT_EQ(seq->to_string(),
            "TensorDictSequential(\n"
            "    module=ModuleList(\n"
            "      (0): TensorDictModule(\n"
            "          module=<function>,\n"
            "          in_keys=['a'],\n"
            "          out_keys=['b'])\n"
            "    ),\n"
            "    in_keys=['a'],\n"
            "    out_keys=['b'])");
}

// A failure inside a module is rethrown with the sequence and the module named.
TEST(TensorDictSequentialTest, AFailureNamesTheModuleThatFailed) {
  torch::manual_seed(0);
  TensorDictSequential seq({TensorDictModule(torch::nn::Linear(3, 4), keys({"x"}, {"hidden"})),
                            TensorDictModule([](const at::Tensor& h) { return h.tanh(); }, keys({"hidden"}, {"y"}))});
  const auto bad = [] { return TensorDict({{"x", torch::ones({2, 5})}}, {2}); };  // 5 features, not 3
  EXPECT_THAT(error_of<c10::Error>([&] { seq(bad()); }), HasSubstr("failed while executing module '0'"));
  TensorDict into(std::vector<int64_t>{2});
  EXPECT_THAT(error_of<c10::Error>([&] { seq->forward(bad(), into); }), HasSubstr("failed while executing module '0'"));
}

// A subclass of TensorDictModule runs its own forward, wherever it sits, and after
// append()/insert() too.
TEST(TensorDictSequentialTest, ASubclassOfTensorDictModuleRunsItsOwnForward) {
  auto marking = [] { return std::make_shared<test_util::MarkingModuleImpl>(plus_one, keys({"a"}, {"a"})); };
  TensorDictSequential seq({TensorDictModule(plus_one, keys({"a"}, {"b"}))});
  EXPECT_FALSE(seq(make_td({{"a", torch::zeros({})}})).contains("marked"));
  seq->append(marking());
  EXPECT_EQ(seq(make_td({{"a", torch::zeros({})}})).get("marked").item<float>(), 1.0f);
  seq->insert(0, marking());
  TensorDict out = seq(make_td({{"a", torch::zeros({})}}));
  EXPECT_EQ(out.get("marked").item<float>(), 2.0f);
  EXPECT_EQ(out.get("b").item<float>(), 2.0f);  // a: 0 -> 1 (marking), b = a + 1
}

}  // namespace
}  // namespace tdp::nn
