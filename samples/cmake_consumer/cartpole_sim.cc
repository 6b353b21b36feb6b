// A batched CartPole simulator (Gym's CartPole-v1 equations) that acts through an installed
// tdpolicy: tdp::actor::Actor over TensorDicts. Built with CMake's find_package(tdpolicy); see
// CMakeLists.txt.
//
//   cartpole_sim SPEC [EPISODES]     e.g. cartpole_sim policies/cartpole_categorical.pbtxt 20
#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/tensordict/tensordict.h"

namespace {

constexpr int64_t kEnvs = 8;

struct CartPole {
  float x = 0, x_dot = 0, theta = 0, theta_dot = 0;
  int steps = 0;

  void reset(std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    x = u(rng), x_dot = u(rng), theta = u(rng), theta_dot = u(rng);
    steps = 0;
  }
  // True when the episode ended (terminated, or truncated at 500 steps).
  bool step(int64_t action) {
    const float gravity = 9.8f, masspole = 0.1f, total_mass = 1.1f, length = 0.5f, tau = 0.02f;
    const float polemass_length = masspole * length;
    const float force = action == 1 ? 10.0f : -10.0f;
    const float c = std::cos(theta), s = std::sin(theta);
    const float temp = (force + polemass_length * theta_dot * theta_dot * s) / total_mass;
    const float thetaacc = (gravity * s - c * temp) / (length * (4.0f / 3.0f - masspole * c * c / total_mass));
    const float xacc = temp - polemass_length * thetaacc * c / total_mass;
    x += tau * x_dot;
    x_dot += tau * xacc;
    theta += tau * theta_dot;
    theta_dot += tau * thetaacc;
    ++steps;
    return std::abs(x) > 2.4f || std::abs(theta) > 12.0f * 2.0f * 3.14159265f / 360.0f || steps >= 500;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: cartpole_sim SPEC [EPISODES]\n";
    return 2;
  }
  const int episodes = argc > 2 ? std::atoi(argv[2]) : 20;
  auto actor = tdp::actor::Actor::load(argv[1], tdp::actor::ActorOptions().seed(1));
  if (!actor.ok()) {
    std::cerr << "cartpole_sim: " << actor.status() << "\n";
    return 1;
  }
  std::mt19937 rng(7);
  std::vector<CartPole> envs(kEnvs);
  for (auto& env : envs) env.reset(rng);
  int finished = 0;
  double total = 0;
  while (finished < episodes) {
    at::Tensor obs = at::empty({kEnvs, 4});
    auto o = obs.accessor<float, 2>();
    for (int64_t e = 0; e < kEnvs; ++e) {
      o[e][0] = envs[e].x, o[e][1] = envs[e].x_dot, o[e][2] = envs[e].theta, o[e][3] = envs[e].theta_dot;
    }
    tdp::TensorDict out = (*actor)->act(tdp::TensorDict({{"observation", obs}}, {kEnvs}));
    at::Tensor action = out.get("action").to(at::kLong).contiguous();
    at::Tensor done = at::zeros({kEnvs}, at::kBool);
    for (int64_t e = 0; e < kEnvs; ++e) {
      if (envs[e].step(action[e].item<int64_t>())) {
        if (finished < episodes) total += envs[e].steps, ++finished;
        envs[e].reset(rng);
        done[e] = true;
      }
    }
    (*actor)->reset(done);  // a recurrent policy's kept state; a no-op otherwise
  }
  std::cout << "cartpole_sim: " << argv[1] << " on CartPole: " << episodes << " episodes in " << kEnvs
            << " environments, return mean " << total / episodes << "\n";
  return 0;
}
