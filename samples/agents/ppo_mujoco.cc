// PPO on Gymnasium's MuJoCo tasks in C++ (samples/envs/mujoco_tasks.h) with CleanRL's
// ppo_continuous_action recipe: one environment, 2048 steps per rollout, 10 epochs of 32
// minibatches, gamma 0.99, GAE lambda 0.95, clip 0.2 (also on the value loss), Adam 3e-4
// annealed to 0, gradient norm 0.5, tanh MLPs 64x64 with orthogonal init and a
// state-independent log-std, observation normalization (inside the policy, saved with it) and
// reward normalization (Gymnasium's wrappers: every observation updates the statistics as it
// arrives), both clipped to 10, actions clipped to [-1, 1] by the environment, the
// time limit ending returns as a termination does, 1M steps; then 10 deterministic evaluation episodes of the saved policy.
//
//   ./bazelw run -c opt //samples:ppo_mujoco -- --env=HalfCheetah-v5   # runs/mujoco/halfcheetah-v5/
#include "samples/agents/ppo_main.h"

int main(int argc, char** argv) {
  tdp::agents::PpoMainDefaults d;
  d.name = "mujoco";
  d.env = "halfcheetah-v5";
  d.policy_by_env = {
      {"halfcheetah-v5", "samples/agents/mujoco/halfcheetah_ppo.pbtxt"},
      {"hopper-v5", "samples/agents/mujoco/hopper_ppo.pbtxt"},
      {"walker2d-v5", "samples/agents/mujoco/walker2d_ppo.pbtxt"},
      {"ant-v5", "samples/agents/mujoco/ant_ppo.pbtxt"},
      {"humanoid-v5", "samples/agents/mujoco/humanoid_ppo.pbtxt"},
  };
  d.eval_episodes = 10;
  auto& c = d.config;
  c.num_envs = 1;
  c.steps_per_rollout = 2048;
  c.total_env_steps = 1000000;
  c.epochs = 10;
  c.minibatch_size = 64;
  c.gamma = 0.99;
  c.gae_lambda = 0.95;
  c.clip_epsilon = 0.2;
  c.anneal_clip = false;
  c.entropy_coef = 0.0;
  c.value_coef = 0.5;
  c.learning_rate = 3e-4;
  c.max_grad_norm = 0.5;
  c.normalize_observations = true;
  c.normalize_rewards = true;
  c.reward_clip = 10.0;
  c.clip_value_loss = true;
  c.bootstrap_truncated = false;
  c.orthogonal_init = true;
  // The training return reported (and plotted) is the mean of the last 100 episodes, the window
  // openrlbenchmark averages for CleanRL's published figures.
  c.recent_episodes = 100;
  return tdp::agents::run_ppo_main(argc, argv, d);
}
