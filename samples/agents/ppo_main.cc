// The shared body of the PPO binaries. It is their main(), so it prints (progress on stderr,
// the summary on stdout); the training library (ppo.cc) itself never does.
#include "samples/agents/ppo_main.h"

#include <ATen/Parallel.h>
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/status/status.h>
#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_split.h>
#include <absl/strings/string_view.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "samples/agents/episodes.h"
#include "samples/agents/plot.h"
#include "samples/envs/make_env.h"
#include "sdk/actor/actor.h"
#include "sdk/actor/cpu_allocator.h"
#include "sdk/policy/policy.h"

// Negative or empty values keep the binary's own default.
ABSL_FLAG(int64_t, total_steps, -1, "environment steps to train for (default: the binary's)");
ABSL_FLAG(int64_t, num_envs, -1, "environments stepped together while training");
ABSL_FLAG(int64_t, steps_per_rollout, -1, "steps per environment between updates");
ABSL_FLAG(int64_t, epochs, -1, "passes over each rollout");
ABSL_FLAG(int64_t, minibatch_size, -1, "transitions per gradient step");
ABSL_FLAG(double, learning_rate, -1, "Adam's initial learning rate (annealed linearly to 0)");
ABSL_FLAG(double, entropy_coef, -1, "weight of the entropy bonus");
ABSL_FLAG(double, gamma, -1, "discount");
ABSL_FLAG(std::string, part_entropy_coefs, "",
          "per action part of a composite policy, KEY=WEIGHT[,KEY=WEIGHT...] (action_type=0.1): the weight of that "
          "part's entropy instead of --entropy_coef");
ABSL_FLAG(double, entropy_boost, -1,
          "the entropy weights start this many times larger and decay linearly over --entropy_boost_fraction");
ABSL_FLAG(double, entropy_boost_fraction, -1, "the fraction of training over which --entropy_boost decays");
ABSL_FLAG(double, gae_lambda, -1, "GAE's lambda (1: Monte Carlo returns minus the critic's value)");
ABSL_FLAG(double, value_coef, -1, "weight of the critic's loss");
ABSL_FLAG(uint64_t, seed, 0, "seeds the environments, the action draws and the critic; the evaluation uses seed + 1");
ABSL_FLAG(bool, quiet, false, "no progress line (the final summary is still printed)");
ABSL_FLAG(std::string, output_dir, "",
          "where policy.pb, curve.csv and curve.png go (default runs/<name>/, relative to "
          "$BUILD_WORKING_DIRECTORY under bazel run)");
ABSL_FLAG(std::string, policy, "", "policy spec whose architecture is trained (default: the binary's)");
ABSL_FLAG(std::string, env, "", "environment to train on, a make_env name (ppo_mujoco: HalfCheetah-v5, Hopper-v5, "
          "Walker2d-v5, Ant-v5; default: the binary's)");
ABSL_FLAG(int64_t, eval_episodes, -1, "deterministic evaluation episodes after training (default 100)");
ABSL_FLAG(double, stop_at_return, std::numeric_limits<double>::quiet_NaN(),
          "stop training once the mean return of the last 20 training episodes (ppo_mujoco: 100) reaches this "
          "(default: the "
          "binary's: 500 for ppo_cartpole, the maximum; none for the others; inf trains for --total_steps)");

namespace tdp::agents {
namespace {

namespace fs = std::filesystem;

// `bazel run` starts the binary in its runfiles tree; paths the user typed are relative to
// where they ran bazel.
std::string user_path(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (cwd == nullptr || path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(cwd) / path).string();
}

// A workspace file shipped as a data dependency: in the runfiles tree when there is one
// (bazel run, bazel test, or bazel-bin/... started from anywhere), else relative to the cwd.
std::string workspace_file(const std::string& relative, const char* argv0) {
  std::vector<std::string> roots;
  if (const char* dir = std::getenv("RUNFILES_DIR")) roots.push_back(dir);
  if (const char* dir = std::getenv("TEST_SRCDIR")) roots.push_back(dir);
  roots.push_back(std::string(argv0) + ".runfiles");
  for (const auto& root : roots) {
    const fs::path candidate = fs::path(root) / "tdpolicy" / relative;
    std::error_code ignored;
    if (fs::exists(candidate, ignored)) return candidate.string();
  }
  return relative;
}

struct Progress {
  bool quiet = false;
  bool tty = false;
  int64_t every = 1;  // non-TTY: one line per `every` iterations
  int64_t total_iterations = 0;

