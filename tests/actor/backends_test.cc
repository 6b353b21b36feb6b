// The Actor's backends on their own (sdk/actor/backend.h): the recurrent-state rule every backend
// follows, which calls each backend takes, that the fused and LibTorch backends return the same
// outputs for the same call, and what each adds to ActorInfo. The CUDA-graph backend needs a GPU
// (tests/actor/actor_cuda_test.cc).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sdk/actor/backend.h"
#include "sdk/actor/current_plan.h"
#include "sdk/actor/fused_backend.h"
#include "sdk/actor/libtorch_backend.h"
#include "sdk/actor/recurrent_state.h"
#include "sdk/policy/policy.h"
#include "tests/actor/actor_specs.h"
#include "tests/testing/files.h"

namespace tdp::actor {
namespace {

using ::testing::HasSubstr;
using nn::InteractionType;

using test_specs::kCategorical;

constexpr const char* kRecurrent = R"pb(
  name: "backend_gru" version: "1" init_seed: 5
  inputs { key: "observation" shape: [4] }
  inputs { key: "memory/hidden" shape: [8] }
  output_keys: ["action"]
  module { sequential {
    modules { overwrite_keys: ["memory/hidden"]
              network { in_keys: ["observation", "memory/hidden"] out_keys: ["memory/hidden"]
                        network { gru_cell { input_size: 4 hidden_size: 8 } } } }
    modules { network { in_keys: ["memory/hidden"] out_keys: ["action"]
                        network { linear { in_features: 8 out_features: 2 } } } } } }
)pb";

policy::Policy load(const char* text) {
  const std::string path = test_util::temp_path("backend.pbtxt");
  test_util::write_file(path, text);
  absl::StatusOr<policy::Policy> policy = policy::load_policy(path);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return *std::move(policy);
}

TensorDict observations(int64_t n, int seed = 0) {
  at::manual_seed(seed);
  return TensorDict({{"observation", at::randn({n, 4})}}, {n});
}

TEST(RecurrentStateTest, NoneOfTheKeysUsesTheKeptStateAllOfThemNoneAndSomeIsAnError) {
  const policy::Policy policy = load(kRecurrent);
  RecurrentState state(policy.signature, c10::Device(c10::kCPU));
  ASSERT_EQ(state.keys(), (std::vector<NestedKey>{{"memory", "hidden"}}));
  EXPECT_TRUE(state.uses_kept(observations(2)));

  TensorDict stateless = observations(2);
  stateless.set({"memory", "hidden"}, at::ones({2, 8}));
  EXPECT_FALSE(state.uses_kept(stateless));

  const policy::Policy stateless_policy = load(kCategorical);
  EXPECT_FALSE(RecurrentState(stateless_policy.signature, c10::Device(c10::kCPU)).uses_kept(observations(2)));
}

TEST(RecurrentStateTest, ZerosAtFirstThenWhatWasKeptPerEnvironmentUntilReset) {
  const policy::Policy policy = load(kRecurrent);
  RecurrentState state(policy.signature, c10::Device(c10::kCPU));
  std::vector<at::Tensor> first = state.get({3});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].equal(at::zeros({3, 8})));

  TensorDict out({3});
  out.set({"memory", "hidden"}, at::arange(24, at::kFloat).reshape({3, 8}));
  state.keep(out);
  EXPECT_TRUE(state.get({3})[0].equal(out.get({"memory", "hidden"})));

  state.reset(at::tensor({0, 1, 0}).to(at::kBool));
  at::Tensor expected = out.get({"memory", "hidden"}).clone();
  expected[1].zero_();
  EXPECT_TRUE(state.get({3})[0].equal(expected));
  EXPECT_THROW(state.reset(at::ones({2}, at::kBool)), std::invalid_argument);

  // Another batch size starts from zeros; so does everything after reset().
  EXPECT_TRUE(state.get({2})[0].equal(at::zeros({2, 8})));
  state.keep(TensorDict({{{"memory", "hidden"}, at::ones({2, 8})}}, {2}));
  state.reset();
  state.keep(TensorDict({{{"memory", "hidden"}, at::ones({2, 8})}}, {2}));  // a call that ran across the reset
  EXPECT_TRUE(state.get({2})[0].equal(at::zeros({2, 8})));

  // The next state given as tensors (the fused act_into's form): the batch from their shape.
  state.keep(std::vector<at::Tensor>{at::full({4, 8}, 2.0f)});
  EXPECT_TRUE(state.get({4})[0].equal(at::full({4, 8}, 2.0f)));
  EXPECT_THROW(state.keep(std::vector<at::Tensor>{}), std::logic_error);
}

