// PPO on Pendulum from scratch: trains samples/agents/pendulum_ppo_normal.pbtxt (a Gaussian
// with a state-independent scale; the env clips the torque) and evaluates the saved policy
// deterministically (the mean torque).
//
//   ./bazelw run -c opt //samples:ppo_pendulum                 # runs/pendulum/policy.pb
#include "samples/agents/ppo_main.h"

int main(int argc, char** argv) {
  tdp::agents::PpoMainDefaults d;
  d.name = "pendulum";
  d.env = "pendulum";
  d.policy = "samples/agents/pendulum_ppo_normal.pbtxt";
  auto& c = d.config;
  c.num_envs = 8;
  c.steps_per_rollout = 256;
  c.total_env_steps = 300000;
  c.epochs = 10;
  c.minibatch_size = 256;
  c.gamma = 0.95;
  c.gae_lambda = 0.95;
  c.clip_epsilon = 0.2;
  c.anneal_clip = false;
  c.entropy_coef = 0.0;
  c.learning_rate = 1e-3;
  c.reward_scale = 0.1;  // rewards reach -16 per step: keep the critic's targets near 1
  return tdp::agents::run_ppo_main(argc, argv, d);
}
