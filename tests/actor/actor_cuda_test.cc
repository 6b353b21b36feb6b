// Actor on a CUDA device: the same policies, keys and numbers as on the CPU. These tests run where
// a GPU is visible, in binaries built with --config=cuda (tests/gpu/ runs them on the GPU
// machine); elsewhere each one that needs a GPU skips and says why, and CI compiles and links
// them under --config=cuda. The first test needs no GPU: it checks what a CPU-only machine is told.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/spec/keys.h"
#include "tdpolicy/spec.pb.h"
#include "tests/testing/files.h"
#include "tests/testing/status_matchers.h"

namespace tdp::actor {
namespace {

using nn::InteractionType;
using ::testing::HasSubstr;

const c10::Device kCuda("cuda:0");

#define SKIP_WITHOUT_GPU()                                                                  \
  if (!torch::cuda::is_available()) {                                                       \
    GTEST_SKIP() << "needs a visible CUDA GPU and a binary built with --config=cuda";       \
  }

// The actor of policies/`policy`, or the loader's Status.
absl::StatusOr<std::unique_ptr<Actor>> load(const std::string& policy, ActorOptions options) {
  return Actor::load(test_util::runfile("policies/" + policy), options);
}

// A batch of observations for the actor's declared float inputs (recurrent state excluded).
TensorDict observations(const Actor& actor, int64_t n, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  TensorDict td({n});
  for (const auto& input : actor.spec().inputs()) {
    const auto parsed = spec::parse_key(input.key());
    EXPECT_OK(parsed);
    if (!parsed.ok()) continue;
    const NestedKey& key = *parsed;
    if (std::find(actor.state_keys().begin(), actor.state_keys().end(), key) != actor.state_keys().end()) continue;
    std::vector<int64_t> shape = {n};
    shape.insert(shape.end(), input.shape().begin(), input.shape().end());
    td.set(key, at::randn(shape, generator));
  }
  return td;
}

void expect_same_entries(const TensorDict& cpu, const TensorDict& cuda, double tolerance) {
  ASSERT_EQ(cpu.keys(), cuda.keys());
  for (const NestedKey& key : cpu.keys()) {
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
  const at::Tensor mask = at::tensor({true, false, true, false});
  for (int step = 0; step < 3; ++step) {
    const TensorDict obs = observations(*cpu, 4, step);
    expect_same_entries(cpu->act(obs, InteractionType::kDeterministic),
                        gpu->act(obs, InteractionType::kDeterministic), 1e-5);
    cpu->reset(mask);
    gpu->reset(mask);
  }
}

}  // namespace
}  // namespace tdp::actor
