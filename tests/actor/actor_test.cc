// Actor: load from a spec, act on batches, per-call interaction types and generators, recurrent
// state kept per environment, the options `tdp run` and `tdp bench` rely on (modules' own
// interaction types, the aggregation mode, every entry returned), and thread safety with 8
// simulator threads.
#include "sdk/actor/actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <absl/strings/str_cat.h>
#include <c10/core/InferenceMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "tdpolicy/spec.pb.h"

#include "tests/actor/actor_specs.h"
#include "tests/testing/error_of.h"
#include "tests/testing/files.h"
#include "tests/testing/log_capture.h"
#include "tests/testing/status_matchers.h"

namespace tdp::actor {
namespace {

using nn::InteractionType;

using test_specs::kCategorical;
using test_specs::kRecurrent;

std::string write_spec(const std::string& name, const char* text) {
  const std::string path = test_util::temp_path(name + ".pbtxt");
  test_util::write_file(path, text);
  return path;
}

// The actor of the spec `text`, or the loader's Status.
absl::StatusOr<std::unique_ptr<Actor>> load(const char* text, ActorOptions options = {}) {
  return Actor::load(write_spec("actor", text), options);
}

TensorDict observations(int64_t n, int seed = 0) {
  at::manual_seed(seed);
  return TensorDict({{"observation", at::randn({n, 4})}}, {n});
}

TEST(ActorTest, ActsOnBatchesAndReturnsTheSpecsOutputs) {
  ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical));
  for (int64_t n : {1, 16}) {
    TensorDict obs = observations(n);
    TensorDict out = actor->act(obs);
    EXPECT_EQ(out.get("action").sizes(), at::IntArrayRef({n}));
    EXPECT_EQ(out.get("action").scalar_type(), at::kLong);
    EXPECT_EQ(out.get("action_log_prob").sizes(), at::IntArrayRef({n}));
    EXPECT_FALSE(out.contains("logits"));
    EXPECT_FALSE(obs.contains("action"));  // the caller's observation is untouched
  }
  TensorDict named = actor->act({{"observation", at::randn({5, 4})}});
  EXPECT_EQ(named.batch_size(), at::IntArrayRef({5}));
}

TEST(ActorTest, InteractionTypePerActorAndPerCall) {
  ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical));
  TensorDict obs = observations(64);
  at::Tensor greedy = actor->act(obs, InteractionType::kDeterministic).get("action");
  EXPECT_TRUE(greedy.equal(actor->act(obs, InteractionType::kMode).get("action")));
  actor->set_interaction_type(InteractionType::kDeterministic);
  EXPECT_TRUE(greedy.equal(actor->act(obs).get("action")));
  actor->set_interaction_type(InteractionType::kRandom);
  // 64 random draws from a near-uniform 2-way categorical almost surely differ from greedy.
  EXPECT_FALSE(greedy.equal(actor->act(obs).get("action")));
  EXPECT_FALSE(nn::interaction_type().has_value());  // nothing leaks out of act()
}

TEST(ActorTest, SeededActorsReproduceAndGeneratorsOverride) {
  ASSERT_OK_AND_ASSIGN(auto a, load(kCategorical, ActorOptions().seed(7)));
  ASSERT_OK_AND_ASSIGN(auto b, load(kCategorical, ActorOptions().seed(7)));
  TensorDict obs = observations(32);
  for (int step = 0; step < 3; ++step) EXPECT_TRUE(a->act(obs).get("action").equal(b->act(obs).get("action")));
  at::Tensor first = a->act(obs, InteractionType::kRandom, at::detail::createCPUGenerator(1)).get("action");
  at::Tensor again = b->act(obs, InteractionType::kRandom, at::detail::createCPUGenerator(1)).get("action");
  EXPECT_TRUE(first.equal(again));
}

TEST(ActorTest, EightThreadsShareOneActorWithTheirOwnModesAndStreams) {
  ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical));
  TensorDict obs = observations(32);
  const at::Tensor greedy = actor->act(obs, InteractionType::kDeterministic).get("action");
  std::vector<at::Tensor> expected_random;
  for (int t = 0; t < 8; ++t) {
    expected_random.push_back(
        actor->act(obs, InteractionType::kRandom, at::detail::createCPUGenerator(100 + t)).get("action"));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int step = 0; step < 50; ++step) {
        if (t % 2 == 0) {
          if (!actor->act(obs, InteractionType::kDeterministic).get("action").equal(greedy)) ++mismatches;
        } else {
          at::Tensor got = actor->act(obs, InteractionType::kRandom, at::detail::createCPUGenerator(100 + t)).get("action");
          if (!got.equal(expected_random[t])) ++mismatches;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ActorTest, OneActorPerThreadGivesEachThreadTheSameSeededStream) {
  TensorDict obs = observations(16);
  std::vector<std::vector<at::Tensor>> runs(8);
  const std::string path = write_spec("per_thread", kCategorical);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      ASSERT_OK_AND_ASSIGN(auto actor, Actor::load(path, ActorOptions().seed(42)));
      for (int step = 0; step < 10; ++step) runs[t].push_back(actor->act(obs).get("action"));
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) ASSERT_EQ(runs[t].size(), 10u) << "thread " << t;
  for (int t = 1; t < 8; ++t) {
    for (int step = 0; step < 10; ++step) EXPECT_TRUE(runs[t][step].equal(runs[0][step]));
  }
}

