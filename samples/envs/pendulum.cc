#include "samples/envs/pendulum.h"

#include <ATen/ATen.h>

namespace tdp::env {
namespace {

constexpr double kPi = 3.141592653589793;
constexpr double kG = 10.0;
constexpr double kM = 1.0;
constexpr double kL = 1.0;
constexpr double kDt = 0.05;

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
  const at::Tensor th = state.narrow(1, 0, 1);
  return at::cat({at::cos(th), at::sin(th), state.narrow(1, 1, 1)}, 1);
}

BatchedEnv::Transition Pendulum::transition(const at::Tensor& state, const TensorDict& action_td) {
  const at::Tensor th = state.narrow(1, 0, 1);
  const at::Tensor thdot = state.narrow(1, 1, 1);
  const at::Tensor u = action_td.get("action").to(dtype()).clamp(-kMaxTorque, kMaxTorque);

  // angle_normalize(x) = ((x + pi) mod 2 pi) - pi with Python's floored modulo (at::remainder).
  const at::Tensor angle = at::remainder(th + kPi, 2 * kPi) - kPi;
  const at::Tensor costs = angle.square() + 0.1 * thdot.square() + 0.001 * u.square();

  at::Tensor newthdot =
      thdot + (3 * kG / (2 * kL) * at::sin(th) + 3.0 / (kM * kL * kL) * u) * kDt;
  newthdot = newthdot.clamp(-kMaxSpeed, kMaxSpeed);
  at::Tensor newth = th + newthdot * kDt;

  at::Tensor terminated = at::zeros({num_envs(), 1}, at::kBool);
  return {at::cat({newth, newthdot}, 1), costs.neg(), std::move(terminated)};
}

}  // namespace tdp::env
