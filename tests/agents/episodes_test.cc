// run_episodes: the returns it reports are the episodes' true returns (checked against stepping
// the same environment by hand), each environment contributes its own quota of episodes, steps
// are counted per environment, and a recurrent actor's state is zeroed where episodes end.
#include "samples/agents/episodes.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "samples/envs/cartpole.h"
#include "samples/envs/goal.h"
#include "sdk/actor/actor.h"
#include "tests/testing/error_of.h"
#include "tests/testing/status_matchers.h"

namespace tdp::agents {
namespace {

using env::CartPole;
using env::EnvOptions;
using env::Goal;

TensorDict always_left(const TensorDict& observation) {
  TensorDict action(observation.batch_size().vec());
  action.set("action", at::zeros({observation.batch_size()[0]}, at::kLong));
  return action;
}

// Goal: `shoot[i]` says whether environment i shoots (ending its episode at once) or dribbles
// without moving (its episode runs to the 50-step limit).
ActFn goal_policy(std::vector<int64_t> shoot) {
  return [shoot](const TensorDict& observation) {
    const int64_t n = observation.batch_size()[0];
    TensorDict action(observation.batch_size().vec());
    action.set("action_type", at::tensor(shoot, at::kLong));
    action.set("action_param", at::zeros({n, 1}));
    return action;
  };
}

// Every episode of every environment finished within `batched_steps`, as (step, env, return),
// by stepping `env` by hand with `act`.
std::vector<std::tuple<int64_t, int64_t, double>> episodes_by_hand(env::BatchedEnv& env, const ActFn& act,
                                                                  int64_t batched_steps, uint64_t seed) {
  const int64_t n = env.num_envs();
  std::vector<std::tuple<int64_t, int64_t, double>> finished;
  std::vector<double> running(n, 0.0);
  TensorDict observation = env.reset(seed);
  for (int64_t step = 0; step < batched_steps; ++step) {
    TensorDict out = env.step(act(observation));
    for (int64_t i = 0; i < n; ++i) {
      running[i] += out.get("reward")[i][0].item<float>();
      if (out.get("terminated")[i][0].item<bool>() || out.get("truncated")[i][0].item<bool>()) {
        finished.emplace_back(step, i, running[i]);
        running[i] = 0;
      }
    }
    observation = TensorDict({n});
    observation.set("observation", out.get("observation"));
  }
  return finished;
}

TEST(RunEpisodes, CartPoleAlwaysLeftReturnsMatchSteppingByHand) {
  constexpr int64_t kEnvs = 4, kEpisodes = 10, kSeed = 7;
  CartPole env{EnvOptions(kEnvs)};
  const EpisodeStats stats = run_episodes(env, always_left, kEpisodes, kSeed);

  CartPole by_hand_env{EnvOptions(kEnvs)};
  auto finished = episodes_by_hand(by_hand_env, always_left, stats.env_steps / kEnvs, kSeed);
  // Environment i owns ceil or floor of M/N episodes: 3, 3, 2, 2; keep each one's first ones.
  std::vector<int64_t> quota = {3, 3, 2, 2}, seen(kEnvs, 0);
  std::vector<double> expected;
  for (const auto& [step, env_index, episode_return] : finished) {
    if (seen[env_index]++ < quota[env_index]) expected.push_back(episode_return);
  }
  EXPECT_EQ(stats.returns, expected);
  EXPECT_EQ(stats.returns.size(), kEpisodes);
  // The run stops on the step that completes the last quota, no later.
  EXPECT_EQ(std::get<0>(finished.back()) + 1, stats.env_steps / kEnvs);
  // Always pushing left topples the pole within a few steps, never at the 500-step limit.
  EXPECT_GE(stats.min_return(), 5);
  EXPECT_LE(stats.max_return(), 20);
  EXPECT_DOUBLE_EQ(stats.mean_return(),
                   std::accumulate(expected.begin(), expected.end(), 0.0) / kEpisodes);
}

TEST(RunEpisodes, GoalShootingAtOnceEndsEveryEpisodeInOneStep) {
  constexpr int64_t kEnvs = 4, kEpisodes = 10;
  Goal env{EnvOptions(kEnvs)};
  const ActFn shoot = goal_policy({1, 1, 1, 1});
  const EpisodeStats stats = run_episodes(env, shoot, kEpisodes, /*seed=*/3);
  // Quotas 3, 3, 2, 2: three batched steps.
  EXPECT_EQ(stats.env_steps, 3 * kEnvs);
  ASSERT_EQ(stats.returns.size(), kEpisodes);

  Goal by_hand_env{EnvOptions(kEnvs)};
  auto finished = episodes_by_hand(by_hand_env, shoot, 3, /*seed=*/3);
  ASSERT_EQ(finished.size(), 12u);
  // Completion order: step by step, environments in index order; the third step's envs 2 and 3
  // are past their quota.
  for (size_t k = 0; k < kEpisodes; ++k) EXPECT_EQ(stats.returns[k], std::get<2>(finished[k])) << k;
  for (double r : stats.returns) {
    EXPECT_GE(r, 0.0);
    EXPECT_LE(r, 1.0);
  }
}

TEST(RunEpisodes, EachEnvironmentFillsItsOwnQuotaSoShortEpisodesDoNotCrowdOutLongOnes) {
  // Environment 0 finishes an episode every step, environment 1 every 50 steps. Keeping the
  // first four episodes to finish would report four of environment 0's.
  Goal env{EnvOptions(2)};
  const EpisodeStats stats = run_episodes(env, goal_policy({1, 0}), /*num_episodes=*/4, /*seed=*/0);
  ASSERT_EQ(stats.returns.size(), 4u);
  // Environment 1 needs two 50-step episodes; both environments step together.
  EXPECT_EQ(stats.env_steps, 2 * 100);
  const double dribble_return = 50 * static_cast<double>(static_cast<float>(Goal::kMoveReward));
  const auto long_ones = std::count_if(stats.returns.begin(), stats.returns.end(),
                                       [&](double r) { return std::abs(r - dribble_return) < 1e-9; });
  EXPECT_EQ(long_ones, 2);
  // Environment 0's two shots came first, environment 1's episodes last.
  EXPECT_NEAR(stats.returns[2], dribble_return, 1e-9);
  EXPECT_NEAR(stats.returns[3], dribble_return, 1e-9);
}

TEST(RunEpisodes, CountsStepsOfEveryEnvironmentAndReportsDonePerStep) {
  constexpr int64_t kEnvs = 3;
  CartPole env{EnvOptions(kEnvs).max_episode_steps(5)};
  int64_t calls = 0, finished = 0;
  const EpisodeStats stats = run_episodes(
      env,
      [](const TensorDict& observation) {  // alternate left and right: the pole survives 5 steps
        TensorDict action(observation.batch_size().vec());
        static int64_t t = 0;
        action.set("action", at::full({observation.batch_size()[0]}, t++ % 2, at::kLong));
        return action;
      },
      /*num_episodes=*/6, /*seed=*/1, [&](const at::Tensor& done) {
        ++calls;
        ASSERT_EQ(done.scalar_type(), at::kBool);
        ASSERT_EQ(done.sizes(), c10::IntArrayRef({kEnvs}));
        finished += done.sum().item<int64_t>();
      });
  EXPECT_EQ(stats.env_steps, calls * kEnvs);
  EXPECT_EQ(stats.env_steps, 2 * 5 * kEnvs);
  EXPECT_EQ(finished, 6);
  EXPECT_EQ(stats.returns, std::vector<double>(6, 5.0));
  EXPECT_GT(stats.seconds, 0);
  EXPECT_GT(stats.steps_per_second(), 0);
}

TEST(RunEpisodes, RejectsNonPositiveEpisodeCounts) {
  CartPole env{EnvOptions(2)};
  EXPECT_EQ(test_util::error_of<std::invalid_argument>([&] { run_episodes(env, always_left, 0, 0); }),
            "run_episodes: num_episodes must be positive, got 0");
  EXPECT_EQ(test_util::error_of<std::invalid_argument>([&] { run_episodes(env, always_left, -3, 0); }),
            "run_episodes: num_episodes must be positive, got -3");
}

TEST(RunEpisodes, EmptyStatsHaveNanReturnsAndNoSpeed) {
  EpisodeStats stats;
  EXPECT_TRUE(std::isnan(stats.mean_return()));
  EXPECT_TRUE(std::isnan(stats.min_return()));
  EXPECT_TRUE(std::isnan(stats.max_return()));
  EXPECT_EQ(stats.steps_per_second(), 0);
}

// The actor overload zeroes a recurrent actor's hidden state where episodes end: it matches a
// loop that carries the state by hand (the stateless form) and zeroes it at episode ends.
TEST(RunEpisodes, RecurrentActorStateIsResetWhereEpisodesEnd) {
  constexpr int64_t kEnvs = 4, kEpisodes = 8, kSeed = 5;
  auto actor = actor::Actor::load("policies/recurrent_gru.pbtxt", actor::ActorOptions().seed(11));
  ASSERT_OK(actor);
  CartPole env{EnvOptions(kEnvs)};
  const EpisodeStats stats = run_episodes(env, **actor, nn::InteractionType::kRandom, kEpisodes, kSeed);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<actor::Actor> by_hand,
                       actor::Actor::load("policies/recurrent_gru.pbtxt", actor::ActorOptions().seed(11)));
  auto run_by_hand = [&]() {
    at::Tensor hidden = at::zeros({kEnvs, 32});
    CartPole hand_env{EnvOptions(kEnvs)};
    return run_episodes(
        hand_env,
        [&](const TensorDict& observation) {
          TensorDict input = observation.clone(/*deep=*/false);
          input.set("hidden", hidden);
          TensorDict action = by_hand->act(input, nn::InteractionType::kRandom);
          hidden = action.get("hidden");
          return action;
        },
        kEpisodes, kSeed,
        [&](const at::Tensor& done) {
          hidden = hidden.masked_fill(done.unsqueeze(1), 0);
        });
  };
  const EpisodeStats with_reset = run_by_hand();
  EXPECT_EQ(stats.returns, with_reset.returns);
  EXPECT_EQ(stats.env_steps, with_reset.env_steps);