TEST(ActorTest, RecurrentStateIsKeptPerEnvironmentAndReset) {
  ASSERT_OK_AND_ASSIGN(auto actor, load(kRecurrent));
  ASSERT_EQ(actor->signature().state_keys.size(), 1u);
  TensorDict obs = observations(3);
  TensorDict first = actor->act(obs);
  TensorDict second = actor->act(obs);
  ASSERT_TRUE(first.contains("hidden"));
  EXPECT_FALSE(first.get("hidden").equal(second.get("hidden")));  // the state moved on
  // Stateless form: the same starting state gives the same result, and the kept state is untouched.
  TensorDict given = obs.clone();
  given.set("hidden", at::zeros({3, 8}));
  EXPECT_TRUE(actor->act(given).get("hidden").allclose(first.get("hidden")));
  // Reset environment 1 only: it restarts from zeros, the others continue.
  actor->reset(at::tensor({0, 1, 0}).to(at::kBool));
  TensorDict third = actor->act(obs);
  TensorDict continued = obs.clone();
  continued.set("hidden", second.get("hidden"));
  TensorDict expected = actor->act(continued);
  EXPECT_TRUE(third.get("hidden")[1].allclose(first.get("hidden")[1]));
  EXPECT_TRUE(third.get("hidden")[0].allclose(expected.get("hidden")[0]));
  EXPECT_THROW(actor->reset(at::ones({2}, at::kBool)), std::invalid_argument);
}

// A categorical actor whose probabilistic module takes the mode unless told otherwise.
constexpr const char* kModeByDefault = R"pb(
  name: "test_mode_default" version: "1" init_seed: 3
  inputs { key: "observation" shape: [4] }
  output_keys: ["action", "action_log_prob"]
  module { probabilistic_sequential {
    modules { network { in_keys: ["observation"] out_keys: ["logits"]
                        network { mlp { in_features: 4 hidden_sizes: [16] out_features: 2 } } } }
    modules { probabilistic { in_keys: ["logits"] out_keys: ["action"] distribution: "categorical"
                              default_interaction_type: "mode" return_log_prob: true } } } }
)pb";

TEST(ActorTest, AnEmptyInteractionTypeLeavesEachModuleItsDefault) {
  TensorDict obs = observations(64);
  ASSERT_OK_AND_ASSIGN(auto actor, load(kModeByDefault, ActorOptions().interaction_type(std::nullopt)));
  EXPECT_FALSE(actor->options().interaction_type().has_value());
  const at::Tensor greedy = actor->act(obs, InteractionType::kMode).get("action");
  EXPECT_TRUE(actor->act(obs).get("action").equal(greedy));
  // Not even a process-wide scope overrides the module's default.
  {
    nn::InteractionTypeGuard explore(InteractionType::kRandom);
    EXPECT_TRUE(actor->act(obs).get("action").equal(greedy));
    EXPECT_TRUE(actor->act(obs, std::nullopt).get("action").equal(greedy));
  }
  // A per-call type still wins, and set_interaction_type goes back and forth.
  EXPECT_FALSE(actor->act(obs, InteractionType::kRandom).get("action").equal(greedy));
  actor->set_interaction_type(InteractionType::kRandom);
  EXPECT_FALSE(actor->act(obs).get("action").equal(greedy));
  actor->set_interaction_type(std::nullopt);
  EXPECT_TRUE(actor->act(obs).get("action").equal(greedy));
  // The default options still explore.
  EXPECT_EQ(ActorOptions().interaction_type(), InteractionType::kRandom);
}

TEST(ActorTest, TheAggregationModeIsTheActorsAtLoadAndAtEveryCall) {
  TensorDict obs = observations(5);
  auto summed = Actor::load("policies/goal_hybrid.pbtxt",
                            ActorOptions().composite_lp_aggregate(true).return_all_entries(true));
  auto per_part = Actor::load("policies/goal_hybrid.pbtxt",
                              ActorOptions().composite_lp_aggregate(false).return_all_entries(true));
  ASSERT_TRUE(summed.ok()) << summed.status();
  ASSERT_TRUE(per_part.ok()) << per_part.status();
  // Whatever the calling thread's mode, each actor computes in its own.
  for (bool calling_mode : {false, true}) {
    nn::CompositeLpAggregateGuard caller(calling_mode);
    const TensorDict a = (*summed)->act(obs, InteractionType::kDeterministic);
    const TensorDict b = (*per_part)->act(obs, InteractionType::kDeterministic);
    EXPECT_TRUE(a.contains("sample_log_prob"));
    EXPECT_FALSE(b.contains("sample_log_prob"));
    EXPECT_TRUE(a.get("sample_log_prob")
                    .allclose(b.get("action_type_log_prob") + b.get("action_param_log_prob").sum(-1), 1e-5, 1e-6));
  }
  // Unset: the mode in force when the actor is made.
  {
    nn::CompositeLpAggregateGuard at_load(true);
    auto from_scope = Actor::load("policies/goal_hybrid.pbtxt", ActorOptions().return_all_entries(true));
    ASSERT_TRUE(from_scope.ok()) << from_scope.status();
    nn::CompositeLpAggregateGuard at_call(false);
    EXPECT_TRUE((*from_scope)->act(obs).contains("sample_log_prob"));
  }
}

