// PPO (Schulman et al. 2017, clipped objective) written on the SDK: the actor is the
// ProbabilisticTensorDictSequential a policy spec builds, whose get_dist() gives the
// distribution that scores actions (log-prob and entropy from the SDK's distributions; with
// several probabilistic modules, autoregressive heads, get_dist_given_samples(): the joint
// log p(a1) + log p(a2 | stored a1)); the
// critic is a TensorDictModule over an Mlp writing "state_value"; advantages come from GAE;
// one Adam optimizer updates both. Training leaves the trained parameters in the policy's
// module, so policy::save_policy writes a spec that Actor::load (and the `rollout` sample) runs.
//
//   tdp::env::CartPole env(tdp::env::EnvOptions(8));
//   auto policy = tdp::policy::load_policy("policies/cartpole_categorical.pbtxt");
//   tdp::agents::PpoConfig config;  config.total_env_steps = 100000;
//   auto result = tdp::agents::train_ppo(env, *policy, config);      // StatusOr<PpoResult>
//   tdp::policy::save_policy(*policy, "runs/cartpole/policy.pb");
//
// Truncated episodes (the time limit) bootstrap from V(final_observation), terminated ones
// from 0 (see sdk/env/batched_env.h). Rollouts act through a tdp::actor::Actor over the
// module being trained, in InteractionType::kRandom: on the fused CPU plan when the policy lowers
// to one (its weights refreshed after every update: Actor::refresh_parameters), else on LibTorch.
// The log-probs of the drawn actions and the values of the visited states are computed after
// each rollout in one batched call each. The actor is seeded with config.seed, as are the
// minibatch shuffles, so a run is reproducible given the seed, the spec and the number of
// environments.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sdk/env/batched_env.h"
#include "sdk/policy/policy.h"

namespace tdp::agents {

struct PpoConfig {
  // Rollout: num_envs must equal the environment's; each iteration collects
  // num_envs * steps_per_rollout transitions.
  int64_t num_envs = 8;
  int64_t steps_per_rollout = 32;
  int64_t total_env_steps = 100000;
  // Update: `epochs` passes over the batch in shuffled minibatches of minibatch_size
  // (which must divide into the batch at least once: minibatch_size <= batch).
  int64_t epochs = 20;
  int64_t minibatch_size = 256;
  double gamma = 0.98;
  double gae_lambda = 0.8;
  double clip_epsilon = 0.2;
  bool anneal_clip = true;
  double entropy_coef = 0.0;
  // Per action part of a composite policy (its sample key, nested names joined by ".":
  // "action_type"): the weight of that part's entropy, in place of entropy_coef. Autoregressive
  // heads may need the discrete choice kept open longer than the continuous part, whose entropy
  // also sets how precise it is. Naming a part the policy does not sample is an error.
  std::map<std::string, double> part_entropy_coefs;
  // The entropy weights start at entropy_boost times their values and decay linearly back to them
  // over the first entropy_boost_fraction of the iterations (entropy_boost 1: constant weights).
  double entropy_boost = 1.0;
  double entropy_boost_fraction = 0.0;
  double value_coef = 0.5;
  double learning_rate = 1e-3;
  // Linear decay of the learning rate to 0 over training (as SB3's "lin_1e-3").
  bool anneal_learning_rate = true;
  double max_grad_norm = 0.5;
  bool normalize_advantages = true;
  // Rewards are multiplied by this before GAE (the reported returns are not).
  double reward_scale = 1.0;
  // The parts of CleanRL's recipe for MuJoCo (ppo_continuous_action), off by default (its
  // ClipAction is every BatchedEnv's own rule: the update scores the drawn, unclipped actions):
  // - normalize_observations: Gymnasium's NormalizeObservation (then CleanRL's clip, the
  //   ObservationNorm's): running mean and variance of the observations (count from 1e-4, float64),
  //   updated with every observation as it arrives (an episode's last one too), which is then
  //   stored as (x - mean) / sqrt(var + 1e-8) with the statistics including it. The policy must
  //   hold an ObservationNorm with standard_normal: PPO keeps it at the identity while training
  //   (the policy acts on, and the update scores, the stored normalized observations) and writes
  //   the final statistics into it at the end, so the saved policy is fed raw observations. The
  //   critic reads the same normalized observations.
  bool normalize_observations = false;
  // - normalize_rewards: rewards divided by the running standard deviation of each
  //   environment's discounted return (Gymnasium's NormalizeReward), then clipped to
  //   [-reward_clip, reward_clip].
  bool normalize_rewards = false;
  double reward_clip = 10.0;
  // - bootstrap_truncated false: a time limit ends the return as a termination does (CleanRL's
  //   `done = terminated or truncated`), instead of bootstrapping from V(final_observation).
  bool bootstrap_truncated = true;
  // - clip_value_loss: the critic's loss is max((v - R)^2, (v_clipped - R)^2), v_clipped within
  //   clip_epsilon of the rollout's value (baselines' and CleanRL's value clipping).
  bool clip_value_loss = false;
  // - orthogonal_init: every weight matrix orthogonal (gain sqrt 2) and biases 0, the policy's
  //   last layer with gain 0.01 and the critic's with gain 1.
  bool orthogonal_init = false;
  // Critic architecture: Mlp(observation -> hidden -> 1), tanh.
  std::vector<int64_t> value_hidden_sizes = {64, 64};
  // Seeds the env reset, the action draws and the minibatch shuffles (a generator of PPO's
  // own), and the critic's init (through LibTorch's global generator, which it reseeds).
  uint64_t seed = 0;
  // Stop early once the mean of the last `recent_episodes` training episodes reaches this
  // (NaN: never). Training returns are stochastic-policy returns. recent_episodes is also the
  // window of IterationStats::mean_episode_return (openrlbenchmark, which CleanRL's published
  // figures come from, averages each run's last 100 episodes).
  double stop_at_return = std::numeric_limits<double>::quiet_NaN();
  int64_t recent_episodes = 20;

