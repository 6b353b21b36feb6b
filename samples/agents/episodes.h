// Episodes: runs a policy on a BatchedEnv for a given number of complete episodes and reports
// their returns and the stepping speed: the evaluation loop of an agent, and of `rollout`.
//
//   tdp::env::CartPole env(tdp::env::EnvOptions(/*num_envs=*/16));
//   auto actor = tdp::actor::Actor::load("policies/cartpole_categorical.pbtxt");
//   tdp::agents::EpisodeStats stats = tdp::agents::run_episodes(
//       env, **actor, tdp::nn::InteractionType::kDeterministic, /*num_episodes=*/100, /*seed=*/0);
//   std::printf("return %.1f at %.0f steps/s\n", stats.mean_return(), stats.steps_per_second());
//
// Unbiased counting: with N environments stepped in lockstep, keeping the first M episodes to
// finish would over-represent short episodes (a bad policy's quick failures finish first).
// Environment i therefore owns episodes i, i+N, i+2N, ... of the M: it records its first
// ceil(M/N) episodes if i < M mod N, else floor(M/N), and the run stops when every environment
// has its quota (so the run lasts as long as the slowest environment's quota).
// Environments past their quota keep stepping (the batch moves together) but are not recorded.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "sdk/env/batched_env.h"
#include "sdk/actor/actor.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::agents {

struct EpisodeStats {
  std::vector<double> returns;  // one per finished episode, in completion order
  int64_t env_steps = 0;        // environment steps taken (N per batched step)
  double seconds = 0;           // wall-clock of the run

  // NaN when no episode finished.
  double mean_return() const;
  // The sample standard deviation (n - 1); NaN below two episodes.
  double std_return() const;
  double min_return() const;
  double max_return() const;
  // 0 when no time was measured.
  double steps_per_second() const;
};

// The policy as a function from the env's observation TensorDict to the action TensorDict.
using ActFn = std::function<TensorDict(const TensorDict& observation)>;

// Runs `num_episodes` complete episodes across env's N environments starting from env.reset(seed).
// Unbiased: environment i owns episodes i, i+N, i+2N, ... (so short episodes don't crowd out long
// ones); results past an environment's quota are discarded though it keeps stepping.
// `on_done` (optional) is called after each step with the [N] bool mask of finished envs.
// Within one step, episodes are recorded in environment order. A return is the sum of the
// step rewards in double precision. Throws std::invalid_argument when num_episodes <= 0.
EpisodeStats run_episodes(env::BatchedEnv& env, const ActFn& act, int64_t num_episodes, uint64_t seed,
                          const std::function<void(const at::Tensor& done)>& on_done = nullptr);

// Same, acting with `actor` under `type` and resetting its recurrent state where episodes end
// (and forgetting any state kept from before the run).
EpisodeStats run_episodes(env::BatchedEnv& env, actor::Actor& actor, nn::InteractionType type,
                          int64_t num_episodes, uint64_t seed);

}  // namespace tdp::agents