TEST(ActorTest, AggregatedActorsReturnTheSummedLogProb) {
  const std::string goal = test_util::runfile("policies/goal_hybrid.pbtxt");
  ASSERT_OK_AND_ASSIGN(auto aggregated, Actor::load(goal, ActorOptions().composite_lp_aggregate(true).seed(2)));
  ASSERT_OK_AND_ASSIGN(auto per_part, Actor::load(goal, ActorOptions().composite_lp_aggregate(false).seed(2)));
  at::manual_seed(0);
  TensorDict obs({{"observation", at::randn({4, aggregated->spec().inputs(0).shape(0)})}}, {4});
  const TensorDict summed = aggregated->act(obs, InteractionType::kDeterministic);
  const TensorDict parts = per_part->act(obs, InteractionType::kDeterministic);
  ASSERT_TRUE(summed.contains("sample_log_prob"));
  EXPECT_FALSE(parts.contains("sample_log_prob"));
  EXPECT_TRUE(at::allclose(summed.get("sample_log_prob"),
                           parts.get("action_type_log_prob") + parts.get("action_param_log_prob").sum(-1), 1e-5,
                           1e-5));
}

// Every call's observation is checked against the spec's inputs, on either backend: the error
// names the key, the declared dtype and shape, and what was given.
TEST(ActorTest, AWrongObservationIsAnErrorNamingTheInput) {
  const std::string cartpole = test_util::runfile("policies/cartpole_categorical.pbtxt");
  for (Backend backend : {Backend::kAuto, Backend::kLibTorch}) {
    ASSERT_OK_AND_ASSIGN(auto actor, Actor::load(cartpole, ActorOptions().backend(backend)));
    auto message = [&](const TensorDict& obs) {
      try {
        actor->act(obs);
      } catch (const std::invalid_argument& error) {
        return std::string(error.what());
      }
      return std::string("no error");
    };
    EXPECT_EQ(message(TensorDict({{"observation", at::zeros({2, 5})}}, {2})),
              "Actor.act: input \"observation\" has shape [2, 5], expected [2, 4] (Float [4] per environment, "
              "batch_size [2])");
    EXPECT_EQ(message(TensorDict({{"observation", at::zeros({2, 4}, at::kDouble)}}, {2})),
              "Actor.act: input \"observation\" has dtype Double, expected Float");
    EXPECT_EQ(message(TensorDict({{"obs", at::zeros({2, 4})}}, {2})),
              "Actor.act: input \"observation\" is missing (declared Float [4] per environment, batch_size [2])");
    EXPECT_EQ(actor->act(TensorDict({{"observation", at::zeros({2, 4})}, {"extra", at::zeros({2})}}, {2}))
                  .get("action").sizes(),
              c10::IntArrayRef({2}));
  }
}

TEST(ActorTest, ReturnAllEntriesGivesTheWholeTensorDict) {
  TensorDict obs = observations(3);
  ASSERT_OK_AND_ASSIGN(auto selected, load(kCategorical, ActorOptions().seed(1)));
  ASSERT_OK_AND_ASSIGN(auto everything, load(kCategorical, ActorOptions().seed(1).return_all_entries(true)));
  const TensorDict some = selected->act(obs);
  const TensorDict all = everything->act(obs);
  EXPECT_EQ(some.keys(), (std::vector<NestedKey>{"action", "action_log_prob"}));
  EXPECT_EQ(all.keys(), (std::vector<NestedKey>{"observation", "logits", "action", "action_log_prob"}));
  EXPECT_TRUE(all.get("action").equal(some.get("action")));  // the same draws
  EXPECT_FALSE(obs.contains("logits"));
}

