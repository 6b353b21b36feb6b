// PPO: a few iterations on CartPole improve the deterministic return over the untrained
// policy; a trained policy saved with save_policy and reloaded with Actor::load acts and scores
// exactly as the trained module (categorical, hybrid, autoregressive and Gaussian policies); PPO
// scores stored actions with the joint probability they were drawn with; per-part entropy weights
// act on their part; bad configs and
// policies PPO cannot train give errors that name the problem.
#include "samples/agents/ppo.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "samples/agents/episodes.h"
#include "samples/envs/cartpole.h"
#include "samples/envs/goal.h"
#include "samples/envs/mujoco_tasks.h"
#include "samples/envs/pendulum.h"
#include "sdk/actor/actor.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/policy/policy.h"
#include "tests/testing/files.h"
#include "tests/testing/status_matchers.h"

namespace tdp::agents {
namespace {

using ::testing::HasSubstr;
using nn::InteractionType;

using test_util::temp_path;

// The module's own deterministic actions, as the trainer holds it.
ActFn deterministic(const policy::Policy& policy) {
  return [module = policy.module](const TensorDict& observation) {
    at::NoGradGuard no_grad;
    nn::InteractionTypeGuard guard(InteractionType::kDeterministic, /*thread_local_only=*/true);
    return module->forward(observation.clone(false));
  };
}

PpoConfig cartpole_config() {
  PpoConfig c;
  c.num_envs = 8;
  c.steps_per_rollout = 32;
  c.total_env_steps = 25 * 256;
  c.epochs = 10;
  c.minibatch_size = 128;
  c.seed = 1;
  return c;
}

// Three short iterations on Goal (16 envs), for the save-and-reload tests of its two policies.
PpoConfig short_goal_config() {
  PpoConfig c;
  c.steps_per_rollout = 16;
  c.total_env_steps = 3 * 256;
  c.epochs = 4;
  c.minibatch_size = 128;
  c.entropy_coef = 0.01;
  return c;
}

TEST(PpoTest, AFewIterationsImproveCartPole) {
  at::set_num_threads(1);
  ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy("policies/cartpole_categorical.pbtxt"));
  env::CartPole eval_env(env::EnvOptions(20));
  const double before = run_episodes(eval_env, deterministic(policy), 20, /*seed=*/7).mean_return();

  PpoConfig config = cartpole_config();
  env::CartPole env(env::EnvOptions(config.num_envs));
  auto result = train_ppo(env, policy, config);
  ASSERT_OK(result);
  ASSERT_EQ(result->iterations.size(), 25u);
  EXPECT_EQ(result->env_steps, 25 * 256);
  const IterationStats& last = result->iterations.back();
  EXPECT_EQ(last.iteration, 25);
  EXPECT_GT(last.episodes, 0);
  EXPECT_GT(last.mean_episode_return, result->iterations.front().mean_episode_return);

  const double after = run_episodes(eval_env, deterministic(policy), 20, /*seed=*/7).mean_return();
  EXPECT_LT(before, 20.0);        // the untrained policy falls within ~10 steps
  EXPECT_GT(after, before * 3);   // a few thousand steps are enough to balance much longer
  EXPECT_GT(after, 50.0);

  const std::string csv = curve_csv(result->iterations);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 26);  // header + 25 iterations
  EXPECT_THAT(csv, HasSubstr("iteration,env_steps,wall_seconds,mean_episode_return"));

  // Every finished episode is recorded, in order, and the curve's return is the mean of the last
  // recent_episodes of them.
  const std::vector<EpisodeReturn>& episodes = result->episode_returns;
  ASSERT_EQ(static_cast<int64_t>(episodes.size()), last.episodes);
  ASSERT_GE(static_cast<int64_t>(episodes.size()), config.recent_episodes);
  double sum = 0;
  for (size_t i = episodes.size() - config.recent_episodes; i < episodes.size(); ++i) sum += episodes[i].episode_return;
  EXPECT_NEAR(sum / config.recent_episodes, last.mean_episode_return, 1e-9);
  for (size_t i = 0; i < episodes.size(); ++i) {
    EXPECT_GT(episodes[i].episode_return, 0.0);  // CartPole pays 1 per step
    EXPECT_GT(episodes[i].env_steps, 0);
    EXPECT_LE(episodes[i].env_steps, result->env_steps);
    if (i > 0) {
      EXPECT_GE(episodes[i].env_steps, episodes[i - 1].env_steps);
    }
  }
  const std::string episodes_text = episodes_csv(episodes);
  EXPECT_EQ(std::count(episodes_text.begin(), episodes_text.end(), '\n'), static_cast<int64_t>(episodes.size()) + 1);
  EXPECT_THAT(episodes_text, HasSubstr("env_steps,episode_return\n"));
}

