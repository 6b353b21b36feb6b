// PPO on Goal (hybrid actions) from scratch: trains policies/goal_hybrid.pbtxt, whose
// CompositeDistribution (Categorical action type + Normal parameter) is scored jointly, and
// reports the deterministic return before and after. --policy=policies/goal_autoregressive.pbtxt
// trains the autoregressive heads instead (the parameter's Normal computed from the sampled
// type), scored jointly with get_dist_given_samples (see ppo.cc).
//
//   ./bazelw run -c opt //samples:ppo_goal                     # runs/goal/policy.pb
//   ./bazelw run -c opt //samples:ppo_goal -- --policy=policies/goal_autoregressive.pbtxt
#include "samples/agents/ppo_main.h"

int main(int argc, char** argv) {
  tdp::agents::PpoMainDefaults d;
  d.name = "goal";
  d.env = "goal";
  d.policy = "policies/goal_hybrid.pbtxt";
  auto& c = d.config;
  c.num_envs = 16;
  c.steps_per_rollout = 64;
  c.total_env_steps = 200000;
  c.epochs = 10;
  c.minibatch_size = 256;
  c.gamma = 0.99;
  c.gae_lambda = 0.95;
  c.clip_epsilon = 0.2;
  c.anneal_clip = false;
  c.entropy_coef = 0.01;
  c.learning_rate = 1e-3;
  return tdp::agents::run_ppo_main(argc, argv, d);
}
