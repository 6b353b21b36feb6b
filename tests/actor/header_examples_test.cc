// The usage examples at the top of the sdk/actor headers (and the README's "Acting from a
// simulator", sdk/actor/README's act_into loop), compiled and run as written, so that they stay true. Each example sits in a
// function of its own where it returns early on an error; the names it takes from its context
// (env, obs, observation_td, fail, steps) are defined around it.
#include <gtest/gtest.h>

#include <iostream>

#include "samples/envs/cartpole.h"
#include "samples/envs/pendulum.h"
#include "sdk/actor/actor.h"
#include "sdk/actor/cpu_allocator.h"

namespace {

int fail(const absl::Status& status) {
  ADD_FAILURE() << status;
  return 1;
}

// sdk/actor/actor.h
int actor_example(tdp::TensorDict& action, tdp::TensorDict& greedy) {
  tdp::env::CartPole env(tdp::env::EnvOptions(/*num_envs=*/8));
  const tdp::TensorDict obs = env.reset(/*seed=*/1);

  auto actor = tdp::actor::Actor::load("policies/cartpole_categorical.pbtxt",
                                       tdp::actor::ActorOptions().seed(0));
  if (!actor.ok()) return fail(actor.status());
  action = (*actor)->act(env.reset(0));                    // exploring
  greedy = (*actor)->act(obs, tdp::nn::InteractionType::kDeterministic);
  return 0;
}

TEST(HeaderExamplesTest, Actor) {
  tdp::TensorDict action, greedy;
  ASSERT_EQ(actor_example(action, greedy), 0);
  EXPECT_EQ(action.get("action").sizes(), at::IntArrayRef({8}));
  EXPECT_EQ(greedy.get("action").sizes(), at::IntArrayRef({8}));
  EXPECT_TRUE(greedy.contains("action_log_prob"));
}

// sdk/actor/cpu_allocator.h (its main()).
int cpu_allocator_example() {
  tdp::env::Pendulum env(tdp::env::EnvOptions(/*num_envs=*/4));
  const int steps = 5;

  absl::Status tuned = tdp::actor::tune_cpu_allocator();   // once, before the loop
  if (!tuned.ok()) std::cerr << tuned << "\n";               // not glibc: nothing changed
  auto actor = tdp::actor::Actor::load("policies/pendulum_tanh_gaussian.pbtxt");
  tdp::TensorDict obs = env.reset(/*seed=*/0);
  for (int step = 0; step < steps; ++step) obs = env.step((*actor)->act(obs));
  return obs.get("observation").size(0) == 4 ? 0 : 1;
}

TEST(HeaderExamplesTest, CpuAllocator) { EXPECT_EQ(cpu_allocator_example(), 0); }

// sdk/actor/README.md, "Writing into the caller's tensors: act_into"; every step writes the same
// action tensor.
int act_into_example() {
  auto actor = tdp::actor::Actor::load("policies/cartpole_categorical.pbtxt", tdp::actor::ActorOptions().seed(0));
  if (!actor.ok()) return fail(actor.status());
  const void* first = nullptr;

  tdp::env::CartPole env(tdp::env::EnvOptions(/*num_envs=*/16));
  tdp::TensorDict obs = env.reset(/*seed=*/0);
  tdp::TensorDict action;                                // the first call fills it
  for (int step = 0; step < 1000; ++step) {
    (*actor)->act_into(obs, action);                     // action["action"]: the same tensor each step
    obs = env.step(action);
    if (step == 0) first = action.get("action").const_data_ptr();
    if (action.get("action").const_data_ptr() != first) return 1;
  }
  return 0;
}

TEST(HeaderExamplesTest, ActInto) { EXPECT_EQ(act_into_example(), 0); }

// README.md, "Acting from a simulator".
int readme_example() {
  tdp::env::CartPole env(tdp::env::EnvOptions(/*num_envs=*/3));
  const tdp::TensorDict observation_td = env.reset(/*seed=*/2);

  auto actor = tdp::actor::Actor::load("policies/cartpole_categorical.pbtxt",
                                       tdp::actor::ActorOptions().seed(0));   // absl::StatusOr
  if (!actor.ok()) { std::cerr << actor.status() << "\n"; return 1; }
  tdp::TensorDict action = (*actor)->act(observation_td);                        // RANDOM: explore
  tdp::TensorDict greedy = (*actor)->act(observation_td, tdp::nn::InteractionType::kDeterministic);
  return action.get("action").size(0) == 3 && greedy.get("action").size(0) == 3 ? 0 : 1;
}

TEST(HeaderExamplesTest, Readme) { EXPECT_EQ(readme_example(), 0); }

}  // namespace
