// make_env: each known name (in any case) builds that environment with the given options, and
// an unknown name or bad options give InvalidArgument saying what is known or wrong.
#include "samples/envs/make_env.h"

#include <gtest/gtest.h>

#include "tests/testing/status_matchers.h"

namespace tdp::env {
namespace {

TEST(MakeEnv, BuildsEachKnownEnvironmentWhateverTheCase) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"cartpole", "CartPole"}, {"CartPole", "CartPole"}, {"PENDULUM", "Pendulum"}, {"goal", "Goal"},
      {"HalfCheetah-v5", "HalfCheetah-v5"}, {"hopper-v5", "Hopper-v5"}, {"Walker2d-v5", "Walker2d-v5"},
      {"ANT-V5", "Ant-v5"}};
  for (const auto& [name, expected] : cases) {
    auto env = make_env(name, EnvOptions(3).max_episode_steps(7));
    ASSERT_OK(env) << name;
    EXPECT_EQ((*env)->name(), expected);
    EXPECT_EQ((*env)->num_envs(), 3);
    EXPECT_EQ((*env)->max_episode_steps(), 7);
  }
}

TEST(MakeEnv, UnknownNameListsTheKnownOnes) {
  auto env = make_env("mountaincar", EnvOptions(1));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env.status().message(),
            "unknown environment \"mountaincar\"; known: ant-v5, cartpole, goal, halfcheetah-v5, hopper-v5, "
            "humanoid-v5, pendulum, walker2d-v5");
}

TEST(MakeEnv, BadOptionsBecomeAStatusNotAnException) {
  auto env = make_env("goal", EnvOptions(0));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env.status().message(), "environment \"goal\": EnvOptions: num_envs must be at least 1, got 0");
}

}  // namespace
}  // namespace tdp::env
