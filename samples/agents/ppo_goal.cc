// PPO on Goal (hybrid actions) from scratch: trains policies/goal_hybrid.pbtxt, whose
// CompositeDistribution (Categorical action type + Normal parameter) is scored jointly, and
// reports the deterministic return before and after. --policy=policies/goal_autoregressive.pbtxt
// trains the autoregressive heads instead (the parameter's Normal computed from the sampled
// type), scored jointly with get_dist_given_samples (see ppo.cc), with its own entropy weights.
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
  // The autoregressive heads: the type's entropy weighs 1.0 at first and 0.02 after 30% of
  // training, the parameter's 0.01 then 0.0002. PPO otherwise settles the type within ~20k steps,
  // before moving toward the goal is learned on both sides of it, and the policy then dribbles on
  // one side only (0.75; see the README's PPO section).
  d.per_policy["goal_autoregressive"] = [](tdp::agents::PpoConfig& a) {
    a.part_entropy_coefs = {{"action_type", 0.02}, {"action_param", 0.0002}};
    a.entropy_boost = 50;
    a.entropy_boost_fraction = 0.3;
  };
  return tdp::agents::run_ppo_main(argc, argv, d);
}