// Two GRU cells, each carrying its own state.
constexpr const char* kTwoStates = R"pb(
  name: "test_two_states" version: "1" init_seed: 5
  inputs { key: "observation" shape: [4] }
  inputs { key: "memory/h1" shape: [3] }
  inputs { key: "memory/h2" shape: [5] }
  output_keys: ["action"]
  module { sequential {
    modules { overwrite_keys: ["memory/h1"]
              network { in_keys: ["observation", "memory/h1"] out_keys: ["memory/h1"]
                        network { gru_cell { input_size: 4 hidden_size: 3 } } } }
    modules { overwrite_keys: ["memory/h2"]
              network { in_keys: ["memory/h1", "memory/h2"] out_keys: ["memory/h2"]
                        network { gru_cell { input_size: 3 hidden_size: 5 } } } }
    modules { network { in_keys: ["memory/h2"] out_keys: ["action"]
                        network { linear { in_features: 5 out_features: 2 } } } } } }
)pb";

TEST(ActorTest, StateKeysAreTheSpecsAndComeWholeOrNotAtAll) {
  ASSERT_OK_AND_ASSIGN(auto actor, load(kTwoStates));
  EXPECT_EQ(actor->signature().state_keys, (std::vector<NestedKey>{{"memory", "h1"}, {"memory", "h2"}}));
  EXPECT_EQ(actor->signature().state_keys, policy::state_keys(actor->spec()));
  TensorDict obs = observations(2);
  const TensorDict first = actor->act(obs);
  EXPECT_EQ(first.get({"memory", "h2"}).sizes(), at::IntArrayRef({2, 5}));
  TensorDict partial = obs.clone();
  partial.set({"memory", "h2"}, at::zeros({2, 5}));
  try {
    actor->act(partial);
    ADD_FAILURE() << "a partial state was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("carries the recurrent state memory/h2 but not memory/h1"))
        << error.what();
  }
  TensorDict whole = obs.clone();
  whole.set({"memory", "h1"}, at::zeros({2, 3}));
  whole.set({"memory", "h2"}, at::zeros({2, 5}));
  EXPECT_TRUE(actor->act(whole).get({"memory", "h2"}).allclose(first.get({"memory", "h2"})));
}

TEST(ActorTest, LoadErrorsAreStatuses) {
  auto missing = Actor::load("/nonexistent/policy.pbtxt");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto broken = Actor::load(write_spec("broken", "name: \"x\" module { network { in_keys: [\"nope\"] } }"));
  EXPECT_FALSE(broken.ok());
  EXPECT_NE(std::string(broken.status().message()).find("module.network.in_keys[0]"), std::string::npos)
      << broken.status();
}

// ---- CUDA graphs: what a CPU machine checks (tests/actor/actor_cuda_test.cc runs them on a GPU) ----

TEST(ActorCudaGraphTest, AnEnabledBlockOnACpuActorWarnsOnceAndRunsEagerly) {
  const std::string graphed = std::string(kCategorical) + "cuda_graph { enabled: true batch_buckets: [1, 8] }";
  test_util::LogCapture log;
  ASSERT_OK_AND_ASSIGN(auto with_block, load(graphed.c_str(), ActorOptions().seed(4)));
  EXPECT_THAT(log.text(), ::testing::HasSubstr("cuda_graph is enabled but the actor runs on cpu; calls run eagerly"));
  const std::string warned = log.text();
  ASSERT_OK_AND_ASSIGN(auto without, load(kCategorical, ActorOptions().seed(4)));
  EXPECT_FALSE(with_block->describe().cuda_graph.has_value());
  for (int step = 0; step < 3; ++step) {
    TensorDict a = with_block->act(observations(5, step));
    TensorDict b = without->act(observations(5, step));
    EXPECT_TRUE(at::equal(a.get("action"), b.get("action"))) << "step " << step;
  }
  EXPECT_EQ(log.text(), warned) << "one warning, at load";
  EXPECT_EQ(with_block->describe().captured_graph_count, 0);
}

TEST(ActorCudaGraphTest, BadSettingsAreLoadErrorsNamingTheField) {
  auto unsorted = load(kCategorical, ActorOptions().cuda_graph(CudaGraphOptions().batch_buckets({1, 64, 32})));
  EXPECT_THAT(unsorted.status().message(),
              ::testing::HasSubstr("ActorOptions.cuda_graph.batch_buckets[2]: 32 does not follow 64"));
  auto no_warmup = load(kCategorical, ActorOptions().cuda_graph(CudaGraphOptions().warmup(0)));
  EXPECT_THAT(no_warmup.status().message(), ::testing::HasSubstr("ActorOptions.cuda_graph.warmup: 0 eager calls"));
  auto long_warmup = load(kCategorical, ActorOptions().cuda_graph(CudaGraphOptions().warmup(1000)));
  EXPECT_THAT(long_warmup.status().message(),
              ::testing::HasSubstr("ActorOptions.cuda_graph.warmup: 1000 eager calls before the capture; at most 100"));
  // The spec's block is checked by the validator first, with its field path.
  const std::string bad_block = std::string(kCategorical) + "cuda_graph { enabled: true batch_buckets: [4, 0] }";
  auto from_spec = load(bad_block.c_str());
  EXPECT_THAT(from_spec.status().message(), ::testing::HasSubstr("cuda_graph.batch_buckets[1]: batch size 0 is outside"));
  // Disabled settings are not used, so they are not checked either.
  EXPECT_OK(load(kCategorical, ActorOptions().cuda_graph(CudaGraphOptions().enabled(false).warmup(0))).status());
}

