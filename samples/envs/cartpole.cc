#include "samples/envs/cartpole.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <cmath>
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

struct PoleState {
  double x, x_dot, theta, theta_dot;
};

// Gymnasium's CartPole.step in float64, its expressions in its order of operations (NumPy's
// float64 cos and sin are the C library's, as std::cos and std::sin are), so a float64 state
// follows Gymnasium's to the last bit.
PoleState cartpole_step(const PoleState& s, int64_t action) {
  const double force = action == 1 ? kForceMag : -kForceMag;
  const double costheta = std::cos(s.theta);
  const double sintheta = std::sin(s.theta);
  const double temp = (force + kPoleMassLength * (s.theta_dot * s.theta_dot) * sintheta) / kTotalMass;
  const double thetaacc = (kGravity * sintheta - costheta * temp) /
                          (kLength * (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
  const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
  // Euler: every coordinate moves by tau times its old derivative.
  return {s.x + kTau * s.x_dot, s.x_dot + kTau * xacc, s.theta + kTau * s.theta_dot,
          s.theta_dot + kTau * thetaacc};
}

}  // namespace

CartPole::CartPole(const EnvOptions& options) : BatchedEnv(options, kDefaultMaxEpisodeSteps) {}

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
  // One loop over the environments: as tensor operations the same arithmetic costs tens of
  // microseconds a step at small N, all of it dispatch.
  const int64_t n = num_envs();
  const at::Tensor action = action_td.get("action");
  at::Tensor next_state = at::empty({n, 4}, state_options());
  at::Tensor reward = at::empty({n, 1}, at::kFloat);
  at::Tensor terminated = at::empty({n, 1}, at::kBool);
  float* rewards = reward.data_ptr<float>();
  bool* ended = terminated.data_ptr<bool>();
  AT_DISPATCH_FLOATING_TYPES(dtype(), "CartPole::transition", [&] {
    const auto before = state.accessor<scalar_t, 2>();
    const auto pushes = action.accessor<int64_t, 1>();
    auto after = next_state.accessor<scalar_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      const PoleState s = cartpole_step({before[i][0], before[i][1], before[i][2], before[i][3]}, pushes[i]);
      after[i][0] = static_cast<scalar_t>(s.x);
      after[i][1] = static_cast<scalar_t>(s.x_dot);
      after[i][2] = static_cast<scalar_t>(s.theta);
      after[i][3] = static_cast<scalar_t>(s.theta_dot);
      // Gymnasium's test, on the state as kept (a float32 state is the float64 one rounded).
      const double x = after[i][0], theta = after[i][2];
      ended[i] = x < -kXThreshold || x > kXThreshold || theta < -kThetaThresholdRadians ||
                 theta > kThetaThresholdRadians;
      rewards[i] = 1;
    }
  });
  return {std::move(next_state), std::move(reward), std::move(terminated)};
}

}  // namespace tdp::env
