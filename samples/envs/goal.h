// Goal: a hybrid-action task, batched over N environments. Each step the agent picks an action
// type (discrete) and a parameter for it (continuous): dribble the ball along a line toward a
// goal, or shoot at it. A 1-D take on the "Goal" domain of parameterized-action RL (Masson,
// Ranchod & Konidaris 2016), small enough to train on a CPU in seconds; it exercises a
// CompositeDistribution (a Categorical for the type and a bounded continuous one for the
// parameter) driving two action keys.
//
//   tdp::env::Goal env(tdp::env::EnvOptions(/*num_envs=*/8));
//   tdp::TensorDict td = env.reset(/*seed=*/1);                     // "observation" [8, 4]
//   td.set("action_type", at::full({8}, tdp::env::Goal::kShoot));  // shoot ...
//   td.set("action_param", at::zeros({8, 1}));                       // ... straight down
//   tdp::TensorDict out = env.step(td);                              // every episode ends
//
// Rules. The ball is at x in [-1, 1], the goal at g in [-1, 1], both U(-1, 1) at reset.
// - kMove (action_type 0): x <- clip(x + 0.2 p, -1, 1); reward -0.02 (time is costly).
// - kShoot (action_type 1): the ball lands at x + 2 p + 0.3 |g - x| eps, eps ~ N(0, 1) from the
//   environment's generator: shots are noisier from further away. Reward
//   max(0, 1 - |landing - g| / 0.25); the episode terminates.
// - p = action_param, clipped to [-1, 1]. Truncated after 50 steps.
// Shooting at once scores little; dribbling close and then shooting scores about 0.9. A random
// policy averages about 0.
// - observation: [N, 4] float32 = (x, g, g - x, steps taken / max_episode_steps)
// - action_type: [N] int64 in {0, 1}; action_param: [N, 1] float32 in [-1, 1]
#pragma once

#include <string>
#include <vector>

#include "sdk/env/batched_env.h"

namespace tdp::env {

class Goal : public BatchedEnv {
 public:
  static constexpr int64_t kDefaultMaxEpisodeSteps = 50;
  static constexpr int64_t kMove = 0;
  static constexpr int64_t kShoot = 1;
  static constexpr int64_t kNumActionTypes = 2;
  static constexpr double kMoveScale = 0.2;
  static constexpr double kMoveReward = -0.02;
  static constexpr double kShotScale = 2.0;
  static constexpr double kShotNoise = 0.3;
  static constexpr double kGoalWidth = 0.25;

  explicit Goal(const EnvOptions& options);

  std::string name() const override { return "Goal"; }
  std::vector<EntrySpec> observation_spec() const override;
  std::vector<EntrySpec> action_spec() const override;
  // (x, g, steps taken)
  int64_t state_dim() const override { return 3; }

 protected:
  at::Tensor initial_state(int64_t n) override;
  at::Tensor observe(const at::Tensor& state) const override;
  Transition transition(const at::Tensor& state, const TensorDict& action_td) override;
};

}  // namespace tdp::env