TEST(PpoTest, SameSeedSameTraining) {
  at::set_num_threads(1);
  PpoConfig config = cartpole_config();
  config.total_env_steps = 2 * 256;
  std::vector<at::Tensor> params[2];
  for (int run = 0; run < 2; ++run) {
    ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy("policies/cartpole_categorical.pbtxt"));
    env::CartPole env(env::EnvOptions(config.num_envs));
    ASSERT_OK(train_ppo(env, policy, config));
    params[run] = policy.module->parameters();
  }
  ASSERT_EQ(params[0].size(), params[1].size());
  for (size_t i = 0; i < params[0].size(); ++i) EXPECT_TRUE(at::equal(params[0][i], params[1][i]));
}

// Trains briefly, saves, reloads with Actor::load and compares deterministic outputs (actions
// and log-probs) on random observations.
void expect_reload_acts_identically(const std::string& spec_path, env::BatchedEnv& env, PpoConfig config,
                                    const std::vector<std::string>& keys) {
  at::set_num_threads(1);
  ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy(spec_path));
  config.num_envs = env.num_envs();
  auto result = train_ppo(env, policy, config);
  ASSERT_OK(result);
  const std::string saved = temp_path(policy.spec.name() + ".pb");
  ASSERT_OK(policy::save_policy(policy, saved));

  auto actor = actor::Actor::load(saved, actor::ActorOptions().seed(3));
  ASSERT_OK(actor);
  at::manual_seed(11);
  const int64_t obs_dim = env.observation_spec()[0].numel();
  TensorDict observation({{"observation", at::randn({64, obs_dim})}}, {64});
  const TensorDict trained = deterministic(policy)(observation);
  const TensorDict reloaded = (*actor)->act(observation, InteractionType::kDeterministic);
  for (const auto& key : keys) {
    SCOPED_TRACE(key);
    const at::Tensor a = trained.get(key);
    const at::Tensor b = reloaded.get(key);
    ASSERT_EQ(a.sizes(), b.sizes());
    if (a.is_floating_point()) {
      EXPECT_TRUE(at::allclose(a, b, /*rtol=*/0, /*atol=*/1e-6)) << (a - b).abs().max();
    } else {
      EXPECT_TRUE(at::equal(a, b));
    }
  }
  // The trained parameters travelled: the untrained spec acts differently.
  auto untrained = actor::Actor::load(spec_path);
  ASSERT_OK(untrained);
  const at::Tensor key_out = (*untrained)->act(observation, InteractionType::kDeterministic).get(keys.back());
  EXPECT_FALSE(at::allclose(key_out.to(at::kDouble), reloaded.get(keys.back()).to(at::kDouble), 0, 1e-6));
}

TEST(PpoTest, SavedCategoricalPolicyReloadsAndActsIdentically) {
  env::CartPole env(env::EnvOptions(8));
  PpoConfig config = cartpole_config();
  config.total_env_steps = 3 * 256;
  expect_reload_acts_identically("policies/cartpole_categorical.pbtxt", env, config,
                                 {"action", "action_log_prob"});
}

TEST(PpoTest, SavedHybridPolicyReloadsAndActsIdentically) {
  env::Goal env(env::EnvOptions(16));
  const PpoConfig config = short_goal_config();
  expect_reload_acts_identically("policies/goal_hybrid.pbtxt", env, config,
                                 {"action_type", "action_param", "action_type_log_prob", "action_param_log_prob"});
}

TEST(PpoTest, SavedAutoregressivePolicyReloadsAndActsIdentically) {
  env::Goal env(env::EnvOptions(16));
  const PpoConfig config = short_goal_config();
  expect_reload_acts_identically("policies/goal_autoregressive.pbtxt", env, config,
                                 {"action_type", "action_param", "action_type_log_prob", "action_param_log_prob"});
}

