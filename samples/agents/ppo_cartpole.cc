// PPO on CartPole from scratch: trains policies/cartpole_categorical.pbtxt's network with
// RL Zoo's PPO settings for CartPole-v1 until it is solved (a training mean of 500, else the
// 100,000-step budget) and evaluates the saved policy deterministically.
//
//   ./bazelw run -c opt //samples:ppo_cartpole                 # runs/cartpole/policy.pb
//   ./bazelw run -c opt //samples:ppo_cartpole -- --seed=3 --quiet
#include "samples/agents/ppo_main.h"

int main(int argc, char** argv) {
  tdp::agents::PpoMainDefaults d;
  d.name = "cartpole";
  d.env = "cartpole";
  d.policy = "policies/cartpole_categorical.pbtxt";
  auto& c = d.config;  // rl-baselines3-zoo's ppo CartPole-v1 hyperparameters
  c.num_envs = 8;
  c.steps_per_rollout = 32;
  c.total_env_steps = 100000;
  c.epochs = 20;
  c.minibatch_size = 256;
  c.gamma = 0.98;
  c.gae_lambda = 0.8;
  c.clip_epsilon = 0.2;  // annealed with the learning rate
  c.entropy_coef = 0.0;
  c.learning_rate = 1e-3;
  // Solved: the last 20 training episodes all reached the time limit. --stop_at_return=inf trains
  // the whole budget.
  c.stop_at_return = 500;
  return tdp::agents::run_ppo_main(argc, argv, d);
}
