// run_ppo_main: the body shared by the PPO sample binaries (ppo_cartpole, ppo_pendulum,
// ppo_goal, ppo_mujoco). It parses the common flags, trains a policy spec's architecture from scratch with
// train_ppo, prints a live progress line on stderr, then saves the trained policy (spec +
// parameters, one file), reloads it with Actor::load and evaluates it deterministically with
// run_episodes: the figure it prints is what `rollout` sees for the same file.
//
//   int main(int argc, char** argv) {
//     tdp::agents::PpoMainDefaults d;
//     d.name = "cartpole";  d.env = "cartpole";  d.policy = "policies/cartpole_categorical.pbtxt";
//     return tdp::agents::run_ppo_main(argc, argv, d);   // flags override d.config
//   }
//
// Writes under --output_dir (default runs/<name>/, relative to $BUILD_WORKING_DIRECTORY under
// `bazel run`): policy.pb (the trained policy), curve.csv (one line per iteration) and
// curve.png (mean training-episode return against env steps).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "samples/agents/ppo.h"

namespace tdp::agents {

struct PpoMainDefaults {
  std::string name;    // runs/<name>/, and in messages
  std::string env;     // a make_env name: "cartpole", "pendulum", "goal"
  std::string policy;  // spec path relative to the workspace (found in the runfiles)
  // For binaries that train on several environments (--env picks one, any case): each
  // environment's spec, in place of `policy`; runs go to runs/<name>/<env>/.
  std::map<std::string, std::string> policy_by_env;
  PpoConfig config;
  // By policy spec name: changes to `config` for that policy (flags still override them).
  std::map<std::string, std::function<void(PpoConfig&)>> per_policy;
  int64_t eval_episodes = 100;
};

// Returns the process exit code: 0 on success, 1 on any error (printed on stderr with the
// flag or file it concerns).
int run_ppo_main(int argc, char** argv, const PpoMainDefaults& defaults);

}  // namespace tdp::agents