  // A second run starts from zeros again, not from the state the first one left.
  CartPole again{EnvOptions(kEnvs)};
  auto fresh = actor::Actor::load("policies/recurrent_gru.pbtxt", actor::ActorOptions().seed(11));
  ASSERT_OK(fresh);
  const EpisodeStats first = run_episodes(again, **fresh, nn::InteractionType::kDeterministic, kEpisodes, kSeed);
  const EpisodeStats second = run_episodes(again, **fresh, nn::InteractionType::kDeterministic, kEpisodes, kSeed);
  EXPECT_EQ(first.returns, second.returns);
}

// The returns above barely depend on the hidden state of an untrained GRU, so this looks at the
// state itself: when every episode ends on the last step, the actor is left holding zeros.
TEST(RunEpisodes, RecurrentActorIsLeftWithZeroStateWhenEveryEpisodeEndsOnTheLastStep) {
  auto actor = actor::Actor::load("policies/recurrent_gru.pbtxt");
  ASSERT_OK(actor);
  CartPole env{EnvOptions(2).max_episode_steps(3)};
  const EpisodeStats stats = run_episodes(env, **actor, nn::InteractionType::kDeterministic, 2, /*seed=*/0);
  ASSERT_EQ(stats.env_steps, 2 * 3);

  const TensorDict observation = env.reset(/*seed=*/1);
  TensorDict from_zeros = observation.clone(/*deep=*/false);
  from_zeros.set("hidden", at::zeros({2, 32}));
  const at::Tensor expected = (*actor)->act(from_zeros, nn::InteractionType::kDeterministic).get("hidden");
  const at::Tensor kept = (*actor)->act(observation, nn::InteractionType::kDeterministic).get("hidden");
  EXPECT_TRUE(kept.allclose(expected)) << kept - expected;
  // The kept state is really used: a second step from it differs from a step from zeros.
  const at::Tensor second = (*actor)->act(observation, nn::InteractionType::kDeterministic).get("hidden");
  EXPECT_FALSE(second.allclose(expected));
}

}  // namespace
}  // namespace tdp::agents
