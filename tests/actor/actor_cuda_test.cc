// Actor on a CUDA device: the same policies, keys and numbers as on the CPU. These tests run where
// a GPU is visible, in binaries built with --config=cuda (tests/gpu/ runs them on the GPU
// machine); elsewhere each one that needs a GPU skips and says why, and CI compiles and links
// them under --config=cuda. The first test needs no GPU: it checks what a CPU-only machine is told.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#if TDP_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/policy/keys.h"
#include "tdpolicy/spec.pb.h"
#include "tests/testing/files.h"
#include "tests/testing/gpu.h"
#include "tests/testing/status_matchers.h"

namespace tdp::actor {
namespace {

using nn::InteractionType;
using ::testing::HasSubstr;

const c10::Device kCuda("cuda:0");

// The actor of policies/`policy`, or the loader's Status.
absl::StatusOr<std::unique_ptr<Actor>> load(const std::string& policy, ActorOptions options) {
  return Actor::load(test_util::runfile("policies/" + policy), options);
}

// A batch of observations for the actor's declared float inputs (recurrent state excluded).
TensorDict observations(const Actor& actor, int64_t n, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  TensorDict td({n});
  for (const auto& input : actor.spec().inputs()) {
    const auto parsed = policy::parse_key(input.key());
    EXPECT_OK(parsed);
    if (!parsed.ok()) continue;
    const NestedKey& key = *parsed;
    if (std::find(actor.signature().state_keys.begin(), actor.signature().state_keys.end(), key) != actor.signature().state_keys.end()) continue;
    std::vector<int64_t> shape = {n};
    shape.insert(shape.end(), input.shape().begin(), input.shape().end());
    td.set(key, at::randn(shape, generator));
  }
  return td;
}

// Memory the caching allocator holds on cuda:0 after returning what it can to the driver.
int64_t cuda_reserved_bytes() {
#if TDP_WITH_CUDA
  c10::cuda::CUDACachingAllocator::emptyCache();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
#else
  return 0;
#endif
}

// The same leaves (in any order), `cuda`'s on the GPU, equal to `tolerance`.
void expect_same_entries(const TensorDict& cpu, const TensorDict& cuda, double tolerance) {
  const auto sorted_leaves = [](const TensorDict& td) {
    std::vector<std::string> keys;
    for (const NestedKey& key : td.keys(/*include_nested=*/true, /*leaves_only=*/true)) keys.push_back(key.to_string());
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  ASSERT_EQ(sorted_leaves(cpu), sorted_leaves(cuda));
  for (const NestedKey& key : cpu.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    const at::Tensor on_gpu = cuda.get(key);
    EXPECT_TRUE(on_gpu.is_cuda()) << key.to_string();
    const at::Tensor expected = cpu.get(key);
    const at::Tensor actual = on_gpu.cpu();
    ASSERT_EQ(expected.sizes(), actual.sizes()) << key.to_string();
    ASSERT_EQ(expected.scalar_type(), actual.scalar_type()) << key.to_string();
    if (expected.is_floating_point()) {
      EXPECT_TRUE(at::allclose(expected, actual, tolerance, tolerance)) << key.to_string();
    } else {
      EXPECT_TRUE(at::equal(expected, actual)) << key.to_string();
    }
  }
}

TEST(ActorCudaTest, ACudaDeviceWithoutAGpuIsALoadErrorNamingTheDevice) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible here";
  auto actor = Actor::load(test_util::runfile("policies/cartpole_categorical.pbtxt"), ActorOptions().device(kCuda));
  ASSERT_FALSE(actor.ok());
  EXPECT_THAT(std::string(actor.status().message()), HasSubstr("cuda:0"));
}

TEST(ActorCudaTest, DeterministicActionsEqualTheCpuActorsForEveryReadyPolicy) {
  SKIP_WITHOUT_GPU();
  for (const char* policy : {"cartpole_categorical.pbtxt", "pendulum_tanh_gaussian.pbtxt", "goal_hybrid.pbtxt",
                             "recurrent_gru.pbtxt"}) {
    SCOPED_TRACE(policy);
    ASSERT_OK_AND_ASSIGN(auto cpu, load(policy, ActorOptions()));
    ASSERT_OK_AND_ASSIGN(auto gpu, load(policy, ActorOptions().device(kCuda)));
    for (int64_t n : {1, 7, 256}) {
      const TensorDict obs = observations(*cpu, n, /*seed=*/n);
      expect_same_entries(cpu->act(obs, InteractionType::kDeterministic),
                          gpu->act(obs, InteractionType::kDeterministic), 1e-5);
    }
  }
}

TEST(ActorCudaTest, SeededRandomActionsRepeatAndDiffer) {
  SKIP_WITHOUT_GPU();
  ASSERT_OK_AND_ASSIGN(auto first, load("pendulum_tanh_gaussian.pbtxt", ActorOptions().device(kCuda).seed(11)));
  ASSERT_OK_AND_ASSIGN(auto second, load("pendulum_tanh_gaussian.pbtxt", ActorOptions().device(kCuda).seed(11)));
  const TensorDict obs = observations(*first, 64, 0);
  const at::Tensor a = first->act(obs).get("action");
  const at::Tensor b = first->act(obs).get("action");
  EXPECT_TRUE(a.is_cuda());
  EXPECT_FALSE(at::equal(a, b)) << "consecutive random calls drew the same actions";
  EXPECT_TRUE(at::equal(a, second->act(obs).get("action"))) << "the same seed must give the same sequence";
  EXPECT_TRUE(at::equal(b, second->act(obs).get("action")));
}

TEST(ActorCudaTest, RecurrentStateIsKeptOnTheDeviceAndResetPerEnvironment) {
  SKIP_WITHOUT_GPU();
  ASSERT_OK_AND_ASSIGN(auto cpu, load("recurrent_gru.pbtxt", ActorOptions()));
  ASSERT_OK_AND_ASSIGN(auto gpu, load("recurrent_gru.pbtxt", ActorOptions().device(kCuda)));
  const at::Tensor mask = at::tensor({1, 0, 1, 0}).to(at::kBool);
  for (int step = 0; step < 3; ++step) {
    const TensorDict obs = observations(*cpu, 4, step);
    expect_same_entries(cpu->act(obs, InteractionType::kDeterministic),
                        gpu->act(obs, InteractionType::kDeterministic), 1e-5);
    cpu->reset(mask);
    gpu->reset(mask);
  }
}

// ---- CUDA graphs (ActorOptions::cuda_graph) ----

const std::vector<int64_t> kBuckets = {1, 8, 64};

ActorOptions graphed(uint64_t seed = 0) {
  return ActorOptions().device(kCuda).seed(seed).cuda_graph(CudaGraphOptions().batch_buckets(kBuckets));
}

TEST(ActorCudaGraphTest, ReplaysEqualEagerCallsForEveryReadyPolicyAtEveryBucketPaddedAndChunked) {
  SKIP_WITHOUT_GPU();
  // MODE where the distributions have one (a TanhNormal has none: DETERMINISTIC is its action).
  const std::vector<InteractionType> with_mode = {InteractionType::kDeterministic, InteractionType::kMode};
  const std::vector<std::pair<const char*, std::vector<InteractionType>>> policies = {
      {"cartpole_categorical.pbtxt", with_mode},
      {"pendulum_tanh_gaussian.pbtxt", {InteractionType::kDeterministic}},
      {"goal_hybrid.pbtxt", with_mode},
      {"recurrent_gru.pbtxt", with_mode}};
  for (const auto& [policy, types] : policies) {
    SCOPED_TRACE(policy);
    ASSERT_OK_AND_ASSIGN(auto eager, load(policy, ActorOptions().device(kCuda)));
    ASSERT_OK_AND_ASSIGN(auto graph, load(policy, graphed()));
    ASSERT_TRUE(graph->describe().cuda_graph.has_value());
    EXPECT_EQ(graph->describe().captured_graph_count, static_cast<int64_t>(kBuckets.size())) << "captured at load";
    for (InteractionType type : types) {
      // Exactly a bucket, padded (5 -> 8, 9 -> 64) and chunked (100 = 64 + 36 -> 64, 130 = 64 + 64 + 2 -> 8).
      for (int64_t n : {1, 5, 8, 9, 64, 100, 130}) {
        SCOPED_TRACE(n);
        const TensorDict obs = observations(*eager, n, /*seed=*/n);
        expect_same_entries(eager->act(obs, type).to(c10::kCPU), graph->act(obs, type), 1e-6);
      }
    }
  }
}

// Every entry an eager call writes comes back from a graph too, including those a module writes
// without declaring them (a composite's per-part log-probs under aggregation).
TEST(ActorCudaGraphTest, ReplaysReturnEveryEntryAnEagerCallReturns) {
  SKIP_WITHOUT_GPU();
  for (bool aggregate : {false, true}) {
    SCOPED_TRACE(aggregate);
    const ActorOptions options = ActorOptions().return_all_entries(true).composite_lp_aggregate(aggregate);
    ASSERT_OK_AND_ASSIGN(auto eager, load("goal_hybrid.pbtxt", ActorOptions(options).device(kCuda)));
    ASSERT_OK_AND_ASSIGN(auto graph, load("goal_hybrid.pbtxt", ActorOptions(options).device(kCuda).cuda_graph(
                                                                   CudaGraphOptions().batch_buckets(kBuckets))));
    const TensorDict obs = observations(*eager, 5, 0);
    expect_same_entries(eager->act(obs, InteractionType::kDeterministic).to(c10::kCPU),
                        graph->act(obs, InteractionType::kDeterministic), 1e-6);
  }
}

TEST(ActorCudaGraphTest, RandomReplaysDrawFreshSamplesFromTheRightDistribution) {
  SKIP_WITHOUT_GPU();
  // CartPole: P(action = 1) from the policy's own logits, against 1e5 replayed draws.
  ASSERT_OK_AND_ASSIGN(auto graph, load("cartpole_categorical.pbtxt", graphed(3)));
  ASSERT_OK_AND_ASSIGN(auto logits_of, load("cartpole_categorical.pbtxt", ActorOptions().return_all_entries(true)));
  TensorDict one = observations(*logits_of, 1, 0);
  const at::Tensor p1 = at::softmax(logits_of->act(one, InteractionType::kDeterministic).get("logits"), -1)[0][1];
  TensorDict obs({{"observation", one.get("observation").expand({64, 4}).contiguous()}}, {64});
  at::Tensor previous;
  double ones = 0;
  const int calls = 1563;  // 1563 * 64 ≈ 1e5 draws
  int repeats = 0;
  for (int call = 0; call < calls; ++call) {
    const at::Tensor action = graph->act(obs, InteractionType::kRandom).get("action").cpu();
    if (previous.defined() && at::equal(previous, action)) ++repeats;
    ones += action.sum().item<double>();
    previous = action;
  }
  const double n = calls * 64.0;
  const double p = p1.item<double>();
  EXPECT_NEAR(ones / n, p, 5 * std::sqrt(p * (1 - p) / n)) << "P(action = 1) = " << p;
  EXPECT_LT(repeats, calls / 10) << "consecutive replays drew the same 64 actions";
}

TEST(ActorCudaGraphTest, TanhGaussianReplaysMatchEagerMomentsAndSeedsRepeat) {
  SKIP_WITHOUT_GPU();
  ASSERT_OK_AND_ASSIGN(auto graph, load("pendulum_tanh_gaussian.pbtxt", graphed(5)));
  ASSERT_OK_AND_ASSIGN(auto eager, load("pendulum_tanh_gaussian.pbtxt", ActorOptions().device(kCuda).seed(6)));
  const TensorDict one = observations(*eager, 1, 0);
  const int64_t rows = 1024;
  TensorDict obs({{"observation", one.get("observation").expand({rows, one.get("observation").size(1)}).contiguous()}},
                 {rows});
  std::vector<at::Tensor> from_graph, from_eager;
  for (int call = 0; call < 98; ++call) {  // 98 * 1024 ≈ 1e5 draws each; 1024 = 16 chunks of 64
    from_graph.push_back(graph->act(obs, InteractionType::kRandom).get("action").cpu());
    from_eager.push_back(eager->act(obs, InteractionType::kRandom).get("action").cpu());
  }
  const at::Tensor g = at::cat(from_graph), e = at::cat(from_eager);
  EXPECT_NEAR(g.mean().item<double>(), e.mean().item<double>(), 0.02);
  EXPECT_NEAR(g.std().item<double>(), e.std().item<double>(), 0.02);
  EXPECT_FALSE(at::equal(from_graph[0], from_graph[1]));
  // Another actor with the same seed replays the same sequence.
  ASSERT_OK_AND_ASSIGN(auto again, load("pendulum_tanh_gaussian.pbtxt", graphed(5)));
  for (int call = 0; call < 3; ++call) {
    EXPECT_TRUE(at::equal(again->act(obs, InteractionType::kRandom).get("action").cpu(), from_graph[call]))
        << "call " << call;
  }
}

TEST(ActorCudaGraphTest, RecurrentStateCarriesAcrossReplaysAndResetsPerEnvironment) {
  SKIP_WITHOUT_GPU();
  ASSERT_OK_AND_ASSIGN(auto eager, load("recurrent_gru.pbtxt", ActorOptions().device(kCuda)));
  ASSERT_OK_AND_ASSIGN(auto graph, load("recurrent_gru.pbtxt", graphed()));
  const at::Tensor mask = at::tensor({1, 0, 1, 0, 0}).to(at::kBool);
  for (int step = 0; step < 6; ++step) {
    SCOPED_TRACE(step);
    const TensorDict obs = observations(*eager, 5, step);  // padded to 8: the padding must not leak
    expect_same_entries(eager->act(obs, InteractionType::kDeterministic).to(c10::kCPU),
                        graph->act(obs, InteractionType::kDeterministic), 1e-6);
    if (step % 2 == 1) {
      eager->reset(mask);
      graph->reset(mask);
    }
  }
}

TEST(ActorCudaGraphTest, TwoThreadsActOnOneGraphedActor) {
  SKIP_WITHOUT_GPU();
  ASSERT_OK_AND_ASSIGN(auto eager, load("pendulum_tanh_gaussian.pbtxt", ActorOptions().device(kCuda)));
  ASSERT_OK_AND_ASSIGN(auto graph, load("pendulum_tanh_gaussian.pbtxt", graphed()));
  std::vector<std::vector<TensorDict>> got(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int call = 0; call < 50; ++call) {
        got[t].push_back(graph->act(observations(*eager, 7 + 50 * t, 100 * t + call), InteractionType::kDeterministic));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 2; ++t) {
    for (int call = 0; call < 50; ++call) {
      expect_same_entries(
          eager->act(observations(*eager, 7 + 50 * t, 100 * t + call), InteractionType::kDeterministic).to(c10::kCPU),
          got[t][call], 1e-6);
    }
  }
}

TEST(ActorCudaGraphTest, OtherInteractionTypesAreCapturedOnFirstUseAndDestroyingFreesTheGraphs) {
  SKIP_WITHOUT_GPU();
  const int64_t before = cuda_reserved_bytes();
  {
    ASSERT_OK_AND_ASSIGN(auto graph, load("cartpole_categorical.pbtxt", graphed()));
    EXPECT_EQ(graph->describe().captured_graph_count, 3);
    graph->act(observations(*graph, 5, 0), InteractionType::kDeterministic);
    EXPECT_EQ(graph->describe().captured_graph_count, 4) << "(8, DETERMINISTIC) captured on its first call";
    ASSERT_OK_AND_ASSIGN(auto lazy, load("cartpole_categorical.pbtxt",
                                         ActorOptions().device(kCuda).cuda_graph(
                                             CudaGraphOptions().batch_buckets(kBuckets).capture_at_load(false))));
    EXPECT_EQ(lazy->describe().captured_graph_count, 0);
    lazy->act(observations(*lazy, 64, 0));
    EXPECT_EQ(lazy->describe().captured_graph_count, 1);
  }
  EXPECT_LE(cuda_reserved_bytes(), before + (4 << 20)) << "graph pools were not released";
}

}  // namespace
}  // namespace tdp::actor
