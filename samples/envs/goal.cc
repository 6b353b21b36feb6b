#include "samples/envs/goal.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>

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
  const int64_t n = state.size(0);
  at::Tensor observation = at::empty({n, 4}, state_options());
  AT_DISPATCH_FLOATING_TYPES(dtype(), "Goal::observe", [&] {
    const auto s = state.accessor<scalar_t, 2>();
    auto out = observation.accessor<scalar_t, 2>();
    const auto steps = static_cast<scalar_t>(max_episode_steps());
    for (int64_t i = 0; i < n; ++i) {
      const scalar_t x = s[i][0], g = s[i][1];
      out[i][0] = x;
      out[i][1] = g;
      out[i][2] = g - x;
      out[i][3] = s[i][2] / steps;
    }
  });
  return observation;
}

BatchedEnv::Transition Goal::transition(const at::Tensor& state, const TensorDict& action_td) {
  const int64_t n = num_envs();
  const at::Tensor action_type = action_td.get("action_type");
  const at::Tensor action_param = action_td.get("action_param");
  const auto types = action_type.accessor<int64_t, 1>();
  const auto params = action_param.accessor<float, 2>();
  // Drawn for every environment, shooting or not, so the generator advances the same way
  // whatever the actions are.
  const at::Tensor eps = at::randn({n, 1}, generator(), state_options());
  at::Tensor next_state = at::empty({n, 3}, state_options());
  at::Tensor reward = at::empty({n, 1}, state_options());
  at::Tensor terminated = at::empty({n, 1}, at::kBool);
  bool* shot = terminated.data_ptr<bool>();
  // One loop over the environments (as tensor operations the arithmetic costs tens of
  // microseconds a step at small N), in the state's dtype.
  AT_DISPATCH_FLOATING_TYPES(dtype(), "Goal::transition", [&] {
    using T = scalar_t;
    const auto before = state.accessor<T, 2>();
    const auto noise = eps.accessor<T, 2>();
    auto after = next_state.accessor<T, 2>();
    auto rewards = reward.accessor<T, 2>();
    for (int64_t i = 0; i < n; ++i) {
      const T x = before[i][0], g = before[i][1];
      // std::clamp keeps a NaN, as at::clamp does.
      const T p = std::clamp(static_cast<T>(params[i][0]), T(-1), T(1));
      shot[i] = types[i] == kShoot;
      if (shot[i]) {
        const T landing = x + static_cast<T>(kShotScale) * p +
                          static_cast<T>(kShotNoise) * std::abs(g - x) * noise[i][0];
        const T score = T(1) - std::abs(landing - g) / static_cast<T>(kGoalWidth);
        rewards[i][0] = std::max(score, T(0));
        after[i][0] = x;
      } else {
        rewards[i][0] = static_cast<T>(kMoveReward);
        after[i][0] = std::clamp(x + static_cast<T>(kMoveScale) * p, T(-1), T(1));
      }
      after[i][1] = g;
      after[i][2] = before[i][2] + T(1);
    }
  });
  return {std::move(next_state), std::move(reward), std::move(terminated)};
}

}  // namespace tdp::env
