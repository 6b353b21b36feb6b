// A user's own C++ simulator, built as a shared library and loaded by name at run time: the
// whole of what a simulator author writes to join the SDK's environments (make_env, rollout,
// tdpolicy.envs, tdpolicy.Collector) without rebuilding the SDK.
//
// MountainCar as Gymnasium's MountainCar-v0 defines it (classic_control/mountain_car.py): a car
// in a valley pushes left (0), not at all (1) or right (2) and must reach x >= 0.5; reward -1
// per step, 200 steps at most, starts at x ~ U(-0.6, -0.4) with zero velocity. With float64
// state and observations its steps equal Gymnasium's (tests/python/custom_env_test.py).
//
//   ./bazelw build //samples/custom_env:libmountain_car.so
//   tdp::env::load_env_library("bazel-bin/samples/custom_env/libmountain_car.so");
//   auto env = tdp::env::make_env("mountaincar", tdp::env::EnvOptions(16));
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "sdk/env/env_library.h"

namespace {

constexpr double kMinPosition = -1.2;
constexpr double kMaxPosition = 0.6;
constexpr double kMaxSpeed = 0.07;
constexpr double kGoalPosition = 0.5;
constexpr double kForce = 0.001;
constexpr double kGravity = 0.0025;
constexpr int64_t kMaxEpisodeSteps = 200;

class MountainCar : public tdp::env::BatchedEnv {
 public:
  explicit MountainCar(const tdp::env::EnvOptions& options) : BatchedEnv(options, kMaxEpisodeSteps) {}

  std::string name() const override { return "MountainCar"; }
  int64_t state_dim() const override { return 2; }  // position, velocity

  std::vector<tdp::env::EntrySpec> observation_spec() const override {
    tdp::env::EntrySpec spec;
    spec.key = "observation";
    spec.shape = {2};
    spec.dtype = observation_dtype();
    spec.low = {kMinPosition, -kMaxSpeed};
    spec.high = {kMaxPosition, kMaxSpeed};
    return {spec};
  }

  std::vector<tdp::env::EntrySpec> action_spec() const override {
    tdp::env::EntrySpec spec;
    spec.key = "action";
    spec.shape = {};
    spec.dtype = at::kLong;
    spec.num_categories = 3;
    return {spec};
  }

 protected:
  at::Tensor initial_state(int64_t n) override {
    at::Tensor state = at::zeros({n, 2}, state_options());
    state.select(1, 0).uniform_(-0.6, -0.4, generator());
    return state;
  }

  at::Tensor observe(const at::Tensor& state) const override { return state; }

  Transition transition(const at::Tensor& state, const tdp::TensorDict& action_td) override {
    // Gymnasium's expressions in its order: velocity += (action - 1) * force + cos(3 x) * -gravity.
    const at::Tensor position = state.select(1, 0);
    const at::Tensor push = (action_td.get("action").to(dtype()) - 1) * kForce;
    at::Tensor velocity = state.select(1, 1) + (push + at::cos(3 * position) * -kGravity);
    velocity = velocity.clamp(-kMaxSpeed, kMaxSpeed);
    const at::Tensor next_position = (position + velocity).clamp(kMinPosition, kMaxPosition);
    // At the left wall the car stops.
    velocity = at::where((next_position == kMinPosition) & (velocity < 0), at::zeros_like(velocity), velocity);
    Transition out;
    out.next_state = at::stack({next_position, velocity}, 1);
    out.terminated = ((next_position >= kGoalPosition) & (velocity >= 0)).unsqueeze(1);
    out.reward = at::full({num_envs(), 1}, -1.0, state_options());
    return out;
  }
};

std::unique_ptr<tdp::env::BatchedEnv> make(const std::string& /*name*/, const tdp::env::EnvOptions& options) {
  return std::make_unique<MountainCar>(options);
}

}  // namespace

TDP_ENV_LIBRARY(&make, "mountaincar")
