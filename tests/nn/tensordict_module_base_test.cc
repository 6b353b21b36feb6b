// select_out_keys and reset_out_keys (sdk/nn/tensordict_module_base.h) on modules, sequences,
// subclasses and wrappers; tensordict's TestSelectOutKeys.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include "sdk/nn/dispatch.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/nn/tensordict_module_wrapper.h"
#include "sdk/nn/tensordict_sequential.h"
#include "tests/testing/error_of.h"
#include "tests/testing/module_keys.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;
using test_util::error_of;
using test_util::key_strings;
using test_util::keys;
using test_util::make_td;

std::vector<std::vector<NestedKey>> selections() {
  return {{"d"}, {"d", "e"}, {"e", "d"}};
}

TensorDictModule three_outputs() {
  return TensorDictModule(
      [](const at::Tensor& x, const at::Tensor& y) { return std::make_tuple(x + 2, y + 2, x); },
      keys({"a", "b"}, {"c", "d", "e"}));
}

TensorDict ab() { return make_td({{"a", torch::zeros({})}, {"b", torch::ones({})}}); }

TEST(SelectOutKeysTest, TensorDictModule) {
  for (const auto& selection : selections()) {
    auto mod = three_outputs();
    TensorDict td = mod(ab());
    EXPECT_THAT(key_strings(td.keys()), UnorderedElementsAre("'a'", "'b'", "'c'", "'d'", "'e'"));
    auto& same = mod->select_out_keys(selection);
    EXPECT_EQ(&same, mod.get());
    EXPECT_EQ(mod->out_keys(), selection);
    td = mod(ab());
    EXPECT_FALSE(td.contains("c"));
    for (const NestedKey& key : selection) EXPECT_TRUE(td.contains(key)) << key;
    mod->reset_out_keys();
    td = mod(ab());
    EXPECT_THAT(key_strings(td.keys()), UnorderedElementsAre("'a'", "'b'", "'c'", "'d'", "'e'"));
  }
}

// tensordict 0.13, checked in the venv: m = TensorDictModule(lambda a: (a + 1, a + 2), ["a"],
// ["b", "c"]); m.select_out_keys("b"); m(TensorDict(a=0., extra=1., c=7.)) returns the same
// TensorDict with keys ['a', 'b'] only: 'extra' and the caller's 'c' are gone. With
// tensordict_out=TensorDict(z=1.) it returns that TensorDict with keys ['b'].
TEST(SelectOutKeysTest, SingleModuleKeepsOnlyInKeysAndSelectionAsTensordictDoes) {
  TensorDictModule mod([](const at::Tensor& a) { return std::make_tuple(a + 1, a + 2); }, keys({"a"}, {"b", "c"}));
  mod->select_out_keys({"b"});
  TensorDict td = make_td({{"a", torch::zeros({})}, {"extra", torch::ones({})}, {"c", torch::full({}, 7.0)}});
  TensorDict out = mod(td);
  EXPECT_TRUE(out.is_same(td));
  EXPECT_THAT(key_strings(td.keys()), UnorderedElementsAre("'a'", "'b'"));

  TensorDict given = make_td({{"z", torch::ones({})}});
  out = mod->forward(make_td({{"a", torch::zeros({})}, {"extra", torch::ones({})}}), given);
  EXPECT_TRUE(out.is_same(given));
  EXPECT_THAT(key_strings(given.keys()), UnorderedElementsAre("'b'"));
}

TEST(SelectOutKeysTest, NestedEntriesAreKeptOnlyOnTheWayToASelectedKey) {
  TensorDictModule mod([](const at::Tensor& a) { return std::make_tuple(a + 1, a + 2); },
                       keys({"a"}, {{"out", "b"}, {"out", "c"}}));
  mod->select_out_keys({{"out", "b"}});
  TensorDict td = make_td({{"a", torch::zeros({})}, {{"side", "x"}, torch::ones({})}});
  mod(td);
  EXPECT_THAT(key_strings(td.keys(/*include_nested=*/true)), UnorderedElementsAre("'a'", "'out'", "('out', 'b')"));
}

TEST(SelectOutKeysTest, KeepOtherEntriesOptionRemovesOnlyUnselectedOutputs) {
  TensorDictModule mod([](const at::Tensor& a) { return std::make_tuple(a + 1, a + 2); }, keys({"a"}, {"b", "c"}));
  mod->select_out_keys({"b"}, OutKeysSelection::kKeepOtherEntries);
  TensorDict td = make_td({{"a", torch::zeros({})}, {"extra", torch::ones({})}});
  mod(td);
  EXPECT_THAT(key_strings(td.keys()), UnorderedElementsAre("'a'", "'b'", "'extra'"));
  // A dropped key the caller passed in stays, updated.
  td = make_td({{"a", torch::zeros({})}, {"c", torch::full({}, 7.0)}});
  mod(td);
  EXPECT_EQ(td.get("c").item<float>(), 2.0f);
  // reset_out_keys() also forgets the rule.
  mod->reset_out_keys();
  mod->select_out_keys({"b"});
  td = make_td({{"a", torch::zeros({})}, {"extra", torch::ones({})}});
  mod(td);
  EXPECT_THAT(key_strings(td.keys()), UnorderedElementsAre("'a'", "'b'"));
}

// The sequence rule is the same under both options: the caller's other entries stay.
TEST(SelectOutKeysTest, SequenceKeepsTheCallersEntriesUnderEitherRule) {
  for (OutKeysSelection rule : {OutKeysSelection::kReference, OutKeysSelection::kKeepOtherEntries}) {
    TensorDictSequential seq({TensorDictModule([](const at::Tensor& a) { return a + 1; }, keys({"a"}, {"b"})),
                              TensorDictModule([](const at::Tensor& b) { return b + 1; }, keys({"b"}, {"c"}))});
    seq->select_out_keys({"c"}, rule);
    TensorDict td = make_td({{"a", torch::zeros({})}, {"extra", torch::ones({})}});
    seq(td);
    EXPECT_THAT(key_strings(td.keys()), UnorderedElementsAre("'a'", "'c'", "'extra'"));
  }
}

