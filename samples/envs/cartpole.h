// CartPole: Gymnasium's CartPole-v1 (Barto, Sutton & Anderson's cart-pole) batched over N
// environments. A pole is hinged on a cart; push the cart left or right to keep the pole up.
//
//   tdp::env::CartPole env(tdp::env::EnvOptions(/*num_envs=*/8));
//   tdp::TensorDict td = env.reset(/*seed=*/1);           // "observation" [8, 4]
//   td.set("action", at::ones({8}, at::kLong));            // push every cart right
//   tdp::TensorDict out = env.step(td);                    // reward 1 per step, until the fall
//
// Dynamics, constants and limits are Gymnasium's (gymnasium/envs/classic_control/cartpole.py):
// Euler integration with tau 0.02 s, force 10 N, gravity 9.8, cart 1 kg, pole 0.1 kg, half
// length 0.5 m; terminated when |x| > 2.4 or |theta| > 12 degrees; truncated after 500 steps;
// reward 1 on every step including the terminating one; initial state U(-0.05, 0.05)^4.
// Each step is computed in float64 as Gymnasium computes it: with EnvOptions::dtype float64 the
// states are Gymnasium's to the last bit; a float32 state is each step's float64 result rounded.
// - observation: [N, 4] float32 = (x, x_dot, theta, theta_dot)
// - action: [N] int64 in {0, 1}: 0 pushes left, 1 pushes right
#pragma once

#include <string>
#include <vector>

#include "sdk/env/batched_env.h"

namespace tdp::env {

class CartPole : public BatchedEnv {
 public:
  static constexpr int64_t kDefaultMaxEpisodeSteps = 500;
  static constexpr double kXThreshold = 2.4;
  // 12 degrees, computed as Gym does.
  static constexpr double kThetaThresholdRadians = 12 * 2 * 3.141592653589793 / 360;

  explicit CartPole(const EnvOptions& options);

  std::string name() const override { return "CartPole"; }
  std::vector<EntrySpec> observation_spec() const override;
  std::vector<EntrySpec> action_spec() const override;
  // (x, x_dot, theta, theta_dot)
  int64_t state_dim() const override { return 4; }

 protected:
  at::Tensor initial_state(int64_t n) override;
  at::Tensor observe(const at::Tensor& state) const override;
  Transition transition(const at::Tensor& state, const TensorDict& action_td) override;
};

}  // namespace tdp::env