  static std::string line(const IterationStats& s, int64_t total) {
    return absl::StrFormat(
        "iter %d/%d  steps %d  %.0f steps/s  return %.2f (%d episodes)  pg %.4f  value %.4f  "
        "entropy %.3f  kl %.4f  lr %.2g",
        s.iteration, total, s.env_steps, s.steps_per_second(), s.mean_episode_return, s.episodes,
        s.policy_loss, s.value_loss, s.entropy, s.approx_kl, s.learning_rate);
  }

  void operator()(const IterationStats& s) const {
    if (quiet) return;
    const bool last = s.iteration == total_iterations;
    if (tty) {
      // \33[K clears what a longer previous line left behind.
      std::fprintf(stderr, "\r%s\33[K%s", line(s, total_iterations).c_str(), last ? "\n" : "");
    } else if (s.iteration % every == 0 || s.iteration == 1 || last) {
      std::fprintf(stderr, "%s\n", line(s, total_iterations).c_str());
    }
    std::fflush(stderr);
  }
};

absl::Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<EpisodeStats> evaluate(const std::string& policy_path, const std::string& env_name,
                                      int64_t episodes, uint64_t seed) {
  auto actor = actor::Actor::load(policy_path, actor::ActorOptions().seed(seed));
  if (!actor.ok()) return actor.status();
  // One environment per episode (up to 100): every episode starts together, and the whole
  // evaluation is a few hundred batched steps.
  auto env = env::make_env(env_name, env::EnvOptions(std::min<int64_t>(episodes, 100)));
  if (!env.ok()) return env.status();
  return run_episodes(**env, **actor, nn::InteractionType::kDeterministic, episodes, seed);
}

int fail(const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int run_ppo_main(int argc, char** argv, const PpoMainDefaults& defaults) {
  absl::SetProgramUsageMessage(absl::StrCat("Trains a PPO agent on ", defaults.env, " from scratch: ",
                                            argv[0], " [--total_steps=N] [--seed=S] [--quiet] [--output_dir=DIR]"));
  absl::ParseCommandLine(argc, argv);
  // Tiny networks: one thread is faster than LibTorch's pool, and fair to other work.
  at::set_num_threads(1);
  // Keeps freed minibatch activations mapped between steps (see cpu_allocator.h).
  if (absl::Status tuned = actor::tune_cpu_allocator(); !tuned.ok()) std::cerr << tuned << "\n";

  std::string env_name = absl::AsciiStrToLower(absl::GetFlag(FLAGS_env));
  if (env_name.empty()) env_name = defaults.env;
  std::string default_policy = defaults.policy;
  std::string run_name = defaults.name;
  if (!defaults.policy_by_env.empty()) {
    const auto it = defaults.policy_by_env.find(env_name);
    if (it == defaults.policy_by_env.end()) {
      std::vector<std::string> known;
      for (const auto& [name, spec] : defaults.policy_by_env) known.push_back(name);
      return fail(absl::InvalidArgumentError(absl::StrCat("--env: this binary trains on ", absl::StrJoin(known, ", "),
                                                          "; got '", absl::GetFlag(FLAGS_env), "'")));
    }
    default_policy = it->second;
    run_name = absl::StrCat(defaults.name, "/", env_name);
  }
  const std::string flag_policy = absl::GetFlag(FLAGS_policy);
  const std::string spec_path =
      flag_policy.empty() ? workspace_file(default_policy, argv[0]) : user_path(flag_policy);
  auto policy = policy::load_policy(spec_path);
  if (!policy.ok()) return fail(policy.status());

  // The binary's defaults, then the policy's own (by spec name), then the flags.
  PpoConfig config = defaults.config;
  if (auto it = defaults.per_policy.find(policy->spec.name()); it != defaults.per_policy.end()) it->second(config);
  if (int64_t v = absl::GetFlag(FLAGS_total_steps); v >= 0) config.total_env_steps = v;
  if (int64_t v = absl::GetFlag(FLAGS_num_envs); v >= 0) config.num_envs = v;
  if (int64_t v = absl::GetFlag(FLAGS_steps_per_rollout); v >= 0) config.steps_per_rollout = v;
  if (int64_t v = absl::GetFlag(FLAGS_epochs); v >= 0) config.epochs = v;
  if (int64_t v = absl::GetFlag(FLAGS_minibatch_size); v >= 0) config.minibatch_size = v;
  if (double v = absl::GetFlag(FLAGS_learning_rate); v >= 0) config.learning_rate = v;
  if (double v = absl::GetFlag(FLAGS_entropy_coef); v >= 0) config.entropy_coef = v;
  if (double v = absl::GetFlag(FLAGS_gamma); v >= 0) config.gamma = v;
  if (double v = absl::GetFlag(FLAGS_gae_lambda); v >= 0) config.gae_lambda = v;
  if (double v = absl::GetFlag(FLAGS_value_coef); v >= 0) config.value_coef = v;
  if (double v = absl::GetFlag(FLAGS_entropy_boost); v >= 0) config.entropy_boost = v;
  if (double v = absl::GetFlag(FLAGS_entropy_boost_fraction); v >= 0) config.entropy_boost_fraction = v;
  if (const std::string parts = absl::GetFlag(FLAGS_part_entropy_coefs); !parts.empty()) {
    config.part_entropy_coefs.clear();
    for (absl::string_view item : absl::StrSplit(parts, ',')) {
      std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
      double weight = 0;
      if (kv.first.empty() || !absl::SimpleAtod(kv.second, &weight)) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("--part_entropy_coefs: expected KEY=WEIGHT[,KEY=WEIGHT...], got '", item, "'")));
      }
      config.part_entropy_coefs[kv.first] = weight;
    }
  }
  config.seed = absl::GetFlag(FLAGS_seed);
  if (double v = absl::GetFlag(FLAGS_stop_at_return); !std::isnan(v)) config.stop_at_return = v;
  int64_t eval_episodes = absl::GetFlag(FLAGS_eval_episodes);
  if (eval_episodes < 0) eval_episodes = defaults.eval_episodes;
  if (eval_episodes == 0) return fail(absl::InvalidArgumentError("--eval_episodes must be positive"));
  if (absl::Status s = validate_config(config, config.num_envs); !s.ok()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(s.message(), " (see --num_envs, --steps_per_rollout, "
                                                        "--minibatch_size, --total_steps, ...)")));
  }

  std::string output_dir = absl::GetFlag(FLAGS_output_dir);
  output_dir = user_path(output_dir.empty() ? "runs/" + run_name : output_dir);
  std::error_code mkdir_error;
  fs::create_directories(output_dir, mkdir_error);
  if (mkdir_error) {
    return fail(absl::UnavailableError(
        absl::StrCat("--output_dir: cannot create ", output_dir, ": ", mkdir_error.message())));
  }
  const std::string policy_out = (fs::path(output_dir) / "policy.pb").string();
  const std::string csv_out = (fs::path(output_dir) / "curve.csv").string();
  const std::string png_out = (fs::path(output_dir) / "curve.png").string();
  const std::string episodes_out = (fs::path(output_dir) / "episodes.csv").string();

  auto env = env::make_env(env_name, env::EnvOptions(config.num_envs));
  if (!env.ok()) return fail(env.status());
  // The untrained policy, evaluated the same way: the "before" of the summary.
  auto before = evaluate(spec_path, env_name, eval_episodes, config.seed + 1);
  if (!before.ok()) return fail(before.status());

  Progress progress;
  progress.quiet = absl::GetFlag(FLAGS_quiet);
  progress.tty = isatty(fileno(stderr)) != 0;
  progress.total_iterations = config.num_iterations();
  progress.every = std::max<int64_t>(1, progress.total_iterations / 20);
  if (!progress.quiet) {
    std::fprintf(stderr, "PPO on %s: %s, %d envs x %d steps per rollout, %d iterations, %d env steps\n",
                 (*env)->name().c_str(), spec_path.c_str(), static_cast<int>(config.num_envs),
                 static_cast<int>(config.steps_per_rollout), static_cast<int>(config.num_iterations()),
                 static_cast<int>(config.num_iterations() * config.batch_size()));
  }
  auto result = train_ppo(**env, *policy, config, progress);
  if (!result.ok()) return fail(result.status());

  if (absl::Status s = policy::save_policy(*policy, policy_out); !s.ok()) return fail(s);
  if (absl::Status s = write_text(csv_out, curve_csv(result->iterations)); !s.ok()) return fail(s);
  if (absl::Status s = write_text(episodes_out, episodes_csv(result->episode_returns)); !s.ok()) return fail(s);
  PlotSeries curve{"mean training-episode return (last " + std::to_string(config.recent_episodes) + ")", {}, {}};
  for (const auto& it : result->iterations) {
    curve.x.push_back(static_cast<double>(it.env_steps));
    curve.y.push_back(it.mean_episode_return);
  }
  PlotOptions plot;
  plot.title = absl::StrCat("PPO on ", (*env)->name(), " (seed ", config.seed, ")");
  plot.x_label = "environment steps";
  plot.y_label = "episode return";
  if (absl::Status s = write_line_plot_png(png_out, {curve}, plot); !s.ok()) return fail(s);

  // Reload what was written: the evaluated policy is the file, not the in-memory module.
  auto after = evaluate(policy_out, env_name, eval_episodes, config.seed + 1);
  if (!after.ok()) return fail(after.status());

  // When training first reached its best mean return: the time to solve CartPole (500).
  const IterationStats* best = nullptr;
  for (const auto& it : result->iterations) {
    if (!std::isnan(it.mean_episode_return) && (best == nullptr || it.mean_episode_return > best->mean_episode_return)) {
      best = &it;
    }
  }
  std::printf(
      "PPO %s: trained %lld env steps in %.1f s (%.0f steps/s)%s; deterministic evaluation over %lld "
      "episodes: mean %.2f, min %.2f, max %.2f (untrained: mean %.2f, min %.2f, max %.2f)\n",
      (*env)->name().c_str(), static_cast<long long>(result->env_steps), result->wall_seconds,
      result->wall_seconds > 0 ? result->env_steps / result->wall_seconds : 0.0,
      result->stopped_early ? " (stopped at --stop_at_return)" : "", static_cast<long long>(after->returns.size()),
      after->mean_return(), after->min_return(), after->max_return(), before->mean_return(), before->min_return(),
      before->max_return());
  if (best != nullptr) {
    std::printf("training return (mean of the last %lld episodes) first reached its best, %.2f, after %lld env steps "
                "in %.1f s\n",
                static_cast<long long>(config.recent_episodes), best->mean_episode_return,
                static_cast<long long>(best->env_steps), best->wall_seconds);
  }
  if (!result->iterations.empty()) {
    std::printf("training return at the end (mean of the last %lld episodes): %.2f\n",
                static_cast<long long>(config.recent_episodes), result->iterations.back().mean_episode_return);
  }
  std::printf("wrote %s, %s, %s, %s\n", policy_out.c_str(), csv_out.c_str(), episodes_out.c_str(), png_out.c_str());
  return 0;
}

}  // namespace tdp::agents