// PPO scores a stored action with the probability the policy drew it with: the joint
// log p(type) + log p(param | stored type), which is what the probabilistic modules wrote while
// the actor drew it. For the autoregressive heads this holds only through get_dist_given_samples;
// tensordict's get_dist re-draws the type (deterministic: the argmax) and scores the parameter
// under that draw, which departs wherever a non-argmax type was sampled.
TEST(PpoTest, ActionLogProbIsTheJointLogProbOfTheDrawnActions) {
  at::set_num_threads(1);
  for (const char* spec_path : {"policies/goal_autoregressive.pbtxt", "policies/goal_hybrid.pbtxt"}) {
    SCOPED_TRACE(spec_path);
    ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy(spec_path));
    env::Goal env(env::EnvOptions(64));
    actor::Actor actor(policy, actor::ActorOptions().seed(3).return_all_entries(true));
    TensorDict drawn = actor.act(env.reset(0), InteractionType::kRandom);
    for (int step = 0; step < 3; ++step) drawn = actor.act(env.step(drawn), InteractionType::kRandom);
    const at::Tensor written = drawn.get("action_type_log_prob").reshape({64, -1}).sum(1) +
                               drawn.get("action_param_log_prob").reshape({64, -1}).sum(1);
    ASSERT_OK_AND_ASSIGN(at::Tensor scored, action_log_prob(policy, drawn));
    ASSERT_EQ(scored.sizes(), written.sizes());
    EXPECT_TRUE(at::allclose(scored, written, 1e-5, 1e-5)) << (scored - written).abs().max();
  }
  ASSERT_OK_AND_ASSIGN(policy::Policy gru, policy::load_policy("policies/recurrent_gru.pbtxt"));
  EXPECT_THAT(std::string(action_log_prob(gru, TensorDict({1})).status().message()),
              HasSubstr("PPO needs a probabilistic_sequential policy"));
}

// part_entropy_coefs weighs each action part's entropy on its own: the same short training with
// the type's entropy weighted up ends with a less certain type than with it weighted at 0 (the
// parameter's weight, and everything else, equal).
TEST(PpoTest, PartEntropyCoefsWeighEachPart) {
  at::set_num_threads(1);
  auto type_entropy_after = [](double type_coef, double boost) {
    policy::Policy policy = policy::load_policy("policies/goal_autoregressive.pbtxt").value();
    env::Goal env(env::EnvOptions(16));
    PpoConfig config = short_goal_config();
    config.num_envs = 16;
    config.total_env_steps = 6 * 256;
    config.part_entropy_coefs = {{"action_type", type_coef}, {"action_param", 0.0}};
    config.entropy_boost = boost;
    config.entropy_boost_fraction = 1.0;
    EXPECT_OK(train_ppo(env, policy, config));
    at::NoGradGuard no_grad;
    nn::InteractionTypeGuard guard(InteractionType::kDeterministic, /*thread_local_only=*/true);
    env::Goal probe(env::EnvOptions(256));
    const at::Tensor logits = policy.module->forward(probe.reset(11)).get({"params", "action_type", "logits"});
    const at::Tensor log_p = logits.log_softmax(-1);
    return -(log_p.exp() * log_p).sum(-1).mean().item<double>();
  };
  const double unweighted = type_entropy_after(0.0, 1.0);
  EXPECT_GT(type_entropy_after(0.5, 1.0), unweighted);
  // The boost multiplies the weights early on: 0.05 boosted to 0.5 keeps more entropy than 0.05.
  EXPECT_GT(type_entropy_after(0.05, 10.0), type_entropy_after(0.05, 1.0));
}

TEST(PpoTest, SavedGaussianPolicyReloadsAndActsIdentically) {
  env::Pendulum env(env::EnvOptions(8));
  PpoConfig config;
  config.steps_per_rollout = 64;
  config.total_env_steps = 2 * 512;
  config.epochs = 4;
  config.minibatch_size = 128;
  config.reward_scale = 0.1;
  expect_reload_acts_identically("samples/agents/pendulum_ppo_normal.pbtxt", env, config,
                                 {"action", "action_log_prob"});
}

