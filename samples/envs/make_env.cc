#include "samples/envs/make_env.h"

#include <absl/status/status.h>
#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <stdexcept>

#include "samples/envs/cartpole.h"
#include "samples/envs/goal.h"
#include "samples/envs/mujoco_tasks.h"
#include "samples/envs/pendulum.h"
#include "sdk/env/env_library.h"

namespace tdp::env {

std::vector<std::string> env_names() {
  std::vector<std::string> names = {"ant-v5",      "cartpole", "goal",       "halfcheetah-v5",
                                    "hopper-v5",   "humanoid-v5", "pendulum", "walker2d-v5"};
  for (std::string& name : library_env_names()) names.push_back(std::move(name));
  return names;
}

absl::StatusOr<std::unique_ptr<BatchedEnv>> make_env(const std::string& name, const EnvOptions& options) {
  const std::string lower = absl::AsciiStrToLower(name);
  try {
    if (lower == "cartpole") return std::unique_ptr<BatchedEnv>(std::make_unique<CartPole>(options));
    if (lower == "goal") return std::unique_ptr<BatchedEnv>(std::make_unique<Goal>(options));
    if (lower == "pendulum") return std::unique_ptr<BatchedEnv>(std::make_unique<Pendulum>(options));
    if (lower == "halfcheetah-v5") return std::unique_ptr<BatchedEnv>(std::make_unique<HalfCheetah>(options));
    if (lower == "hopper-v5") return std::unique_ptr<BatchedEnv>(std::make_unique<Hopper>(options));
    if (lower == "walker2d-v5") return std::unique_ptr<BatchedEnv>(std::make_unique<Walker2d>(options));
    if (lower == "ant-v5") return std::unique_ptr<BatchedEnv>(std::make_unique<Ant>(options));
    if (lower == "humanoid-v5") return std::unique_ptr<BatchedEnv>(std::make_unique<Humanoid>(options));
  } catch (const std::invalid_argument& error) {
    return absl::InvalidArgumentError(absl::StrCat("environment \"", name, "\": ", error.what()));
  } catch (const std::runtime_error& error) {
    // A MuJoCo task whose model file cannot be loaded.
    return absl::FailedPreconditionError(absl::StrCat("environment \"", name, "\": ", error.what()));
  }
  absl::StatusOr<std::unique_ptr<BatchedEnv>> from_library = make_library_env(lower, options);
  if (from_library.ok() || !absl::IsNotFound(from_library.status())) return from_library;
  return absl::InvalidArgumentError(absl::StrCat("unknown environment \"", name, "\"; known: ",
                                                 absl::StrJoin(env_names(), ", ")));
}

}  // namespace tdp::env