TEST(LibTorchBackendTest, TakesEveryCallAndChecksTheObservationAgainstTheSignature) {
  ActorCore core(load(kCategorical), ActorOptions().backend(Backend::kLibTorch));
  LibTorchBackend backend(core);
  const TensorDict obs = observations(5);
  const ActCall call(core.policy.signature, obs, InteractionType::kDeterministic, std::nullopt);
  ASSERT_TRUE(backend.accepts(call));
  const TensorDict out = backend.act(call);
  EXPECT_EQ(out.keys(), (std::vector<NestedKey>{"action", "action_log_prob"}));
  EXPECT_EQ(out.get("action").sizes(), (std::vector<int64_t>{5}));
  // The argmax of the module's own logits.
  TensorDict direct = obs.clone(/*deep=*/false);
  core.policy.module->forward(direct);
  EXPECT_TRUE(out.get("action").equal(direct.get("logits").argmax(-1)));

  const TensorDict wrong({{"observation", at::zeros({5, 3})}}, {5});
  try {
    backend.act(ActCall(core.policy.signature, wrong, std::nullopt, std::nullopt));
    FAIL() << "a wrong shape was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_THAT(error.what(), HasSubstr("input \"observation\" has shape [5, 3], expected [5, 4]"));
  }
}

TEST(FusedBackendTest, TakesOnlyTheCallsThePlanComputes) {
  ActorCore core(load(kCategorical), ActorOptions().fused_max_batch(8));
  FusedBackend fused(core);
  ASSERT_NE(fused.layout(), nullptr);
  const policy::Signature& signature = core.policy.signature;
  const TensorDict small = observations(8);
  const TensorDict large = observations(9);
  EXPECT_TRUE(fused.accepts(ActCall(signature, small, InteractionType::kRandom, std::nullopt)));
  EXPECT_FALSE(fused.accepts(ActCall(signature, large, InteractionType::kRandom, std::nullopt)))
      << "beyond fused_max_batch";
  EXPECT_FALSE(fused.accepts(ActCall(signature, small, InteractionType::kMean, std::nullopt))) << "no categorical mean";
  EXPECT_FALSE(fused.accepts(ActCall(signature, small, InteractionType::kRandom, at::detail::createCPUGenerator(1))))
      << "a generator of the call's own";
  const TensorDict doubles({{"observation", at::zeros({2, 4}, at::kDouble)}}, {2});
  EXPECT_FALSE(fused.accepts(ActCall(signature, doubles, InteractionType::kRandom, std::nullopt))) << "not float32";
  const TensorDict two_dims({{"observation", at::zeros({2, 3, 4})}}, {2, 3});
  EXPECT_FALSE(fused.accepts(ActCall(signature, two_dims, InteractionType::kRandom, std::nullopt)));
}

TEST(FusedBackendTest, GivesTheLibTorchBackendsOutputsForDeterministicCalls) {
  for (const char* spec : {kCategorical, kRecurrent}) {
    ActorCore fused_core(load(spec), ActorOptions());
    ActorCore eager_core(load(spec), ActorOptions().backend(Backend::kLibTorch));
    FusedBackend fused(fused_core);
    LibTorchBackend eager(eager_core);
    // Two steps: the recurrent policy's second one reads the state each backend kept.
    for (int step = 0; step < 2; ++step) {
      const TensorDict obs = observations(4, step);
      const ActCall call(fused_core.policy.signature, obs, InteractionType::kDeterministic, std::nullopt);
      ASSERT_TRUE(fused.accepts(call));
      const TensorDict a = fused.act(call);
      const TensorDict b = eager.act(call);
      ASSERT_EQ(a.keys(), b.keys());
      for (const NestedKey& key : a.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
        SCOPED_TRACE(key.to_string());
        EXPECT_EQ(a.get(key).scalar_type(), b.get(key).scalar_type());
        EXPECT_TRUE(at::allclose(a.get(key).to(at::kDouble), b.get(key).to(at::kDouble), 1e-5, 1e-5));
      }
    }
  }
}

