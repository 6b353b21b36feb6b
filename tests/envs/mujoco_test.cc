// The MuJoCo tasks' own rules (samples/envs/mujoco_tasks.h), without Gymnasium: reset noise by
// its distribution, a batch equal to its environments stepped one by one, seeded runs repeating,
// the BatchedEnv contract (auto-reset, final_observation, specs) and the errors. Equality with
// Gymnasium step for step is mujoco_gymnasium_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "samples/envs/make_env.h"
#include "samples/envs/mujoco_tasks.h"
#include "tests/testing/error_of.h"

namespace tdp::env {
namespace {

using ::testing::HasSubstr;

TensorDict random_actions(const MujocoEnv& env, at::Generator& generator) {
  TensorDict td({env.num_envs()});
  td.set("action", at::empty({env.num_envs(), env.nu()}, at::kFloat).uniform_(-1.0, 1.0, generator));
  return td;
}

// Reset noise: qpos - qpos0 ~ U(-s, s) always; qvel ~ s N(0, 1) (HalfCheetah, Ant) or U(-s, s)
// (Hopper, Walker2d). Mean and variance of 2,560 draws per coordinate within 5 standard errors.
template <typename Task>
void expect_reset_noise(double scale, bool normal_qvel) {
  Task env(EnvOptions(64));
  std::vector<at::Tensor> states;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    env.reset(seed);
    states.push_back(env.state());
  }
  const at::Tensor state = at::cat(states);
  const int64_t n = state.size(0);
  const at::Tensor noise = state.narrow(1, 0, env.nq()) - env.init_qpos();
  EXPECT_LE(noise.abs().max().item<double>(), scale);
  EXPECT_GE(noise.abs().max().item<double>(), 0.95 * scale);
  const double uniform_var = scale * scale / 3;
  EXPECT_LE(noise.mean(0).abs().max().item<double>(), 5 * std::sqrt(uniform_var / n));
  EXPECT_NEAR(noise.var(0).mean().item<double>(), uniform_var, 0.1 * uniform_var);
  const at::Tensor qvel = state.narrow(1, env.nq(), env.nv());
  const double qvel_var = normal_qvel ? scale * scale : uniform_var;
  EXPECT_LE(qvel.mean(0).abs().max().item<double>(), 5 * std::sqrt(qvel_var / n));
  EXPECT_NEAR(qvel.var(0).mean().item<double>(), qvel_var, 0.1 * qvel_var);
  if (normal_qvel) {
    EXPECT_GT(qvel.abs().max().item<double>(), 3 * scale);  // a normal's tails, not a uniform's
  } else {
    EXPECT_LE(qvel.abs().max().item<double>(), scale);
  }
}

TEST(MujocoTasks, ResetNoiseFollowsGymnasiumsDistributions) {
  expect_reset_noise<HalfCheetah>(0.1, /*normal_qvel=*/true);
  expect_reset_noise<Hopper>(5e-3, /*normal_qvel=*/false);
  expect_reset_noise<Walker2d>(5e-3, /*normal_qvel=*/false);
  expect_reset_noise<Ant>(0.1, /*normal_qvel=*/true);
  expect_reset_noise<Humanoid>(1e-2, /*normal_qvel=*/false);
}

template <typename Task>
void expect_batch_equals_single_envs() {
  constexpr int64_t kEnvs = 4;
  Task batch(EnvOptions(kEnvs).observation_dtype(at::kDouble));
  batch.reset(/*seed=*/3);
  std::vector<std::unique_ptr<Task>> singles;
  for (int64_t i = 0; i < kEnvs; ++i) {
    singles.push_back(std::make_unique<Task>(EnvOptions(1).observation_dtype(at::kDouble)));
    singles.back()->reset_to(batch.state().narrow(0, i, 1));
  }
  at::Generator generator = at::detail::createCPUGenerator(11);
  for (int step = 0; step < 50; ++step) {
    TensorDict actions = random_actions(batch, generator);
    TensorDict out = batch.step(actions);
    for (int64_t i = 0; i < kEnvs; ++i) {
      TensorDict one({1});
      one.set("action", actions.get("action").narrow(0, i, 1));
      TensorDict single = singles[i]->step(one);
      ASSERT_TRUE(at::equal(single.get("final_observation"), out.get("final_observation").narrow(0, i, 1)))
          << batch.name() << " env " << i << " step " << step;
      ASSERT_TRUE(at::equal(single.get("reward"), out.get("reward").narrow(0, i, 1)));
      ASSERT_TRUE(at::equal(single.get("terminated"), out.get("terminated").narrow(0, i, 1)));
      // Keep the single environments on the batch's states, including its auto-resets.
      singles[i]->reset_to(batch.state().narrow(0, i, 1));
    }
  }
}

TEST(MujocoTasks, ABatchStepsEachEnvironmentAsAloneOnThreads) {
  at::set_num_threads(2);
  expect_batch_equals_single_envs<HalfCheetah>();
  expect_batch_equals_single_envs<Hopper>();
  expect_batch_equals_single_envs<Walker2d>();
  expect_batch_equals_single_envs<Ant>();
  expect_batch_equals_single_envs<Humanoid>();
}

TEST(MujocoTasks, SeededRunsRepeat) {
  auto run = [] {
    Ant env(EnvOptions(3));
    env.reset(/*seed=*/5);
    at::Generator generator = at::detail::createCPUGenerator(2);
    at::Tensor observations;
    for (int step = 0; step < 30; ++step) observations = env.step(random_actions(env, generator)).get("observation");
    return observations;
  };
  EXPECT_TRUE(at::equal(run(), run()));
}

TEST(MujocoTasks, Float32OutputsAreTheFloat64OnesRounded) {
  // Observations and rewards are computed in double and stored in the observation dtype:
  // float32 ones are float64's rounded, through falls and resets (Hopper falls under random
  // actions).
  Hopper single(EnvOptions(3));
  Hopper doubled(EnvOptions(3).observation_dtype(at::kDouble));
  EXPECT_TRUE(at::equal(single.reset(3).get("observation"), doubled.reset(3).get("observation").to(at::kFloat)));
  at::Generator generator = at::detail::createCPUGenerator(8);
  int64_t ended = 0;
  for (int step = 0; step < 200; ++step) {
    const TensorDict actions = random_actions(single, generator);
    const TensorDict a = single.step(actions);
    const TensorDict b = doubled.step(actions);
    for (const char* key : {"observation", "final_observation", "reward"}) {
      ASSERT_EQ(a.get(key).scalar_type(), at::kFloat) << key;
      ASSERT_TRUE(at::equal(a.get(key), b.get(key).to(at::kFloat))) << key << " at step " << step;
    }
    ended += a.get("terminated").sum().item<int64_t>();
  }
  EXPECT_GT(ended, 0);
}

TEST(MujocoTasks, SpecsAndOutputsHaveGymnasiumsShapes) {
  struct Expected {
    std::string name;
    int64_t observation, action;
    double bound = 1.0;  // the actuators' ctrlrange, [-bound, bound], held in float32 as Gymnasium's Box
  };
  for (const Expected& e : {Expected{"HalfCheetah-v5", 17, 6}, Expected{"Hopper-v5", 11, 3},
                            Expected{"Walker2d-v5", 17, 6}, Expected{"Ant-v5", 105, 8},
                            Expected{"Humanoid-v5", 348, 17, 0.4}}) {
    auto made = make_env(e.name, EnvOptions(2));
    ASSERT_TRUE(made.ok()) << made.status();
    BatchedEnv& env = **made;
    EXPECT_EQ(env.name(), e.name);
    EXPECT_EQ(env.max_episode_steps(), 1000);
    EXPECT_EQ(env.observation_spec()[0].shape, std::vector<int64_t>{e.observation});
    EXPECT_EQ(env.observation_spec()[0].dtype, at::kFloat);
    const EntrySpec action = env.action_spec()[0];
    EXPECT_EQ(action.shape, std::vector<int64_t>{e.action});
    EXPECT_EQ(action.low, std::vector<double>(e.action, -static_cast<double>(static_cast<float>(e.bound)))) << e.name;
    EXPECT_EQ(action.high, std::vector<double>(e.action, static_cast<double>(static_cast<float>(e.bound)))) << e.name;
    TensorDict td = env.reset(0);
    EXPECT_EQ(td.get("observation").sizes(), (std::vector<int64_t>{2, e.observation}));
    td.set("action", at::zeros({2, e.action}));
    TensorDict out = env.step(td);
    EXPECT_EQ(out.get("reward").sizes(), (std::vector<int64_t>{2, 1}));
    EXPECT_EQ(out.get("reward").scalar_type(), at::kFloat);
  }
}

TEST(MujocoTasks, AFallenHopperTerminatesAndRestartsWithinTheStep) {
  Hopper env(EnvOptions(1).observation_dtype(at::kDouble));
  env.reset(0);
  // Lying down: z far below 0.7.
  at::Tensor qpos = at::zeros({1, 6});
  qpos[0][1] = 0.2;
  env.reset_to(env.state_from(qpos, at::zeros({1, 6})));
  TensorDict td({1});
  td.set("action", at::zeros({1, 3}));
  TensorDict out = env.step(td);
  EXPECT_TRUE(out.get("terminated").item<bool>());
  EXPECT_FALSE(out.get("truncated").item<bool>());
  // final_observation is where the hopper fell (qpos[1:] first: z); observation the new episode's.
  EXPECT_LT(out.get("final_observation")[0][0].item<double>(), 0.7);
  EXPECT_NEAR(out.get("observation")[0][0].item<double>(), 1.25, 0.01);
  EXPECT_EQ(env.episode_steps()[0].item<int64_t>(), 0);
}

TEST(MujocoTasks, HalfCheetahIsTruncatedAtTheTimeLimit) {
  HalfCheetah env(EnvOptions(2).max_episode_steps(3));
  TensorDict td = env.reset(0);
  td.set("action", at::zeros({2, 6}));
  for (int step = 1; step <= 3; ++step) {
    TensorDict out = env.step(td);
    EXPECT_EQ(out.get("truncated").all().item<bool>(), step == 3);
    EXPECT_FALSE(out.get("terminated").any().item<bool>());
  }
}

TEST(MujocoTasks, BadInputsAreRefusedNamingWhatWasExpected) {
  HalfCheetah env(EnvOptions(2));
  env.reset(0);
  TensorDict td({2});
  td.set("action", at::zeros({2, 5}));
  EXPECT_THAT(test_util::error_of<std::invalid_argument>([&] { env.step(td); }),
              HasSubstr("HalfCheetah-v5.step: action 'action' must be Float of shape [2, 6], got Float of shape [2, 5]"));
  EXPECT_THAT(test_util::error_of<std::invalid_argument>(
                  [&] { env.state_from(at::zeros({2, 8}), at::zeros({2, 9})); }),
              HasSubstr("qpos must be a floating tensor of shape [2, 9]"));
}

TEST(MujocoTasks, AMissingModelDirectoryIsAClearError) {
  ::setenv("TDP_MUJOCO_ASSETS", "/nonexistent/assets", 1);
  auto made = make_env("Ant-v5", EnvOptions(1));
  ::unsetenv("TDP_MUJOCO_ASSETS");
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(made.status().message().find("/nonexistent/assets/ant.xml"), std::string::npos)
      << made.status();
}

}  // namespace
}  // namespace tdp::env
