#include "samples/envs/goal.h"

#include <ATen/ATen.h>

namespace tdp::env {

Goal::Goal(const EnvOptions& options) : BatchedEnv(options, kDefaultMaxEpisodeSteps) {}

std::vector<EntrySpec> Goal::observation_spec() const {
  EntrySpec spec;
  spec.key = "observation";
  spec.shape = {4};
  spec.dtype = observation_dtype();
  spec.low = {-1.0, -1.0, -2.0, 0.0};
  spec.high = {1.0, 1.0, 2.0, 1.0};
  return {spec};
}

std::vector<EntrySpec> Goal::action_spec() const {
  EntrySpec type;
  type.key = "action_type";
  type.shape = {};
  type.dtype = at::kLong;
  type.num_categories = kNumActionTypes;
  EntrySpec param;
  param.key = "action_param";
  param.shape = {1};
  param.dtype = at::kFloat;
  param.low = {-1.0};
  param.high = {1.0};
  return {type, param};
}

at::Tensor Goal::initial_state(int64_t n) {
  at::Tensor xg = at::empty({n, 2}, state_options()).uniform_(-1.0, 1.0, generator());
  return at::cat({xg, at::zeros({n, 1}, state_options())}, 1);
}

at::Tensor Goal::observe(const at::Tensor& state) const {
  const at::Tensor x = state.narrow(1, 0, 1);
  const at::Tensor g = state.narrow(1, 1, 1);
  const at::Tensor time = state.narrow(1, 2, 1) / static_cast<double>(max_episode_steps());
  return at::cat({x, g, g - x, time}, 1);
}

BatchedEnv::Transition Goal::transition(const at::Tensor& state, const TensorDict& action_td) {
  const at::Tensor x = state.narrow(1, 0, 1);
  const at::Tensor g = state.narrow(1, 1, 1);
  const at::Tensor t = state.narrow(1, 2, 1);
  const at::Tensor shoot = action_td.get("action_type").eq(kShoot).unsqueeze(1);
  const at::Tensor p = action_td.get("action_param").to(dtype()).clamp(-1.0, 1.0);

  const at::Tensor moved = (x + kMoveScale * p).clamp(-1.0, 1.0);
  // Drawn for every environment, shooting or not, so the generator advances the same way
  // whatever the actions are.
  const at::Tensor eps = at::randn({num_envs(), 1}, generator(), state_options());
  const at::Tensor miss = (x + kShotScale * p + kShotNoise * (g - x).abs() * eps - g).abs();
  const at::Tensor shot_reward = (1.0 - miss / kGoalWidth).clamp_min(0.0);
  at::Tensor reward = at::where(shoot, shot_reward, at::scalar_tensor(kMoveReward, state_options()));

  at::Tensor next_state = at::cat({at::where(shoot, x, moved), g, t + 1.0}, 1);
  return {std::move(next_state), std::move(reward), shoot};
}

}  // namespace tdp::env
