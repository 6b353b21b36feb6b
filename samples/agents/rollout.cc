// rollout: runs a policy spec in one of the sample simulators for a number of complete episodes
// and prints the returns and the stepping speed: the quickest check that a spec acts sensibly
// in its environment, and how fast a C++ loop drives it.
//
//   bazel run //samples:rollout -- --policy=policies/pendulum_tanh_gaussian.pbtxt --episodes=64
//   rollout --policy=my_policy.pbtxt --env=cartpole --num_envs=32 --interaction=random --seed=3
//
// prints, e.g.
//   cartpole_categorical on CartPole: 100 episodes in 16 envs, return mean 9.41 std 0.712018 min 8
//   max 11, 1072 env steps in 0.00 s (1120646 steps/s)
// Exit status: 0 success, 1 a bad flag, spec or spec/environment mismatch (the reason on stderr).
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "samples/agents/episodes.h"
#include "samples/envs/make_env.h"
#include "sdk/actor/actor.h"
#include "sdk/actor/cpu_allocator.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/policy/signature.h"
#include "sdk/policy/keys.h"
#include "tdpolicy/spec.pb.h"

constexpr char kDefaultPolicy[] = "policies/cartpole_categorical.pbtxt";

ABSL_FLAG(std::string, policy, "",
          "policy spec (.pbtxt, .pb, .json); a relative path is taken from the directory `bazel run` "
          "was called in (default: policies/cartpole_categorical.pbtxt)");
ABSL_FLAG(std::string, env, "",
          "cartpole, pendulum, goal, halfcheetah-v5, hopper-v5, walker2d-v5 or ant-v5 (default: the environment the "
          "policy's file name starts with)");
ABSL_FLAG(int64_t, episodes, 100, "complete episodes to run, shared out over the environments");
ABSL_FLAG(int64_t, num_envs, 16, "environments stepped together (the actor's batch)");
ABSL_FLAG(std::string, interaction, "deterministic", "mode, median, mean, random or deterministic");
ABSL_FLAG(uint64_t, seed, 0, "seeds the environments and the actor's sampling");

