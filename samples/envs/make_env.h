// make_env: a BatchedEnv chosen by name at run time, for command lines and configs that name
// the simulator ("cartpole", "pendulum", "goal", "halfcheetah-v5", ..., in any case).
//
//   absl::StatusOr<std::unique_ptr<tdp::env::BatchedEnv>> env =
//       tdp::env::make_env("CartPole", tdp::env::EnvOptions(/*num_envs=*/16));
//   if (!env.ok()) return env.status();       // names the known environments
//   tdp::TensorDict td = (*env)->reset(/*seed=*/0);
//   std::string name = (*env)->name();        // "CartPole"
#pragma once

#include <absl/status/statusor.h>

#include <memory>
#include <string>
#include <vector>

#include "sdk/env/batched_env.h"

namespace tdp::env {

// The names make_env knows, lower-case: "cartpole", "goal", "pendulum", the MuJoCo tasks
// "halfcheetah-v5", "hopper-v5", "walker2d-v5", "ant-v5", "humanoid-v5", then those of the env libraries loaded
// with load_env_library (sdk/env/env_library.h; the SDK's own names come first).
std::vector<std::string> env_names();

// An unknown name gives InvalidArgument listing env_names(); options the environment rejects
// (num_envs < 1, a non-float dtype) give InvalidArgument with the environment's message; a
// MuJoCo model file that cannot be loaded gives FailedPrecondition naming the file.
absl::StatusOr<std::unique_ptr<BatchedEnv>> make_env(const std::string& name, const EnvOptions& options);

}  // namespace tdp::env