  int64_t batch_size() const { return num_envs * steps_per_rollout; }
  int64_t num_iterations() const;
};

// Checks a config against itself and the environment; the message names the field.
absl::Status validate_config(const PpoConfig& config, int64_t env_num_envs);

// What one iteration (one rollout and its update) measured.
struct IterationStats {
  int64_t iteration = 0;  // 1-based
  int64_t env_steps = 0;  // total so far
  double wall_seconds = 0;  // since training started
  // Mean undiscounted return of the last recent_episodes finished training episodes (NaN
  // before the first one finishes), and how many episodes have finished so far.
  double mean_episode_return = 0;
  int64_t episodes = 0;
  // Means over the iteration's minibatches.
  double policy_loss = 0;
  double value_loss = 0;
  double entropy = 0;
  double approx_kl = 0;
  double clip_fraction = 0;
  double learning_rate = 0;
  double clip_epsilon = 0;
  // 1 - Var(returns - values) / Var(returns) on the rollout: how much the critic explains.
  double explained_variance = 0;
  double steps_per_second() const { return wall_seconds > 0 ? env_steps / wall_seconds : 0; }
};

// One finished training episode: its undiscounted return and the total env steps when it ended.
struct EpisodeReturn {
  int64_t env_steps = 0;
  double episode_return = 0;
};

struct PpoResult {
  std::vector<IterationStats> iterations;
  std::vector<EpisodeReturn> episode_returns;  // every training episode, in the order they ended
  int64_t env_steps = 0;
  double wall_seconds = 0;
  bool stopped_early = false;
};

// Trains `policy.module` (a ProbabilisticTensorDictSequential reading "observation") in
// place on `env`. `on_iteration`, when set, is called after each iteration (progress lines).
// Returns an error naming the problem for a bad config or a policy that is not probabilistic;
// exceptions from tensor code (shape mismatches) are turned into errors too.
absl::StatusOr<PpoResult> train_ppo(env::BatchedEnv& env, policy::Policy& policy, const PpoConfig& config,
                                    const std::function<void(const IterationStats&)>& on_iteration = {});

// What PPO scores a stored action with: per environment ([B]), the joint log-probability of the
// action parts in `td` (its "observation" and the policy's sample keys), each part given the
// stored earlier parts: get_dist_given_samples() for autoregressive heads, else get_dist(). The
// training loop scores the rollout's actions and the update's minibatches the same way, so the
// two agree before the first gradient step.
absl::StatusOr<at::Tensor> action_log_prob(const policy::Policy& policy, const TensorDict& td);

// The CSV of a training curve: a header line, then one line per iteration.
std::string curve_csv(const std::vector<IterationStats>& iterations);

// The CSV of the training episodes: "env_steps,episode_return", one line per episode.
std::string episodes_csv(const std::vector<EpisodeReturn>& episodes);

}  // namespace tdp::agents