// ---- ActorOptions::backend (the fused CPU plan, sdk/fused; its numerics are tests/fused) ----

TEST(ActorBackendTest, AutoIsTheDefaultAndUsesTheFusedPlanUpToFusedMaxBatch) {
  EXPECT_EQ(ActorOptions().backend(), Backend::kAuto);
  EXPECT_EQ(ActorOptions().fused_max_batch(), 16384);
  ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical, ActorOptions().fused_max_batch(8)));
  ASSERT_OK(actor->describe().fused_status);
  EXPECT_TRUE(actor->describe().runs_fused(8, InteractionType::kRandom));
  EXPECT_FALSE(actor->describe().runs_fused(9, InteractionType::kRandom));
  ASSERT_OK_AND_ASSIGN(auto libtorch, load(kCategorical, ActorOptions().backend(Backend::kLibTorch)));
  EXPECT_FALSE(libtorch->describe().fused_status.ok());
  EXPECT_FALSE(libtorch->describe().runs_fused(1, InteractionType::kRandom));
  EXPECT_EQ(libtorch->act_flat(nullptr, 0, nullptr).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ActorBackendTest, EveryBackendReturnsTheSameKeysShapesAndDtypes) {
  for (InteractionType type : {InteractionType::kRandom, InteractionType::kDeterministic}) {
    TensorDict obs = observations(5);
    std::vector<TensorDict> outs;
    for (Backend backend : {Backend::kAuto, Backend::kLibTorch, Backend::kFused}) {
      ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical, ActorOptions().backend(backend)));
      outs.push_back(actor->act(obs, type));
    }
    for (const TensorDict& out : outs) {
      ASSERT_EQ(out.keys(), outs[1].keys());
      for (const auto& key : out.keys()) {
        EXPECT_EQ(out.get(key).sizes(), outs[1].get(key).sizes()) << key.to_string();
        EXPECT_EQ(out.get(key).scalar_type(), outs[1].get(key).scalar_type()) << key.to_string();
      }
    }
    if (type == InteractionType::kDeterministic) {
      EXPECT_TRUE(outs[0].get("action").equal(outs[1].get("action")));
    }
  }
}

// The fused backend makes its output tensors with its own allocator (malloc, aligned by hand):
// they are ordinary CPU tensors, 64-byte aligned like LibTorch's, that grow, convert and outlive
// the actor.
TEST(ActorBackendTest, FusedOutputsAreOrdinaryAlignedCpuTensorsThatOutliveTheActor) {
  TensorDict obs = observations(3);
  TensorDict out;
  {
    ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical, ActorOptions().backend(Backend::kFused)));
    out = actor->act(obs, InteractionType::kDeterministic);
  }
  ASSERT_OK_AND_ASSIGN(auto reference, load(kCategorical, ActorOptions().backend(Backend::kLibTorch)));
  const TensorDict expected = reference->act(obs, InteractionType::kDeterministic);
  for (const auto& key : out.keys()) {
    at::Tensor value = out.get(key);
    SCOPED_TRACE(key.to_string());
    EXPECT_TRUE(value.device().is_cpu());
    EXPECT_TRUE(value.is_contiguous());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(value.data_ptr()) % 64, 0u);
    EXPECT_TRUE(at::allclose(value.to(at::kDouble), expected.get(key).to(at::kDouble), 1e-5, 1e-6));
    // Growing the storage (the allocator is asked again) keeps the values. The outputs are
    // inference tensors, as LibTorch's are under the actor's InferenceMode.
    const at::Tensor before = value.clone();
    c10::InferenceMode inference;
    value.resize_({1000});
    EXPECT_TRUE(value.slice(0, 0, before.numel()).equal(before.flatten()));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(value.data_ptr()) % 64, 0u);
  }
}

TEST(ActorBackendTest, FusedOnAPolicyThatDoesNotLowerIsALoadError) {
  auto actor = Actor::load("policies/goal_autoregressive.pbtxt", ActorOptions().backend(Backend::kFused));
  ASSERT_FALSE(actor.ok());
  EXPECT_THAT(std::string(actor.status().message()),
              testing::HasSubstr("backend kFused: not lowerable to the fused CPU plan: "
                                 "module.probabilistic_sequential.modules[2]"));
  ASSERT_OK_AND_ASSIGN(auto fallback, Actor::load("policies/goal_autoregressive.pbtxt"));  // kAuto: LibTorch
  EXPECT_FALSE(fallback->describe().runs_fused(1, InteractionType::kRandom));
}