// CleanRL's MuJoCo recipe: the statistics PPO keeps are written into the policy's
// ObservationNorm, travel in the saved file (the reload acts as the trained module) and are the
// observations' (the torso height qpos[1], observation 0, averages about 1.25, not 0).
TEST(PpoTest, CleanRlRecipeSavesThePolicysObservationStatistics) {
  env::Hopper env(env::EnvOptions(2));
  PpoConfig config;
  config.steps_per_rollout = 64;
  config.total_env_steps = 2 * 128;
  config.epochs = 2;
  config.minibatch_size = 64;
  config.normalize_observations = true;
  config.normalize_rewards = true;
  config.clip_value_loss = true;
  config.orthogonal_init = true;
  expect_reload_acts_identically("samples/agents/mujoco/hopper_ppo.pbtxt", env, config, {"action", "action_log_prob"});

  ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy("samples/agents/mujoco/hopper_ppo.pbtxt"));
  config.num_envs = 2;
  ASSERT_OK(train_ppo(env, policy, config));
  at::Tensor loc, scale;
  for (const auto& buffer : policy.module->named_buffers(/*recurse=*/true)) {
    if (buffer.key().find("loc") != std::string::npos) loc = buffer.value();
    if (buffer.key().find("scale") != std::string::npos) scale = buffer.value();
  }
  ASSERT_TRUE(loc.defined() && scale.defined());
  EXPECT_NEAR(loc[0].item<double>(), 1.25, 0.1);
  EXPECT_GT(scale[0].item<double>(), 0.0);
  EXPECT_LT(scale[0].item<double>(), 0.5);  // the height varies by far less than 1
}

TEST(PpoTest, RecipeOptionsThePolicyCannotTakeAreErrors) {
  ASSERT_OK_AND_ASSIGN(policy::Policy pendulum, policy::load_policy("samples/agents/pendulum_ppo_normal.pbtxt"));
  env::Pendulum pendulum_env(env::EnvOptions(8));
  PpoConfig config;
  config.normalize_observations = true;
  EXPECT_THAT(std::string(train_ppo(pendulum_env, pendulum, config).status().message()),
              HasSubstr("normalize_observations needs the policy to hold one ObservationNorm network with "
                        "standard_normal"));

  ASSERT_OK_AND_ASSIGN(policy::Policy cartpole, policy::load_policy("policies/cartpole_categorical.pbtxt"));
  env::CartPole cartpole_env(env::EnvOptions(8));
  config = cartpole_config();
  config.reward_clip = 0;
  EXPECT_THAT(std::string(train_ppo(cartpole_env, cartpole, config).status().message()), HasSubstr("reward_clip"));
}

TEST(PpoTest, ConfigErrorsNameTheField) {
  ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy("policies/cartpole_categorical.pbtxt"));
  env::CartPole env(env::EnvOptions(8));
  PpoConfig config = cartpole_config();

  config.minibatch_size = 512;
  auto status = train_ppo(env, policy, config).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("minibatch_size 512 is larger than the batch (num_envs 8 x steps_per_rollout 32 = 256)"));

  config = cartpole_config();
  config.num_envs = 4;
  status = train_ppo(env, policy, config).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("num_envs is 4 but the environment runs 8"));

  config = cartpole_config();
  config.gamma = 1.5;
  EXPECT_THAT(std::string(train_ppo(env, policy, config).status().message()), HasSubstr("gamma"));

  config = cartpole_config();
  config.steps_per_rollout = 0;
  EXPECT_THAT(std::string(train_ppo(env, policy, config).status().message()), HasSubstr("steps_per_rollout"));

  config = cartpole_config();
  config.part_entropy_coefs = {{"action", -0.1}};
  EXPECT_THAT(std::string(train_ppo(env, policy, config).status().message()), HasSubstr("part_entropy_coefs[action]"));

  config = cartpole_config();
  config.entropy_boost_fraction = 2;
  EXPECT_THAT(std::string(train_ppo(env, policy, config).status().message()), HasSubstr("entropy_boost_fraction"));

  // A part the policy does not sample is named, with the parts it does (a typo would otherwise
  // leave the weight unused).
  config = cartpole_config();
  config.part_entropy_coefs = {{"action_type", 0.1}};
  EXPECT_THAT(std::string(train_ppo(env, policy, config).status().message()),
              HasSubstr("part_entropy_coefs names 'action_type', which policy 'cartpole_categorical' does not sample"));
}

TEST(PpoTest, PolicyWithoutADistributionIsAnError) {
  // recurrent_gru's top module is a plain sequential: no get_dist to score actions with.
  ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy("policies/recurrent_gru.pbtxt"));
  env::CartPole env(env::EnvOptions(8));
  const absl::Status status = train_ppo(env, policy, cartpole_config()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("probabilistic_sequential"));
}

TEST(PpoTest, MismatchedPolicyAndEnvironmentIsAnErrorNotACrash) {
  // A CartPole policy (observation [4]) on Pendulum (observation [3]).
  ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy("policies/cartpole_categorical.pbtxt"));
  env::Pendulum env(env::EnvOptions(8));
  const absl::Status status = train_ppo(env, policy, cartpole_config()).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("Pendulum"));
}

}  // namespace
}  // namespace tdp::agents
