#include "samples/envs/pendulum.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>

namespace tdp::env {
namespace {

constexpr double kPi = 3.141592653589793;
constexpr double kG = 10.0;
constexpr double kM = 1.0;
constexpr double kL = 1.0;
constexpr double kDt = 0.05;

// Gymnasium's angle_normalize, ((x + pi) % (2 pi)) - pi, with NumPy's floored remainder: the
// C library's fmod moved into the divisor's sign, a zero taking the divisor's sign.
double angle_normalize(double x) {
  const double a = x + kPi;
  const double b = 2 * kPi;
  double mod = std::fmod(a, b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod - kPi;
}

struct Swing {
  double th, thdot, reward;
};

// Gymnasium's Pendulum.step in its order of operations. The torque arrives as float32 (the
// action space's dtype), and NumPy 2 keeps float32 where a Python float meets it, so the
// torque's own terms (u^2 times 0.001, u times 3) are float32 arithmetic; the rest is float64,
// with the C library's sin (NumPy's), so a float64 state follows Gymnasium's to the last bit.
Swing pendulum_step(double th, double thdot, float torque) {
  const float max_torque = static_cast<float>(Pendulum::kMaxTorque);
  const float u = std::clamp(torque, -max_torque, max_torque);  // a NaN stays NaN, as in np.clip
  const float torque_cost = static_cast<float>(0.001) * (u * u);
  const float torque_acc = static_cast<float>(3.0 / (kM * kL * kL)) * u;
  const double angle = angle_normalize(th);
  const double costs = angle * angle + 0.1 * (thdot * thdot) + torque_cost;
  double newthdot = thdot + (3 * kG / (2 * kL) * std::sin(th) + torque_acc) * kDt;
  newthdot = std::clamp(newthdot, -Pendulum::kMaxSpeed, Pendulum::kMaxSpeed);
  return {th + newthdot * kDt, newthdot, -costs};
}

}  // namespace

Pendulum::Pendulum(const EnvOptions& options) : BatchedEnv(options, kDefaultMaxEpisodeSteps) {}

std::vector<EntrySpec> Pendulum::observation_spec() const {
  EntrySpec spec;
  spec.key = "observation";
  spec.shape = {3};
  spec.dtype = observation_dtype();
  spec.low = {-1.0, -1.0, -kMaxSpeed};
  spec.high = {1.0, 1.0, kMaxSpeed};
  return {spec};
}

std::vector<EntrySpec> Pendulum::action_spec() const {
  EntrySpec spec;
  spec.key = "action";
  spec.shape = {1};
  spec.dtype = at::kFloat;
  spec.low = {-kMaxTorque};
  spec.high = {kMaxTorque};
  return {spec};
}

at::Tensor Pendulum::initial_state(int64_t n) {
  // Gym draws (th, thdot) per environment: U(-pi, pi) then U(-1, 1). One draw in [-1, 1)
  // scaled by (pi, 1) is the same distribution.
  at::Tensor u = at::empty({n, 2}, state_options()).uniform_(-1.0, 1.0, generator());
  return u * at::tensor({kPi, 1.0}, state_options());
}

at::Tensor Pendulum::observe(const at::Tensor& state) const {
  const int64_t n = state.size(0);
  at::Tensor observation = at::empty({n, 3}, state_options());
  AT_DISPATCH_FLOATING_TYPES(dtype(), "Pendulum::observe", [&] {
    const auto s = state.accessor<scalar_t, 2>();
    auto out = observation.accessor<scalar_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      const double th = s[i][0];
      out[i][0] = static_cast<scalar_t>(std::cos(th));
      out[i][1] = static_cast<scalar_t>(std::sin(th));
      out[i][2] = s[i][1];
    }
  });
  return observation;
}

BatchedEnv::Transition Pendulum::transition(const at::Tensor& state, const TensorDict& action_td) {
  // One loop over the environments: as tensor operations the same arithmetic costs tens of
  // microseconds a step at small N, all of it dispatch.
  const int64_t n = num_envs();
  const at::Tensor action = action_td.get("action");
  const auto torques = action.accessor<float, 2>();
  at::Tensor next_state = at::empty({n, 2}, state_options());
  at::Tensor reward = at::empty({n, 1}, state_options());
  AT_DISPATCH_FLOATING_TYPES(dtype(), "Pendulum::transition", [&] {
    const auto before = state.accessor<scalar_t, 2>();
    auto after = next_state.accessor<scalar_t, 2>();
    auto rewards = reward.accessor<scalar_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      const Swing s = pendulum_step(before[i][0], before[i][1], torques[i][0]);
      after[i][0] = static_cast<scalar_t>(s.th);
      after[i][1] = static_cast<scalar_t>(s.thdot);
      rewards[i][0] = static_cast<scalar_t>(s.reward);
    }
  });
  return {std::move(next_state), std::move(reward), at::zeros({n, 1}, at::kBool)};
}

}  // namespace tdp::env
