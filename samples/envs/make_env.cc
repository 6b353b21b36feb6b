#include "samples/envs/make_env.h"

#include <absl/status/status.h>
#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <stdexcept>

#include "samples/envs/cartpole.h"
#include "samples/envs/goal.h"
#include "samples/envs/pendulum.h"

namespace tdp::env {

std::vector<std::string> env_names() { return {"cartpole", "goal", "pendulum"}; }

absl::StatusOr<std::unique_ptr<BatchedEnv>> make_env(const std::string& name, const EnvOptions& options) {
  const std::string lower = absl::AsciiStrToLower(name);
  try {
    if (lower == "cartpole") return std::unique_ptr<BatchedEnv>(std::make_unique<CartPole>(options));
    if (lower == "goal") return std::unique_ptr<BatchedEnv>(std::make_unique<Goal>(options));
    if (lower == "pendulum") return std::unique_ptr<BatchedEnv>(std::make_unique<Pendulum>(options));
  } catch (const std::invalid_argument& error) {
    return absl::InvalidArgumentError(absl::StrCat("environment \"", name, "\": ", error.what()));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown environment \"", name, "\"; known: ",
                                                 absl::StrJoin(env_names(), ", ")));
}

}  // namespace tdp::env
