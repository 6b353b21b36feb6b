#include "samples/envs/cartpole.h"

#include <ATen/ATen.h>

#include <limits>

namespace tdp::envs {
namespace {

constexpr double kGravity = 9.8;
constexpr double kMassCart = 1.0;
constexpr double kMassPole = 0.1;
constexpr double kTotalMass = kMassPole + kMassCart;
constexpr double kLength = 0.5;  // half the pole's length
constexpr double kPoleMassLength = kMassPole * kLength;
constexpr double kForceMag = 10.0;
constexpr double kTau = 0.02;

}  // namespace

CartPole::CartPole(const EnvOptions& options) : BatchedEnv(options, kDefaultMaxEpisodeSteps) {}

std::vector<EntrySpec> CartPole::observation_spec() const {
  // Gym's bounds: twice the termination thresholds, so the terminating observation fits.
  const double inf = std::numeric_limits<float>::max();
  EntrySpec spec;
  spec.key = "observation";
  spec.shape = {4};
  spec.dtype = at::kFloat;
  spec.low = {-2 * kXThreshold, -inf, -2 * kThetaThresholdRadians, -inf};
  spec.high = {2 * kXThreshold, inf, 2 * kThetaThresholdRadians, inf};
  return {spec};
}

std::vector<EntrySpec> CartPole::action_spec() const {
  EntrySpec spec;
  spec.key = "action";
  spec.shape = {};
  spec.dtype = at::kLong;
  spec.num_categories = 2;
  return {spec};
}

at::Tensor CartPole::initial_state(int64_t n) {
  return at::empty({n, 4}, state_options()).uniform_(-0.05, 0.05, generator());
}

at::Tensor CartPole::observe(const at::Tensor& state) const {
  // A copy even in float32: a caller writing into its observation must not move the cart.
  return state.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
}

BatchedEnv::Transition CartPole::transition(const at::Tensor& state, const TensorDict& action_td) {
  // The operations follow Gym's order so that float64 runs reproduce Gym's float64 numbers.
  const at::Tensor action = action_td.get("action");
  const at::Tensor x = state.select(1, 0);
  const at::Tensor x_dot = state.select(1, 1);
  const at::Tensor theta = state.select(1, 2);
  const at::Tensor theta_dot = state.select(1, 3);
  // 0 -> -force_mag, 1 -> +force_mag, exactly.
  const at::Tensor force = action.to(dtype()).mul(2 * kForceMag).sub_(kForceMag);
  const at::Tensor costheta = at::cos(theta);
  const at::Tensor sintheta = at::sin(theta);

  const at::Tensor temp =
      (force + kPoleMassLength * theta_dot.square() * sintheta) / kTotalMass;
  const at::Tensor thetaacc =
      (kGravity * sintheta - costheta * temp) /
      (kLength * (4.0 / 3.0 - kMassPole * costheta.square() / kTotalMass));
  const at::Tensor xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;

  // Euler: positions move with the old velocities.
  at::Tensor next_state = at::stack({x + kTau * x_dot, x_dot + kTau * xacc,
                                     theta + kTau * theta_dot, theta_dot + kTau * thetaacc},
                                    1);
  const at::Tensor nx = next_state.select(1, 0);
  const at::Tensor ntheta = next_state.select(1, 2);
  at::Tensor terminated = (nx < -kXThreshold)
                              .logical_or_(nx > kXThreshold)
                              .logical_or_(ntheta < -kThetaThresholdRadians)
                              .logical_or_(ntheta > kThetaThresholdRadians)
                              .unsqueeze(1);
  at::Tensor reward = at::ones({num_envs(), 1}, at::kFloat);
  return {std::move(next_state), std::move(reward), std::move(terminated)};
}

}  // namespace tdp::envs