TEST(ActorBackendTest, RefreshParametersMakesTheFusedPlanSeeAnInPlaceUpdate) {
  ASSERT_OK_AND_ASSIGN(auto loaded, load(kCategorical, ActorOptions().backend(Backend::kFused)));
  // Two actors over one module, as a trainer holds them: the fused one keeps a copy of the weights.
  policy::Policy policy{loaded->spec(), loaded->module()};
  Actor fused(policy, ActorOptions().backend(Backend::kFused));
  Actor libtorch(policy, ActorOptions().backend(Backend::kLibTorch));
  const TensorDict obs = observations(7);
  auto same = [&] {
    const TensorDict a = fused.act(obs, InteractionType::kDeterministic);
    const TensorDict b = libtorch.act(obs, InteractionType::kDeterministic);
    return a.get("action").equal(b.get("action")) &&
           at::allclose(a.get("action_log_prob"), b.get("action_log_prob"), 1e-5, 1e-5);
  };
  ASSERT_TRUE(same());
  {
    at::NoGradGuard no_grad;  // an optimizer step: every parameter changed in place
    for (at::Tensor p : policy.module->parameters()) p.mul_(-3.0).add_(0.25);
  }
  EXPECT_FALSE(same()) << "the fused plan should still run the weights it lowered";
  ASSERT_OK(fused.refresh_parameters());
  EXPECT_TRUE(same());
  ASSERT_OK_AND_ASSIGN(auto plain, load(kCategorical, ActorOptions().backend(Backend::kLibTorch)));
  EXPECT_OK(plain->refresh_parameters());  // no plan: nothing to do

  // The plan is lowered again under the actor's aggregation mode, not the calling thread's (a
  // composite head's log-prob keys depend on it).
  ASSERT_OK_AND_ASSIGN(auto aggregated,
                       Actor::load("policies/goal_hybrid.pbtxt",
                                   ActorOptions().backend(Backend::kFused).composite_lp_aggregate(true)));
  const auto keys_before = aggregated->act(obs, InteractionType::kDeterministic).keys();
  ASSERT_TRUE(aggregated->act(obs, InteractionType::kDeterministic).contains("sample_log_prob"));
  nn::CompositeLpAggregateGuard other_mode(false, /*thread_local_only=*/true);
  ASSERT_OK(aggregated->refresh_parameters());
  EXPECT_EQ(aggregated->act(obs, InteractionType::kDeterministic).keys(), keys_before);
}

TEST(ActorBackendTest, RefreshWhileOtherThreadsActGivesTheOldOrTheNewWeightsNeverAMix) {
  ASSERT_OK_AND_ASSIGN(auto loaded, load(kCategorical, ActorOptions().backend(Backend::kFused)));
  policy::Policy policy{loaded->spec(), loaded->module()};
  Actor fused(policy, ActorOptions().backend(Backend::kFused));
  const TensorDict obs = observations(3);
  // Two weight sets, A (as loaded) and B, and the exact answer of each.
  std::vector<at::Tensor> a, b;
  {
    at::NoGradGuard no_grad;
    for (const at::Tensor& p : policy.module->parameters()) {
      a.push_back(p.detach().clone());
      b.push_back(p.detach() * -3.0 + 0.25);
    }
  }
  auto use = [&](const std::vector<at::Tensor>& weights) {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> params = policy.module->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(weights[i]);
  };
  auto answer = [&] { return fused.act(obs, InteractionType::kDeterministic).get("action_log_prob"); };
  const at::Tensor answer_a = answer();
  use(b);
  ASSERT_OK(fused.refresh_parameters());
  const at::Tensor answer_b = answer();
  ASSERT_FALSE(answer_a.equal(answer_b));

  std::atomic<bool> done{false};
  std::atomic<int64_t> mixed{0}, calls{0};
  std::vector<std::thread> actors;
  for (int t = 0; t < 4; ++t) {
    actors.emplace_back([&] {
      while (!done.load()) {
        const at::Tensor got = answer();
        if (!got.equal(answer_a) && !got.equal(answer_b)) ++mixed;
        ++calls;
      }
    });
  }
  // Acting threads read only the plan's own copy of the weights: changing the module's
  // parameters here races nothing but the refresh, which runs on this thread.
  for (int i = 0; i < 300; ++i) {
    use(i % 2 == 0 ? a : b);
    ASSERT_OK(fused.refresh_parameters());
  }
  while (calls.load() < 200) std::this_thread::yield();
  done = true;
  for (std::thread& thread : actors) thread.join();
  EXPECT_EQ(mixed.load(), 0) << "of " << calls.load() << " calls";
}

