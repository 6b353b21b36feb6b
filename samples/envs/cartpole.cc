#include "samples/envs/cartpole.h"

#include <ATen/ATen.h>

#include <limits>

namespace tdp::env {
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

CartPole::CartPole(const EnvOptions& options)
    : BatchedEnv(options, kDefaultMaxEpisodeSteps),
      limits_(at::tensor({kXThreshold, std::numeric_limits<double>::infinity(),
                          kThetaThresholdRadians, std::numeric_limits<double>::infinity()},
                         state_options())) {}

std::vector<EntrySpec> CartPole::observation_spec() const {
  // Gym's bounds: twice the termination thresholds, so the terminating observation fits.
  const double inf = std::numeric_limits<float>::max();
  EntrySpec spec;
  spec.key = "observation";
  spec.shape = {4};
  spec.dtype = observation_dtype();
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
  return state;
}

BatchedEnv::Transition CartPole::transition(const at::Tensor& state, const TensorDict& action_td) {
  // Gym's expressions, regrouped only where IEEE arithmetic gives the same bits (a*b == b*a,
  // a - b == -b + a), so that float64 runs reproduce Gym's float64 numbers. In-place updates
  // of this step's temporaries save allocations: at small N the cost is per operation.
  const at::Tensor action = action_td.get("action");
  const at::Tensor x_dot = state.select(1, 1);
  const at::Tensor theta = state.select(1, 2);
  const at::Tensor theta_dot = state.select(1, 3);
  // 0 -> -force_mag, 1 -> +force_mag, exactly.
  const at::Tensor force = action.to(dtype()).mul_(2 * kForceMag).sub_(kForceMag);
  const at::Tensor costheta = at::cos(theta);
  const at::Tensor sintheta = at::sin(theta);

  // temp = (force + polemass_length * theta_dot^2 * sintheta) / total_mass
  const at::Tensor temp =
      theta_dot.square().mul_(kPoleMassLength).mul_(sintheta).add_(force).div_(kTotalMass);
  // thetaacc = (gravity * sintheta - costheta * temp)
  //            / (length * (4/3 - masspole * costheta^2 / total_mass))
  at::Tensor thetaacc = sintheta.mul(kGravity).sub_(costheta * temp);
  thetaacc.div_(costheta.square()
                    .mul_(kMassPole)
                    .div_(kTotalMass)
                    .neg_()
                    .add_(4.0 / 3.0)
                    .mul_(kLength));
  // xacc = temp - polemass_length * thetaacc * costheta / total_mass
  const at::Tensor xacc =
      temp - thetaacc.mul(kPoleMassLength).mul_(costheta).div_(kTotalMass);

  // Euler: every coordinate moves by tau times its old derivative.
  at::Tensor next_state = at::stack({x_dot, xacc, theta_dot, thetaacc}, 1).mul_(kTau).add_(state);
  // |x| > 2.4 or |theta| > 12 degrees; the velocities are unbounded.
  at::Tensor terminated = next_state.abs().gt(limits_).any(1, /*keepdim=*/true);
  at::Tensor reward = at::ones({num_envs(), 1}, at::kFloat);
  return {std::move(next_state), std::move(reward), std::move(terminated)};
}

}  // namespace tdp::env