TEST(SelectOutKeysTest, NonExistentKeyIsRejected) {
  auto mod = three_outputs();
  EXPECT_EQ(error_of<std::invalid_argument>([&] { mod->select_out_keys({{"d", "e"}}); }),
            "Can't select non existent key: ('d', 'e'). TensorDictModule(in_keys=['a', 'b'], "
            "out_keys=['c', 'd', 'e']) has out_keys ['c', 'd', 'e'].");
  TensorDictSequential seq({three_outputs()});
  EXPECT_THROW(seq->select_out_keys({{"d", "e"}}), std::invalid_argument);
}

TEST(SelectOutKeysTest, DispatchReturnsTheSelection) {
  auto mod = three_outputs();
  auto res = dispatch(mod, {torch::zeros({}), torch::ones({})});
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].item<float>(), 2.0f);
  EXPECT_EQ(res[1].item<float>(), 3.0f);
  EXPECT_EQ(res[2].item<float>(), 0.0f);
  mod->select_out_keys({"d", "e"});
  res = dispatch(mod, {}, {{"a", torch::zeros({})}, {"b", torch::ones({})}});
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].item<float>(), 3.0f);
  EXPECT_EQ(res[1].item<float>(), 0.0f);
  mod->reset_out_keys();
  EXPECT_EQ(dispatch(mod, {torch::zeros({}), torch::ones({})}).size(), 3u);
}

TEST(SelectOutKeysTest, TensorDictSequential) {
  TensorDictSequential mod(
      {TensorDictModule([](const at::Tensor& x) { return x + 2; }, keys({"a"}, {"c"})),
       TensorDictModule([](const at::Tensor& x) { return std::make_tuple(x + 2, x); },
                        keys({"b"}, {"d", "e"}))});
  auto res = dispatch(mod, {torch::zeros({}), torch::ones({})});
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[2].item<float>(), 1.0f);
  for (const std::vector<NestedKey>& selection : {std::vector<NestedKey>{"d"}, {"d", "e"}}) {
    EXPECT_EQ(&mod->select_out_keys(selection), mod.get());
    EXPECT_EQ(mod->out_keys(), selection);
    TensorDict td = mod(ab());
    EXPECT_FALSE(td.contains("c"));
    EXPECT_TRUE(td.contains("d"));
    EXPECT_EQ(dispatch(mod, {torch::zeros({}), torch::ones({})}).size(), selection.size());
    mod->reset_out_keys();
    td = mod(ab());
    EXPECT_THAT(key_strings(td.keys()), UnorderedElementsAre("'a'", "'b'", "'c'", "'d'", "'e'"));
  }
}

struct ThreeOut : TensorDictModuleBase {
  explicit ThreeOut(bool inplace)
      : TensorDictModuleBase("ThreeOut", {"a", "b"}, {"c", "d", "e"}), inplace(inplace) {}
  TensorDict forward_impl(TensorDict td, const std::optional<TensorDict>&) override {
    at::Tensor c = td.get("a") + 2;
    at::Tensor d = td.get("b") + 2;
    TensorDict out = inplace ? td : TensorDict();
    return out.set("c", c).set("d", d).set("e", d + 2);
  }
  bool inplace;
};

TEST(SelectOutKeysTest, TensorDictModuleBaseSubclass) {
  for (bool inplace : {true, false}) {
    for (const std::vector<NestedKey>& selection : {std::vector<NestedKey>{"d"}, {"d", "e"}}) {
      auto mod = std::make_shared<ThreeOut>(inplace);
      std::vector<std::string> expected_all = {"'c'", "'d'", "'e'"};
      std::vector<std::string> expected_selected = key_strings(selection);
      if (inplace) {
        expected_all.insert(expected_all.begin(), {"'a'", "'b'"});
        expected_selected.insert(expected_selected.begin(), {"'a'", "'b'"});
      }
      EXPECT_THAT(key_strings(mod->forward(ab()).keys()), UnorderedElementsAreArray(expected_all));
      mod->select_out_keys(selection);
      EXPECT_THAT(key_strings(mod->forward(ab()).keys()), UnorderedElementsAreArray(expected_selected));
      mod->reset_out_keys();
      EXPECT_THAT(key_strings(mod->forward(ab()).keys()), UnorderedElementsAreArray(expected_all));
    }
  }
}

TEST(SelectOutKeysTest, WrapperSelectsItsOwnOutput) {
  TensorDictModuleWrapper mod(three_outputs());
  EXPECT_THAT(key_strings(mod(ab()).keys()), UnorderedElementsAre("'a'", "'b'", "'c'", "'d'", "'e'"));
  EXPECT_EQ(&mod->select_out_keys({"d"}), mod.get());
  EXPECT_EQ(key_strings(mod->out_keys()), (std::vector<std::string>{"'d'"}));
  EXPECT_THAT(key_strings(mod(ab()).keys()), UnorderedElementsAre("'a'", "'b'", "'d'"));
  auto res = dispatch(mod, {torch::zeros({}), torch::ones({})});
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].item<float>(), 3.0f);
  mod->reset_out_keys();
  EXPECT_THAT(key_strings(mod(ab()).keys()), UnorderedElementsAre("'a'", "'b'", "'c'", "'d'", "'e'"));
}

}  // namespace
}  // namespace tdp::nn
