// Skip-existing, dispatch, select_out_keys, WrapModule, TensorDictModuleWrapper and
// as_tensordict_module: tensordict's TestSkipExisting, the dispatch tests of TestTDModule,
// TestSelectOutKeys and TestAsTDM.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <atomic>
#include <thread>

#include "sdk/nn/as_tensordict_module.h"
#include "sdk/nn/dispatch.h"
#include "sdk/nn/skip_existing.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_module_wrapper.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/nn/wrap_module.h"
#include "tests/nn/test_util.h"

namespace tdp::nn {
namespace {

using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;
using testing::key_strings;
using testing::make_td;
using testing::ThrowMessage;

TensorDictModuleOptions keys(std::vector<NestedKey> in, std::vector<NestedKey> out) {
  return TensorDictModuleOptions(std::move(in), std::move(out));
}

// ---- skip existing ---------------------------------------------------------------------------

TEST(SkipExistingTest, GuardSetsAndRestoresTheMode) {
  EXPECT_FALSE(skip_existing().is_on());
  {
    SkipExistingGuard on(true);
    EXPECT_EQ(skip_existing(), SkipExistingMode(true));
    {
      SkipExistingGuard off(false);
      EXPECT_EQ(skip_existing(), SkipExistingMode(false));
    }
    EXPECT_TRUE(skip_existing_enabled());
  }
  EXPECT_EQ(skip_existing().to_string(), "False");
  {
    SkipExistingGuard only({"out", {"a", "b"}});
    EXPECT_EQ(skip_existing().to_string(), "['out', ('a', 'b')]");
  }
  EXPECT_FALSE(skip_existing_enabled());
}

TEST(SkipExistingTest, ThreadLocalGuardOnlyAffectsItsThread) {
  SkipExistingGuard local(true, /*thread_local_=*/true);
  EXPECT_TRUE(skip_existing().is_on());
  bool other_thread_sees = true;
  std::thread([&] { other_thread_sees = skip_existing().is_on(); }).join();
  EXPECT_FALSE(other_thread_sees);

  // A global guard reaches other threads, but this thread keeps its own mode.
  SkipExistingGuard global(false);
  EXPECT_TRUE(skip_existing().is_on());
}

TEST(SkipExistingTest, GlobalGuardReachesOtherThreads) {
  SkipExistingGuard global(true);
  bool other_thread_sees = false;
  std::thread([&] { other_thread_sees = skip_existing().is_on(); }).join();
  EXPECT_TRUE(other_thread_sees);
}

TEST(SkipExistingTest, TensorDictModule) {
  TensorDictModule module([](const at::Tensor& x) { return x + 1; }, keys({"in"}, {"out"}));
  TensorDict td = make_td({{"in", torch::zeros({})}});
  module(td);
  EXPECT_EQ(td.get("out").item<float>(), 1.0f);

  td = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  module(td);
  EXPECT_EQ(td.get("out").item<float>(), 1.0f);

  td = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  {
    SkipExistingGuard guard(true);
    module(td);
  }
  EXPECT_EQ(td.get("out").item<float>(), 0.0f);

  td = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  {
    SkipExistingGuard guard(false);
    module(td);
  }
  EXPECT_EQ(td.get("out").item<float>(), 1.0f);
}

struct InToOut : TensorDictModuleBase {
  InToOut() : TensorDictModuleBase("InToOut", {"in"}, {"out"}) {}
  TensorDict forward_impl(TensorDict td, const std::optional<TensorDict>&) override {
    return td.set("out", td.get("in") + 1);
  }
};

TEST(SkipExistingTest, TensorDictSequential) {
  TensorDictSequential module({std::make_shared<InToOut>()});
  TensorDict td = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  module(td);
  EXPECT_EQ(td.get("out").item<float>(), 1.0f);

  td = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  {
    SkipExistingGuard guard(true);
    module(td);
  }
  EXPECT_EQ(td.get("out").item<float>(), 0.0f);
}

TEST(SkipExistingTest, ModuleWritingItsOwnInputAlwaysRuns) {
  TensorDictModule module([](const at::Tensor& x) { return x + 1; }, keys({"out"}, {"out"}));
  TensorDict td = make_td({{"out", torch::zeros({})}});
  SkipExistingGuard guard(true);
  module(td);
  EXPECT_EQ(td.get("out").item<float>(), 1.0f);
}

TEST(SkipExistingTest, KeyListLimitsWhatIsSkipped) {
  TensorDictModule value([](const at::Tensor& x) { return x + 1; }, keys({"in"}, {"value"}));
  TensorDictModule action([](const at::Tensor& x) { return x + 1; }, keys({"in"}, {"action"}));
  TensorDict td = make_td({{"in", torch::zeros({})}, {"value", torch::zeros({})}, {"action", torch::zeros({})}});
  SkipExistingGuard guard({"value"}, /*thread_local_=*/true);
  value(td);
  action(td);
  EXPECT_EQ(td.get("value").item<float>(), 0.0f);   // listed: reused
  EXPECT_EQ(td.get("action").item<float>(), 1.0f);  // not listed: recomputed
}

// ---- dispatch ----------------------------------------------------------------------------------

TEST(DispatchTest, LinearByName) {
  TensorDictModule tdm(torch::nn::Linear(1, 1), keys({"a"}, {"b"}));
  TensorDict td = make_td({{"a", torch::zeros({1, 1})}}, {1});
  tdm(td);
  auto out = dispatch(tdm, {}, {{"a", torch::zeros({1, 1})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].equal(td.get("b")));
  EXPECT_TRUE(dispatch(tdm, {torch::zeros({1, 1})})[0].equal(td.get("b")));
}

TEST(DispatchTest, NestedKeysJoinWithSeparator) {
  TensorDictModule tdm(torch::nn::Linear(1, 1), keys({{"a", "c"}}, {{"b", "d"}}));
  TensorDict td = make_td({{{"a", "c"}, torch::zeros({1, 1})}}, {1});
  tdm(td);
  EXPECT_TRUE(dispatch(tdm, {}, {{"a_c", torch::zeros({1, 1})}})[0].equal(td.get({"b", "d"})));

  TensorDictModule confusing(torch::nn::Linear(1, 1), keys({{"a_1", "c"}}, {{"b_2", "d"}}));
  td = make_td({{{"a_1", "c"}, torch::zeros({1, 1})}}, {1});
  confusing(td);
  EXPECT_TRUE(dispatch(confusing, {}, {{"a_1_c", torch::zeros({1, 1})}})[0].equal(td.get({"b_2", "d"})));

  TensorDictModule sep([](const at::Tensor& x) { return x + 1; }, keys({{"a", "c"}}, {"b"}));
  auto b = dispatch(sep, {}, {{"asepc", torch::zeros({1, 2})}}, DispatchOptions().separator("sep"));
  EXPECT_TRUE(b[0].eq(1).all().item<bool>());
}

TEST(DispatchTest, PositionalAndNamedArguments) {
  TensorDictModule mod([](const at::Tensor& ac, const at::Tensor& d) { return ac + d; },
                       keys({{"a", "c"}, "d"}, {"b"}));
  auto b = dispatch(mod, {torch::zeros({1, 2})}, {{"d", torch::ones({1, 2})}});
  EXPECT_TRUE(b[0].eq(1).all().item<bool>());
  EXPECT_EQ(ThrowMessage<std::invalid_argument>(
                [&] { dispatch(mod, {torch::zeros({1, 2})}, {{"a_c", torch::ones({1, 2})}}); }),
            "dispatch(TensorDictModule): Duplicated argument in args and kwargs: 'a_c' is given "
            "by position and by name.");
  EXPECT_EQ(ThrowMessage<std::invalid_argument>(
                [&] { dispatch(mod, {torch::zeros({1, 2})}, {{"e", torch::ones({1, 2})}}); }),
            "dispatch(TensorDictModule): unexpected named tensor 'e'; the accepted names are "
            "['a_c', 'd'].");
  EXPECT_EQ(ThrowMessage<std::invalid_argument>([&] {
              dispatch(mod, {torch::zeros({1}), torch::zeros({1}), torch::zeros({1})});
            }),
            "dispatch(TensorDictModule): got 3 positional tensor(s) but the source keys are "
            "[('a', 'c'), 'd'].");
}

TEST(DispatchTest, AutoBatchSize) {
  for (bool auto_batch : {true, false}) {
    auto fn = [auto_batch](TensorDict td) {
      const std::vector<int64_t> expected =
          auto_batch ? std::vector<int64_t>({2, 3}) : std::vector<int64_t>();
      EXPECT_EQ(td.batch_size().vec(), expected);
      return td.set("b", td.get({"a", "c"}) + td.get("d"));
    };
    auto b = dispatch(fn, {torch::zeros({2, 3})}, {{"d", torch::ones({2, 3})}},
                      DispatchOptions()
                          .source(std::vector<NestedKey>{{"a", "c"}, "d"})
                          .dest(std::vector<NestedKey>{"b"})
                          .auto_batch_size(auto_batch));
    EXPECT_TRUE(b[0].eq(1).all().item<bool>());
  }
}

TEST(DispatchTest, SourceAndDestOverrideTheModuleKeys) {
  WrapModule wrapped([](TensorDict td) { return td.set("b", td.get({"a", "c"}) + 1); });
  auto b = dispatch(wrapped, {}, {{"asepc", torch::zeros({1, 2})}},
                    DispatchOptions()
                        .separator("sep")
                        .source(std::vector<NestedKey>{{"a", "c"}})
                        .dest(std::vector<NestedKey>{"b"}));
  EXPECT_TRUE(b[0].eq(1).all().item<bool>());
  EXPECT_EQ(ThrowMessage<std::invalid_argument>([] {
              dispatch([](TensorDict td) { return td; }, {}, {}, DispatchOptions());
            }),
            "dispatch: a function has no in_keys or out_keys; set DispatchOptions source and dest.");
}

TEST(DispatchTest, SequenceReturnsAllOutKeys) {
  TensorDictSequential tdm({TensorDictModule(torch::nn::Linear(1, 1), keys({{"a", "c"}}, {{"b", "d"}})),
                            TensorDictModule(torch::nn::Linear(1, 1), keys({{"a", "c"}}, {"e"}))});
  TensorDict td = make_td({{{"a", "c"}, torch::zeros({1, 1})}}, {1});
  tdm(td);
  auto out = dispatch(tdm, {}, {{"a_c", torch::zeros({1, 1})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].equal(td.get({"b", "d"})));
  EXPECT_TRUE(out[1].equal(td.get("e")));
}

// ---- select_out_keys -----------------------------------------------------------------------

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

TEST(SelectOutKeysTest, NonExistentKeyIsRejected) {
  auto mod = three_outputs();
  EXPECT_EQ(ThrowMessage<std::invalid_argument>([&] { mod->select_out_keys({{"d", "e"}}); }),
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
  for (const std::vector<NestedKey> selection : {std::vector<NestedKey>{"d"}, {"d", "e"}}) {
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

// ---- WrapModule, TensorDictModuleWrapper, as_tensordict_module --------------------------------

TEST(WrapModuleTest, ReshapesInsideASequence) {
  TensorDictSequential seq({TensorDictModule([](const at::Tensor& x) { return x * 2; }, keys({"x"}, {"y"})),
                            WrapModule([](TensorDict td) { return td.reshape({-1}); })});
  TensorDict td = seq(make_td({{"x", torch::ones({3, 4, 5})}}, {3, 4}));
  EXPECT_EQ(td.batch_size().vec(), (std::vector<int64_t>{12}));
  EXPECT_TRUE(td.get("y").eq(2).all().item<bool>());
  EXPECT_EQ(td.get("y").sizes(), (std::vector<int64_t>{12, 5}));
}

TEST(WrapModuleTest, InplaceUpdatesTheInput) {
  auto fn = [](TensorDict td) { return make_td({{"z", td.get("x") + 1}}); };
  WrapModule copying(fn, WrapModuleOptions().in_keys({"x"}).out_keys({"z"}));
  WrapModule inplace(fn, WrapModuleOptions().inplace(true).in_keys({"x"}).out_keys({"z"}));
  EXPECT_EQ(key_strings(copying->in_keys()), (std::vector<std::string>{"'x'"}));
  TensorDict td = make_td({{"x", torch::zeros({})}});
  TensorDict out = copying(td);
  EXPECT_FALSE(out.is_same(td));
  EXPECT_FALSE(td.contains("z"));
  out = inplace(td);
  EXPECT_TRUE(out.is_same(td));
  EXPECT_EQ(td.get("z").item<float>(), 1.0f);
}

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

struct Counter {
  at::Tensor add(const at::Tensor& c) {
    ++calls;
    return c + 1;
  }
  at::Tensor scaled(const at::Tensor& c) const { return c * factor; }
  int calls = 0;
  double factor = 3.0;
};

TEST(AsTensorDictModuleTest, FreeFunctionAndMethod) {
  auto func = as_tensordict_module([](const at::Tensor& c) { return c + 1; }, {"c"}, {"d"});
  EXPECT_EQ(func(make_td({{"c", torch::zeros({})}})).get("d").item<float>(), 1.0f);

  Counter counter;
  auto method = as_tensordict_module(&Counter::add, &counter, {"c"}, {"d"});
  EXPECT_EQ(method(make_td({{"c", torch::zeros({})}})).get("d").item<float>(), 1.0f);
  EXPECT_EQ(counter.calls, 1);
  const Counter& const_counter = counter;
  auto const_method = as_tensordict_module(&Counter::scaled, &const_counter, {"c"}, {"d"});
  EXPECT_EQ(const_method(make_td({{"c", torch::ones({})}})).get("d").item<float>(), 3.0f);
}

}  // namespace
}  // namespace tdp::nn
