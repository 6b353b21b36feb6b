// Pendulum: Gymnasium's Pendulum-v1 batched over N environments. Swing a pendulum up from a random
// angle and hold it upright with a bounded torque.
//
//   tdp::env::Pendulum env(tdp::env::EnvOptions(/*num_envs=*/8));
//   tdp::TensorDict td = env.reset(/*seed=*/1);           // "observation" [8, 3]
//   td.set("action", at::zeros({8, 1}));                   // no torque
//   tdp::TensorDict out = env.step(td);                    // reward in [-16.27, 0]
//
// Dynamics, constants and limits are Gymnasium's (gymnasium/envs/classic_control/pendulum.py):
// g 10, m 1, l 1, dt 0.05; torque clipped to [-2, 2]; angular velocity clipped to [-8, 8];
// reward -(angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2) on the state before the step;
// never terminates; truncated after 200 steps; initial th U(-pi, pi), thdot U(-1, 1).
// Each step is computed as Gymnasium computes it (float64, the float32 torque's own terms in
// float32): with EnvOptions::dtype float64 the states and rewards are Gymnasium's to the last
// bit; a float32 state is each step's float64 result rounded.
// - observation: [N, 3] float32 = (cos th, sin th, thdot); th = 0 is upright
// - action: [N, 1] float32 torque (clipped to [-2, 2])
#pragma once

#include <string>
#include <vector>

#include "sdk/env/batched_env.h"

namespace tdp::env {

class Pendulum : public BatchedEnv {
 public:
  static constexpr int64_t kDefaultMaxEpisodeSteps = 200;
  static constexpr double kMaxSpeed = 8.0;
  static constexpr double kMaxTorque = 2.0;

  explicit Pendulum(const EnvOptions& options);

  std::string name() const override { return "Pendulum"; }
  std::vector<EntrySpec> observation_spec() const override;
  std::vector<EntrySpec> action_spec() const override;
  // (th, thdot)
  int64_t state_dim() const override { return 2; }

 protected:
  at::Tensor initial_state(int64_t n) override;
  at::Tensor observe(const at::Tensor& state) const override;
  Transition transition(const at::Tensor& state, const TensorDict& action_td) override;
};

}  // namespace tdp::env
