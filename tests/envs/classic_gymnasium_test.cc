// CartPole and Pendulum against Gymnasium's CartPole-v1 and Pendulum-v1, from the episodes
// gymnasium_classic_reference.py records with the venv's Gymnasium at test time
// (gymnasium_reference_test.sh, TDP_GYMNASIUM_REFERENCE_DIR):
// - one step from every reference state: float64 states, observations and rewards equal to the
//   last bit (the C++ environments evaluate Gymnasium's expressions in its order, with the same
//   C library's sin and cos), float32 ones within float32's rounding;
// - whole episodes replayed in float64: every observation, reward, termination and truncation
//   equal. (Float32 runs are not replayed whole: open-loop replay of an unstable system lets
//   float32 rounding grow past any useful tolerance; envs_test.cc checks their time limits.)
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "samples/envs/cartpole.h"
#include "samples/envs/pendulum.h"

namespace tdp::env {
namespace {

struct RefStep {
  std::vector<double> action, state, observation;
  double reward = 0;
  bool terminated = false, truncated = false;
};

struct RefEpisode {
  std::string env;
  std::vector<double> init;
  std::vector<RefStep> steps;
};

std::vector<double> read_doubles(std::istringstream& in, int n) {
  std::vector<double> values(n);
  for (double& v : values) in >> v;
  return values;
}

std::vector<RefEpisode> load_episodes(const std::string& env, int action_dim, int state_dim,
                                      int obs_dim) {
  const char* dir = std::getenv("TDP_GYMNASIUM_REFERENCE_DIR");
  if (dir == nullptr) {
    ADD_FAILURE() << "TDP_GYMNASIUM_REFERENCE_DIR is not set (run through gymnasium_reference_test.sh)";
    return {};
  }
  const std::string path = std::string(dir) + "/classic_control.txt";
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << "cannot open " << path;
  std::vector<RefEpisode> episodes;
  std::string line;
  bool keep = false;
  while (std::getline(file, line)) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "episode") {
      std::string name;
      in >> name;
      keep = name == env;
      if (keep) episodes.push_back({name, {}, {}});
    } else if (keep && tag == "init") {
      episodes.back().init = read_doubles(in, state_dim);
    } else if (keep && tag == "step") {
      RefStep step;
      step.action = read_doubles(in, action_dim);
      step.state = read_doubles(in, state_dim);
      step.observation = read_doubles(in, obs_dim);
      int terminated = 0, truncated = 0;
      in >> step.reward >> terminated >> truncated;
      EXPECT_FALSE(in.fail()) << line;
      step.terminated = terminated;
      step.truncated = truncated;
      episodes.back().steps.push_back(step);
    }
  }
  return episodes;
}