TEST(ActorTest, SparseAndMetaObservationsGetAShortErrorNamingTheKeyOnEveryBackend) {
  for (Backend backend : {Backend::kAuto, Backend::kLibTorch, Backend::kFused}) {
    SCOPED_TRACE(static_cast<int>(backend));
    ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical, ActorOptions().backend(backend)));
    const std::string sparse = test_util::error_of<std::invalid_argument>(
        [&] { actor->act(TensorDict({{"observation", at::zeros({2, 4}).to_sparse()}}, {2})); });
    EXPECT_THAT(sparse, testing::HasSubstr("input \"observation\" is a Sparse tensor; expected a dense (strided) tensor"));
    EXPECT_LT(sparse.size(), 300u) << "no backtrace";
    const std::string meta = test_util::error_of<std::invalid_argument>([&] {
      actor->act(TensorDict({{"observation", at::empty({2, 4}, at::TensorOptions().device(at::kMeta))}}, {2}));
    });
    EXPECT_THAT(meta, testing::HasSubstr("input \"observation\" is on the meta device"));
    EXPECT_LT(meta.size(), 300u) << "no backtrace";
  }
  auto meta_actor = load(kCategorical, ActorOptions().device(at::Device(at::kMeta)));
  ASSERT_FALSE(meta_actor.ok());
  EXPECT_THAT(std::string(meta_actor.status().message()),
              testing::HasSubstr("device meta requested; an actor runs on the cpu or a cuda device"));
  EXPECT_LT(meta_actor.status().message().size(), 300u);
}

TEST(ActorTest, NonFiniteObservationsAreAnErrorNamingTheKeyAndRowOnEveryBackend) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (Backend backend : {Backend::kAuto, Backend::kLibTorch, Backend::kFused}) {
    SCOPED_TRACE(static_cast<int>(backend));
    ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical, ActorOptions().backend(backend)));
    for (float bad : {nan, inf, -inf}) {
      for (int64_t batch : {1, 5, 100}) {
        at::Tensor obs = at::zeros({batch, 4});
        obs[batch - 1][2] = bad;
        const std::string message = test_util::error_of<std::invalid_argument>(
            [&] { actor->act(TensorDict({{"observation", obs}}, {batch})); });
        EXPECT_THAT(message, testing::HasSubstr(absl::StrCat("Actor.act: input \"observation\" has ",
                                                             std::isnan(bad) ? "nan" : (bad > 0 ? "inf" : "-inf"),
                                                             " in row ", batch - 1)));
        // A non-contiguous view goes through LibTorch's isfinite: the same rule.
        EXPECT_THROW(actor->act(TensorDict({{"observation", obs.t().contiguous().t()}}, {batch})),
                     std::invalid_argument);
      }
    }
    // The flat API, where the policy has a plan.
    if (backend != Backend::kLibTorch) {
      std::vector<float> flat(2 * 4, 0.0f);
      flat[6] = nan;
      std::vector<float> action(2);
      const absl::Status status = actor->act_flat(flat.data(), 2, action.data());
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(status.message()), testing::HasSubstr("input \"observation\" has nan in row 1"));
    }
    // check_finite(false): no check (what the policy gives is then the backend's business).
    ASSERT_OK_AND_ASSIGN(auto unchecked, load(kCategorical, ActorOptions().backend(backend).check_finite(false)));
    EXPECT_NO_THROW(unchecked->act(TensorDict({{"observation", at::full({2, 4}, inf)}}, {2}),
                                   InteractionType::kDeterministic));
  }
}


constexpr const char* kLayerNormRelu = R"pb(
  name: "layer_norm_relu" init_seed: 4
  inputs { key: "observation" shape: [5] }
  output_keys: ["action", "action_log_prob"]
  module { probabilistic_sequential {
    modules { network { in_keys: ["observation"] out_keys: ["logits"]
              network { mlp { in_features: 5 hidden_sizes: [16, 8] out_features: 3 activation: "relu"
                              layer_norm: true } } } }
    modules { probabilistic { in_keys: ["logits"] out_keys: ["action"] distribution: "categorical"
                              return_log_prob: true log_prob_key: "action_log_prob" } } } }
)pb";

TEST(ExtremeInputs, ValuesBeyondTheLargestInputAreAnErrorNamingTheKeyAndRowOnEveryBackend) {
  for (Backend backend : {Backend::kAuto, Backend::kLibTorch, Backend::kFused}) {
    SCOPED_TRACE(static_cast<int>(backend));
    ASSERT_OK_AND_ASSIGN(auto actor, load(kRecurrent, ActorOptions().backend(backend)));
    for (float bad : {kLargestInput * 1.001f, -1e30f, std::numeric_limits<float>::max()}) {
      for (const char* key : {"observation", "hidden"}) {
        TensorDict td({{"observation", at::zeros({3, 4})}, {"hidden", at::zeros({3, 8})}}, {3});
        td.get(key)[1][2] = bad;
        const std::string message = test_util::error_of<std::invalid_argument>([&] { actor->act(td); });
        EXPECT_THAT(message, testing::HasSubstr(absl::StrCat("Actor.act: input \"", key, "\" has ", bad, " in row 1")));
        EXPECT_THAT(message, testing::HasSubstr("expected finite values within +-1e+18"));
        // A non-contiguous view goes through LibTorch's abs(): the same rule.
        TensorDict strided({{"observation", td.get("observation").t().contiguous().t()},
                            {"hidden", td.get("hidden").t().contiguous().t()}},
                           {3});
        EXPECT_THROW(actor->act(strided), std::invalid_argument);
      }
    }
    // Up to the limit itself inputs are taken.
    EXPECT_NO_THROW(actor->act(TensorDict({{"observation", at::full({2, 4}, kLargestInput)},
                                           {"hidden", at::full({2, 8}, -kLargestInput)}},
                                          {2})));
  }
  ASSERT_OK_AND_ASSIGN(auto flat, load(kCategorical, ActorOptions().backend(Backend::kFused)));
  std::vector<float> obs(2 * 4, 0.0f), action(2);
  obs[5] = -3e20f;
  const absl::Status status = flat->act_flat(obs.data(), 2, action.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), testing::HasSubstr("input \"observation\" has -3e+20 in row 1"));
}