namespace {

bool readable(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// `bazel run` starts the binary in its runfiles tree, not where the user typed the command, so
// a relative --policy is resolved against BUILD_WORKING_DIRECTORY. The default spec is a data
// dependency: found in the runfiles tree (cwd under `bazel run`, or next to the binary).
absl::StatusOr<std::string> policy_path(const char* argv0) {
  std::string flag = absl::GetFlag(FLAGS_policy);
  if (!flag.empty()) {
    const char* working_dir = std::getenv("BUILD_WORKING_DIRECTORY");
    if (flag[0] != '/' && working_dir != nullptr && *working_dir != '\0') flag = absl::StrCat(working_dir, "/", flag);
    return flag;
  }
  std::vector<std::string> candidates = {kDefaultPolicy, absl::StrCat(argv0, ".runfiles/tdpolicy/", kDefaultPolicy)};
  if (const char* runfiles = std::getenv("RUNFILES_DIR")) {
    candidates.push_back(absl::StrCat(runfiles, "/tdpolicy/", kDefaultPolicy));
  }
  for (const std::string& candidate : candidates) {
    if (readable(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("--policy: not given, and the default ", kDefaultPolicy,
                                          " is not in the runfiles (looked in: ", absl::StrJoin(candidates, ", "),
                                          "); pass --policy=FILE"));
}

// --env, else the environment the policy's file name starts with ("pendulum_tanh_gaussian.pbtxt").
absl::StatusOr<std::string> env_name(const std::string& policy) {
  const std::string flag = absl::GetFlag(FLAGS_env);
  if (!flag.empty()) return flag;
  const size_t slash = policy.find_last_of('/');
  const std::string file = absl::AsciiStrToLower(slash == std::string::npos ? policy : policy.substr(slash + 1));
  for (const std::string& name : tdp::env::env_names()) {
    if (absl::StartsWith(file, name)) return name;
  }
  return absl::InvalidArgumentError(absl::StrCat("--env: required, since the policy file name \"", file,
                                                 "\" does not start with an environment name (",
                                                 absl::StrJoin(tdp::env::env_names(), ", "), ")"));
}

// Every input the spec declares must be an observation entry of the environment with the same
// per-environment shape and dtype (recurrent state excepted: the actor supplies it), and every
// action key the environment reads must be among the spec's outputs.
absl::Status check_compatible(const std::string& path, const tdp::actor::Actor& actor, const tdp::env::BatchedEnv& env) {
  const std::vector<tdp::env::EntrySpec> observations = env.observation_spec();
  const tdp::policy::Signature& signature = actor.signature();
  for (const tdp::policy::TensorSignature& input : signature.inputs) {
    if (input.state) continue;
    const auto entry = std::find_if(observations.begin(), observations.end(),
                                    [&](const tdp::env::EntrySpec& e) { return e.key == input.key; });
    if (entry == observations.end()) {
      std::vector<std::string> keys;
      for (const auto& e : observations) keys.push_back(tdp::policy::key_string(e.key));
      return absl::InvalidArgumentError(absl::StrCat(path, ": input \"", input.name, "\" is not an observation of ",
                                                     env.name(), ", which provides: ", absl::StrJoin(keys, ", ")));
    }
    if (input.shape != entry->shape) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": input \"", input.name, "\" has shape ",
                                                     tdp::shape_to_string(input.shape), " but ", env.name(), "'s \"",
                                                     input.name, "\" has shape ", tdp::shape_to_string(entry->shape)));
    }
    if (input.dtype != entry->dtype) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": input \"", input.name, "\" has dtype ",
                                                     c10::toString(input.dtype), " but ", env.name(), "'s \"",
                                                     input.name, "\" is ", c10::toString(entry->dtype)));
    }
  }
  for (const tdp::env::EntrySpec& action : env.action_spec()) {
    if (signature.find_output(action.key) == nullptr) {
      std::vector<std::string> outputs;
      for (const auto& output : signature.outputs) outputs.push_back(output.name);
      return absl::InvalidArgumentError(absl::StrCat(path, ": writes no \"", tdp::policy::key_string(action.key),
                                                     "\", an action ", env.name(), " reads; its outputs: ",
                                                     absl::StrJoin(outputs, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> rollout(const char* argv0) {
  const int64_t episodes = absl::GetFlag(FLAGS_episodes);
  const int64_t num_envs = absl::GetFlag(FLAGS_num_envs);
  if (episodes < 1) return absl::InvalidArgumentError(absl::StrCat("--episodes: must be at least 1, got ", episodes));
  if (num_envs < 1) return absl::InvalidArgumentError(absl::StrCat("--num_envs: must be at least 1, got ", num_envs));
  tdp::nn::InteractionType interaction;
  try {
    interaction = tdp::nn::interaction_type_from_str(absl::GetFlag(FLAGS_interaction));
  } catch (const std::invalid_argument& error) {
    return absl::InvalidArgumentError(absl::StrCat("--interaction: ", error.what()));
  }
  const uint64_t seed = absl::GetFlag(FLAGS_seed);

  absl::StatusOr<std::string> path = policy_path(argv0);
  if (!path.ok()) return path.status();
  absl::StatusOr<std::string> name = env_name(*path);
  if (!name.ok()) return name.status();
  auto actor = tdp::actor::Actor::load(*path, tdp::actor::ActorOptions().seed(seed).interaction_type(interaction));
  if (!actor.ok()) return actor.status();
  // Observations in the precision the policy declares: an export with DoubleToFloat in its
  // transforms reads Gymnasium's float64 observations.
  tdp::env::EnvOptions options(num_envs);
  for (const tdp::policy::TensorSignature& input : (*actor)->signature().inputs) {
    if (input.key == tdp::NestedKey("observation") && input.dtype == at::kDouble) options.observation_dtype(at::kDouble);
  }
  auto env = tdp::env::make_env(*name, options);
  if (!env.ok()) return absl::InvalidArgumentError(absl::StrCat("--env: ", env.status().message()));
  if (absl::Status compatible = check_compatible(*path, **actor, **env); !compatible.ok()) return compatible;

  tdp::agents::EpisodeStats stats;
  try {
    stats = tdp::agents::run_episodes(**env, **actor, interaction, episodes, seed);
  } catch (const std::exception& error) {  // e.g. an interaction type the policy's distribution lacks
    return absl::InvalidArgumentError(absl::StrCat(*path, " on ", (*env)->name(), " with --interaction=",
                                                   std::string(tdp::nn::to_string(interaction)), ": ", error.what()));
  }
  return absl::StrFormat("%s on %s: %d episodes in %d envs, return mean %.6g std %.6g min %.6g max %.6g, "
                         "%d env steps in %.2f s (%.0f steps/s)",
                         (*actor)->spec().name(), (*env)->name(), stats.returns.size(), num_envs, stats.mean_return(),
                         stats.std_return(), stats.min_return(), stats.max_return(), stats.env_steps, stats.seconds,
                         stats.steps_per_second());
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "runs a policy spec in a sample simulator for complete episodes and prints the returns.\n"
      "usage: rollout [--policy=SPEC] [--env=cartpole|pendulum|goal|hopper-v5|...] [--episodes=M] [--num_envs=N]\n"
      "               [--interaction=deterministic|random|mode|mean|median] [--seed=S]");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::cerr << "rollout: unexpected argument \"" << positional[1] << "\"; the policy is given with --policy\n";
    return 1;
  }
  // Keeps freed activations mapped between steps of large batches (see cpu_allocator.h).
  if (absl::Status tuned = tdp::actor::tune_cpu_allocator(); !tuned.ok()) std::cerr << "rollout: " << tuned << "\n";
  const absl::StatusOr<std::string> summary = rollout(argv[0]);
  if (!summary.ok()) {
    std::cerr << "rollout: " << summary.status() << "\n";
    return 1;
  }
  std::cout << *summary << "\n";
  return 0;
}