TEST(FusedBackendTest, DescribesThePlanAndTheFlatApi) {
  ActorCore core(load(kCategorical), ActorOptions());
  FusedBackend fused(core);
  ActorInfo info;
  fused.describe(info);
  EXPECT_TRUE(info.fused_status.ok());
  EXPECT_TRUE(info.flat_status.ok());
  EXPECT_EQ(info.flat_observation_size, 4);
  EXPECT_EQ(info.flat_action_size, 1);
  EXPECT_EQ(info.fused_max_batch, 16384);
  EXPECT_TRUE(info.runs_fused(16384, InteractionType::kRandom));
  EXPECT_FALSE(info.runs_fused(16385, InteractionType::kRandom));
  EXPECT_FALSE(info.runs_fused(1, InteractionType::kMean));
  ASSERT_FALSE(info.modules.empty());
  EXPECT_THAT(info.modules[0], HasSubstr(": fused (Mlp 4->2"));

  ActorCore recurrent_core(load(kRecurrent), ActorOptions());
  FusedBackend recurrent(recurrent_core);
  ActorInfo recurrent_info;
  recurrent.describe(recurrent_info);
  EXPECT_TRUE(recurrent_info.fused_status.ok());
  EXPECT_THAT(recurrent_info.flat_status.message(), HasSubstr("the policy is recurrent (state memory/hidden)"));
  EXPECT_EQ(recurrent_info.flat_observation_size, 0);

  ActorCore libtorch_core(load(kCategorical), ActorOptions().backend(Backend::kLibTorch));
  FusedBackend none(libtorch_core);
  EXPECT_EQ(none.layout(), nullptr);
  ActorInfo none_info;
  none.describe(none_info);
  EXPECT_THAT(none_info.fused_status.message(), HasSubstr("kLibTorch"));
  const TensorDict one = observations(1);
  EXPECT_FALSE(none.accepts(ActCall(libtorch_core.policy.signature, one, InteractionType::kRandom, std::nullopt)));
}

TEST(CurrentPlanTest, AHoldKeepsItsPlanAliveAndCurrentForItWhileAReplacementWaitsForIt) {
  const policy::Policy policy = load(kCategorical);
  auto lowered = [&] {
    absl::StatusOr<std::shared_ptr<const fused::FusedPlan>> plan = fused::FusedPlan::lower(policy);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return *std::move(plan);
  };
  std::shared_ptr<const fused::FusedPlan> first = lowered(), second = lowered(), third = lowered();
  const fused::FusedPlan* const first_address = first.get();
  const fused::FusedPlan* const second_address = second.get();
  const std::weak_ptr<const fused::FusedPlan> first_alive = first, second_alive = second;
  CurrentPlan current;
  current.replace(std::move(first));
  std::atomic<bool> replaced{false};
  std::thread refresher;
  {
    const CurrentPlan::Hold held = current.hold();
    EXPECT_EQ(&*held, first_address);
    refresher = std::thread([&] {
      current.replace(std::move(second));
      replaced = true;
    });
    // New holds take the new plan at once, while the replacement waits for this hold.
    for (;;) {
      const CurrentPlan::Hold now = current.hold();
      if (&*now == second_address) break;
      std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(replaced.load());
    EXPECT_FALSE(first_alive.expired());
    EXPECT_EQ(held->observation_size(), 4);
    EXPECT_EQ(&*held, first_address);
  }
  // The hold ended: the replacement frees the first plan and returns.
  refresher.join();
  EXPECT_TRUE(replaced.load());
  EXPECT_TRUE(first_alive.expired());
  current.replace(std::move(third));  // no hold left on the second: returns at once
  EXPECT_TRUE(second_alive.expired());
}

TEST(CurrentPlanTest, ManyThreadsHoldWhileOneReplacesAndEveryHoldSeesALivePlan) {
  const policy::Policy policy = load(kCategorical);
  CurrentPlan current;
  std::atomic<int64_t> alive{0};
  auto lowered = [&] {
    absl::StatusOr<std::shared_ptr<const fused::FusedPlan>> plan = fused::FusedPlan::lower(policy);
    EXPECT_TRUE(plan.ok()) << plan.status();
    ++alive;
    // Counts the plans not yet freed: a hold must never see one freed.
    return std::shared_ptr<const fused::FusedPlan>((*plan).get(), [keep = *plan, &alive](const fused::FusedPlan*) {
      --alive;
    });
  };
  current.replace(lowered());
  std::atomic<bool> done{false};
  std::atomic<int64_t> holds{0}, bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      while (!done.load()) {
        const CurrentPlan::Hold plan = current.hold();
        if (plan->observation_size() != 4) ++bad;
        ++holds;
      }
    });
  }
  for (int i = 0; i < 100; ++i) {
    current.replace(lowered());
    EXPECT_EQ(alive.load(), 1);  // once replace() returns, the plan it replaced is freed
  }
  while (holds.load() < 1000) std::this_thread::yield();
  done = true;
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(alive.load(), 1);
}

}  // namespace
}  // namespace tdp::actor