at::Tensor rows(const std::vector<std::vector<double>>& values) {
  const int64_t width = static_cast<int64_t>(values.at(0).size());
  at::Tensor out = at::empty({static_cast<int64_t>(values.size()), width}, at::kDouble);
  for (size_t i = 0; i < values.size(); ++i) out[i] = at::tensor(values[i], at::kDouble);
  return out;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

struct Tolerance {
  double state, observation, reward;
};

// Every reference step at once: one environment per step, started from the reference state
// before that step, stepped once with the reference action. This checks the equations at every
// state the episodes visit, free of the amplification a long replay adds (see Episodes).
void check_one_step(BatchedEnv& env, const std::vector<RefEpisode>& episodes, bool discrete,
                    Tolerance tol) {
  std::vector<std::vector<double>> before, after, observation, action;
  std::vector<double> reward;
  std::vector<int64_t> terminated;
  for (const RefEpisode& episode : episodes) {
    const std::vector<double>* previous = &episode.init;
    for (const RefStep& step : episode.steps) {
      before.push_back(*previous);
      after.push_back(step.state);
      observation.push_back(step.observation);
      action.push_back(step.action);
      reward.push_back(step.reward);
      terminated.push_back(step.terminated);
      previous = &step.state;
    }
  }
  const int64_t n = static_cast<int64_t>(before.size());
  ASSERT_EQ(env.num_envs(), n);
  env.reset_to(rows(before));
  TensorDict td({n});
  if (discrete) {
    td.set("action", rows(action).squeeze(1).to(at::kLong));
  } else {
    td.set("action", rows(action).to(at::kFloat));
  }
  TensorDict out = env.step(td);
  const at::Tensor ref_terminated = at::tensor(terminated, at::kLong).to(at::kBool).unsqueeze(1);
  ASSERT_TRUE(out.get("terminated").equal(ref_terminated))
      << "steps whose termination differs: "
      << at::nonzero(out.get("terminated") != ref_terminated);
  const at::Tensor running = ~ref_terminated.squeeze(1);
  const double state_error =
      max_abs_diff(env.state().index({running}), rows(after).index({running}));
  const double observation_error = max_abs_diff(out.get("final_observation"), rows(observation));
  // Gymnasium's rewards are float64; the environment's are in its observation dtype.
  const double reward_error = max_abs_diff(
      out.get("reward"), at::tensor(reward, at::kDouble).unsqueeze(1).to(out.get("reward").scalar_type()));
  EXPECT_LE(state_error, tol.state);
  EXPECT_LE(observation_error, tol.observation);
  EXPECT_LE(reward_error, tol.reward);
  std::cerr << env.name() << " " << c10::toString(env.dtype()) << " one step from " << n
            << " reference states: max error state " << state_error << ", observation "
            << observation_error << ", reward " << reward_error << "\n";
}

// Replays whole episodes, all of one environment side by side: every observation and reward
// equal to the reference's, and termination and truncation (the 500- and 200-step limits) on
// exactly the reference steps.
void check_episodes(BatchedEnv& env, const std::vector<RefEpisode>& episodes, bool discrete) {
  const int64_t n = static_cast<int64_t>(episodes.size());
  ASSERT_EQ(env.num_envs(), n);
  std::vector<std::vector<double>> init;
  size_t longest = 0;
  for (const RefEpisode& episode : episodes) {
    init.push_back(episode.init);
    longest = std::max(longest, episode.steps.size());
  }
  env.reset_to(rows(init));
  for (size_t t = 0; t < longest; ++t) {
    // Finished episodes get action 0: their environments have auto-reset and are not compared.
    at::Tensor action = discrete ? at::zeros({n}, at::kLong) : at::zeros({n, 1}, at::kFloat);
    for (int64_t e = 0; e < n; ++e) {
      if (t < episodes[e].steps.size()) action[e] = episodes[e].steps[t].action[0];
    }
    TensorDict td({n});
    td.set("action", action);
    TensorDict out = env.step(td);
    for (int64_t e = 0; e < n; ++e) {
      if (t >= episodes[e].steps.size()) continue;
      const RefStep& ref = episodes[e].steps[t];
      const std::string where = env.name() + " episode " + std::to_string(e) + " step " +
                                std::to_string(t + 1);
      ASSERT_EQ(out.get("terminated")[e][0].item<bool>(), ref.terminated) << where;
      ASSERT_EQ(out.get("truncated")[e][0].item<bool>(), ref.truncated) << where;
      ASSERT_TRUE(out.get("final_observation")[e].equal(
          at::tensor(ref.observation, at::kDouble).to(out.get("final_observation").scalar_type())))
          << where << ": " << out.get("final_observation")[e];
      ASSERT_EQ(out.get("reward")[e][0].item<float>(), static_cast<float>(ref.reward)) << where;
    }
  }
}

std::vector<RefEpisode> cartpole_episodes() { return load_episodes("cartpole", 1, 4, 4); }
std::vector<RefEpisode> pendulum_episodes() { return load_episodes("pendulum", 1, 2, 3); }

int64_t total_steps(const std::vector<RefEpisode>& episodes) {
  int64_t n = 0;
  for (const RefEpisode& episode : episodes) n += static_cast<int64_t>(episode.steps.size());
  return n;
}

TEST(Gymnasium, TheRecordHasEpisodesOfBothEnvironments) {
  auto cartpole = cartpole_episodes();
  auto pendulum = pendulum_episodes();
  ASSERT_GE(cartpole.size(), 5u);
  ASSERT_GE(pendulum.size(), 3u);
  // At least one CartPole episode reaches the 500-step limit and one terminates early.
  bool truncated = false, terminated = false;
  for (const auto& e : cartpole) {
    truncated |= e.steps.size() == 500 && e.steps.back().truncated;
    terminated |= e.steps.size() < 500 && e.steps.back().terminated;
  }
  EXPECT_TRUE(truncated);
  EXPECT_TRUE(terminated);
}

// Float64 states give Gymnasium's numbers exactly: no tolerance. Float32 states are each
// float64 step rounded, started from the reference state rounded.
TEST(Gymnasium, CartPoleFloat64StepsAreGymnasiumsToTheBit) {
  auto episodes = cartpole_episodes();
  CartPole env(EnvOptions(total_steps(episodes)).dtype(at::kDouble));
  check_one_step(env, episodes, /*discrete=*/true, {0.0, 0.0, 0.0});
}

TEST(Gymnasium, CartPoleFloat32StepsAreWithinFloat32Rounding) {
  auto episodes = cartpole_episodes();
  CartPole env(EnvOptions(total_steps(episodes)));
  check_one_step(env, episodes, /*discrete=*/true, {1e-6, 1e-6, 0.0});
}

TEST(Gymnasium, PendulumFloat64StepsAreGymnasiumsToTheBit) {
  auto episodes = pendulum_episodes();
  Pendulum env(EnvOptions(total_steps(episodes)).dtype(at::kDouble));
  check_one_step(env, episodes, /*discrete=*/false, {0.0, 0.0, 0.0});
}

TEST(Gymnasium, PendulumFloat32StepsAreWithinFloat32Rounding) {
  auto episodes = pendulum_episodes();
  Pendulum env(EnvOptions(total_steps(episodes)));
  // A spinning pendulum's angle winds up to tens of radians, where float32's spacing is 2e-6.
  check_one_step(env, episodes, /*discrete=*/false, {1e-5, 1e-5, 1e-4});
}

TEST(Gymnasium, CartPoleFloat64EpisodesAreGymnasiums) {
  auto episodes = cartpole_episodes();
  CartPole env(EnvOptions(static_cast<int64_t>(episodes.size())).dtype(at::kDouble));
  check_episodes(env, episodes, /*discrete=*/true);
}

TEST(Gymnasium, PendulumFloat64EpisodesAreGymnasiums) {
  auto episodes = pendulum_episodes();
  Pendulum env(EnvOptions(static_cast<int64_t>(episodes.size())).dtype(at::kDouble));
  check_episodes(env, episodes, /*discrete=*/false);
}

}  // namespace
}  // namespace tdp::env