// The check reads a large observation in blocks: whichever block, and whatever follows, the
// error names the first bad element.
TEST(ExtremeInputs, TheFirstBadValueIsNamedWhereverItIs) {
  ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical, ActorOptions().backend(Backend::kFused)));
  constexpr int64_t kRows = 50;  // 200 floats: three blocks of 64 and 8 more
  for (int64_t first : {0, 5, 63, 64, 130, 191, 192, 199}) {
    SCOPED_TRACE(first);
    std::vector<float> obs(kRows * 4, 0.5f), action(kRows);
    obs[first] = std::numeric_limits<float>::quiet_NaN();
    if (first + 1 < kRows * 4) obs[kRows * 4 - 1] = std::numeric_limits<float>::infinity();
    const std::string want = absl::StrCat("has nan in row ", first / 4, " (element ", first, ")");
    const absl::Status status = actor->act_flat(obs.data(), kRows, action.data());
    EXPECT_THAT(std::string(status.message()), testing::HasSubstr(want));
    const TensorDict td({{"observation", at::from_blob(obs.data(), {kRows, 4}).clone()}}, {kRows});
    EXPECT_THAT(test_util::error_of<std::invalid_argument>([&] { actor->act(td); }), testing::HasSubstr(want));
  }
}

// A TensorDict where an input goes is named as that input missing, on every backend and with
// the finiteness check on or off.
TEST(ExtremeInputs, ATensorDictWhereAnInputGoesIsNamed) {
  for (Backend backend : {Backend::kAuto, Backend::kLibTorch, Backend::kFused}) {
    for (bool check : {true, false}) {
      SCOPED_TRACE(absl::StrCat(static_cast<int>(backend), " ", check));
      ASSERT_OK_AND_ASSIGN(auto actor, load(kCategorical, ActorOptions().backend(backend).check_finite(check)));
      TensorDict td({}, {2});
      td.set("observation", TensorDict({{"x", at::zeros({2, 4})}}, {2}));
      EXPECT_THAT(test_util::error_of<std::invalid_argument>([&] { actor->act(td); }),
                  testing::HasSubstr("input \"observation\" is missing"));
      TensorDict out;
      EXPECT_THAT(test_util::error_of<std::invalid_argument>([&] { actor->act_into(td, out); }),
                  testing::HasSubstr("input \"observation\" is missing"));
    }
  }
}

TEST(ExtremeInputs, EveryBackendGivesTheSameOutputsUpToTheLargestInput) {
  // Rows mixing +-kLargestInput with ordinary values: the first Linear's outputs reach ~1e18 and
  // the LayerNorm's and the GRU's arithmetic runs near float32's range without overflowing.
  for (const char* text : {kRecurrent, kLayerNormRelu}) {
    ASSERT_OK_AND_ASSIGN(auto fused, load(text, ActorOptions().backend(Backend::kFused)));
    ASSERT_OK_AND_ASSIGN(auto libtorch, load(text, ActorOptions().backend(Backend::kLibTorch)));
    const auto& inputs = libtorch->signature().inputs;
    TensorDict td({}, {6});
    int64_t salt = 0;
    for (const auto& input : inputs) {
      at::Tensor x = at::randn({6, input.shape[0]}, at::detail::createCPUGenerator(++salt));
      for (int64_t row = 0; row < 6; ++row) x[row][row % input.shape[0]] = row % 2 == 0 ? kLargestInput : -kLargestInput;
      x[5].fill_(kLargestInput);
      td.set(input.key, x);
    }
    const TensorDict a = fused->act(td, InteractionType::kDeterministic);
    const TensorDict b = libtorch->act(td, InteractionType::kDeterministic);
    for (const auto& key : b.keys()) {
      const at::Tensor x = a.get(key).to(at::kFloat), y = b.get(key).to(at::kFloat);
      EXPECT_TRUE(at::isfinite(y).all().item<bool>()) << key.to_string() << ": " << y;
      EXPECT_TRUE(at::allclose(x, y, 1e-5, 1e-5)) << key.to_string() << ": fused " << x << " LibTorch " << y;
    }
  }
}

}  // namespace
}  // namespace tdp::actor
