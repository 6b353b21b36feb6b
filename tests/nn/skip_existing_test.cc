// Skip-existing (sdk/nn/skip_existing.h): the mode's guards and threads, and modules that skip
// outputs already present; tensordict's TestSkipExisting.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <thread>

#include "sdk/nn/skip_existing.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/nn/wrap_module.h"
#include "tests/testing/module_keys.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using test_util::keys;
using test_util::make_td;

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

// tensordict honours skip-existing in TensorDictModule, TensorDictSequential and the
// probabilistic modules only (their forward carries _set_skip_existing_None); any other module
// runs whatever the mode.
TEST(SkipExistingTest, CustomSubclassAlwaysRuns) {
  auto module = std::make_shared<InToOut>();
  TensorDict td = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  SkipExistingGuard guard(true);
  module->forward(td);
  EXPECT_EQ(td.get("out").item<float>(), 1.0f);
}

struct OptedIn : InToOut {
  OptedIn() { honor_skip_existing(); }
};

TEST(SkipExistingTest, SubclassMayOptIn) {
  auto module = std::make_shared<OptedIn>();
  TensorDict td = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  SkipExistingGuard guard(true);
  module->forward(td);
  EXPECT_EQ(td.get("out").item<float>(), 0.0f);
}

TEST(SkipExistingTest, WrapModuleWithNoOutKeysAlwaysRuns) {
  int calls = 0;
  WrapModule module([&calls](TensorDict td) {
    ++calls;
    return td;
  });
  SkipExistingGuard guard(true);
  module(make_td({{"in", torch::zeros({})}}));
  EXPECT_EQ(calls, 1);
}

TEST(SkipExistingTest, NestedSequenceIsSkippedAsAWholeWhileOthersRun) {
  TensorDictModule first([](const at::Tensor& x) { return x + 1; }, keys({"in"}, {"mid"}));
  TensorDictModule second([](const at::Tensor& x) { return x + 1; }, keys({"mid"}, {"mid2"}));
  TensorDictModule last([](const at::Tensor& x) { return x + 1; }, keys({"mid2"}, {"out"}));
  TensorDictSequential inner({first, second});
  TensorDictSequential outer({inner, last});
  TensorDict td = make_td({{"in", torch::zeros({})}, {"mid", torch::full({}, 5.0)}, {"mid2", torch::full({}, 10.0)}});
  {
    SkipExistingGuard guard(true);
    outer(td);
  }
  EXPECT_EQ(td.get("mid").item<float>(), 5.0f);  // inner skipped: both its outputs were there
  EXPECT_EQ(td.get("out").item<float>(), 11.0f);  // last ran on the kept mid2
}

TEST(SkipExistingTest, ThreadLocalModeSkipsOnlyInItsThread) {
  TensorDictModule module([](const at::Tensor& x) { return x + 1; }, keys({"in"}, {"out"}));
  SkipExistingGuard local(true, /*thread_local_=*/true);
  TensorDict here = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  TensorDict there = make_td({{"in", torch::zeros({})}, {"out", torch::zeros({})}});
  module(here);
  std::thread([&] { module(there); }).join();
  EXPECT_EQ(here.get("out").item<float>(), 0.0f);
  EXPECT_EQ(there.get("out").item<float>(), 1.0f);
}

}  // namespace
}  // namespace tdp::nn
