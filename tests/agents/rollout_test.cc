// The `rollout` binary run as a user runs it: the summary line for each ready policy in its
// environment, relative paths under `bazel run`, and exit status 1 with the reason for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/testing/files.h"

namespace {

namespace test_util = tdp::test_util;

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

using test_util::runfile;
using Result = test_util::CommandResult;

// `env` is prepended to the command line ("NAME=value ").
Result rollout(const std::vector<std::string>& args, const std::string& env = "") {
  return test_util::run_command(runfile("samples/agents/rollout"), args, "", env);
}

constexpr char kNumber[] = "-?[0-9.e+-]+";

std::string summary_regex(const std::string& head) {
  const std::string n = kNumber;
  return head + ", return mean " + n + " std (" + n + "|nan) min " + n + " max " + n +
         ", [0-9]+ env steps in [0-9.]+ s \\([0-9]+ steps/s\\)\n";
}

// The "return mean X" of a summary line.
double mean_return(const std::string& summary) {
  const size_t at = summary.find("return mean ");
  return at == std::string::npos ? std::nan("") : std::stod(summary.substr(at + 12));
}

TEST(Rollout, DefaultPolicyRunsCartPoleAndPrintsOneSummaryLine) {
  const Result r = rollout({});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex(summary_regex("cartpole_categorical on CartPole: 100 episodes in 16 envs")));
  EXPECT_EQ(r.err, "");
}

TEST(Rollout, GuessesTheEnvironmentFromThePolicyFileName) {
  Result r = rollout({"--policy=" + runfile("policies/pendulum_tanh_gaussian.pbtxt"), "--episodes=8", "--num_envs=4"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex(summary_regex("pendulum_tanh_gaussian on Pendulum: 8 episodes in 4 envs")));
  // Pendulum never terminates: 8 episodes in 4 envs are two 200-step episodes each.
  EXPECT_THAT(r.out, HasSubstr(", 1600 env steps in "));

  r = rollout({"--policy=" + runfile("policies/goal_hybrid.pbtxt"), "--episodes=5", "--interaction=random", "--seed=3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex(summary_regex("goal_hybrid on Goal: 5 episodes in 16 envs")));
}

// The committed trained policies still act as they did when PPO saved them: loading, the
// module tree and the distributions all sit between that file and these returns.
TEST(Rollout, CommittedTrainedPoliciesKeepTheirReturns) {
  const Result cartpole = rollout({"--policy=" + runfile("samples/agents/trained/cartpole_ppo.pb"), "--episodes=16"});
  ASSERT_EQ(cartpole.exit_code, 0) << cartpole.err;
  EXPECT_THAT(cartpole.out, HasSubstr("on CartPole: 16 episodes in 16 envs, return mean 500 std 0 min 500 max 500"));
  const Result pendulum = rollout({"--policy=" + runfile("samples/agents/trained/pendulum_ppo.pb"), "--episodes=16"});
  ASSERT_EQ(pendulum.exit_code, 0) << pendulum.err;
  const Result goal = rollout({"--policy=" + runfile("samples/agents/trained/goal_ppo.pb"), "--episodes=32"});
  ASSERT_EQ(goal.exit_code, 0) << goal.err;
  EXPECT_GT(mean_return(pendulum.out), -300) << pendulum.out;  // untrained: about -1200
  EXPECT_GT(mean_return(goal.out), 0.3) << goal.out;           // untrained: about -0.4
  // The file name names the environment: rollout finds HalfCheetah-v5 itself.
  const Result cheetah = rollout({"--policy=" + runfile("samples/agents/trained/halfcheetah-v5_ppo.pb"), "--episodes=8"});
  ASSERT_EQ(cheetah.exit_code, 0) << cheetah.err;
  EXPECT_THAT(cheetah.out, HasSubstr("halfcheetah_ppo on HalfCheetah-v5: 8 episodes"));
  EXPECT_GT(mean_return(cheetah.out), 2500) << cheetah.out;  // 3444 when saved; untrained: about -100
}

TEST(Rollout, SameSeedSameReturns) {
  const std::vector<std::string> args = {"--interaction=random", "--seed=7", "--episodes=20", "--num_envs=8"};
  const std::string a = rollout(args).out, b = rollout(args).out;
  // Everything up to the timing is reproducible.
  EXPECT_EQ(a.substr(0, a.find(" env steps")), b.substr(0, b.find(" env steps")));
}

TEST(Rollout, RelativePolicyPathIsTakenFromTheBazelRunDirectory) {
  const Result r = rollout({"--policy=policies/recurrent_gru.pbtxt", "--env=cartpole", "--episodes=4"},
                           "BUILD_WORKING_DIRECTORY=" + test_util::shell_quoted(runfile("")) + " ");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex(summary_regex("recurrent_gru on CartPole: 4 episodes in 16 envs")));
}

TEST(Rollout, PolicyThatDoesNotFitTheEnvironmentExitsOneNamingTheKeyAndShapes) {
  const std::string pendulum = runfile("policies/pendulum_tanh_gaussian.pbtxt");
  Result r = rollout({"--policy=" + pendulum, "--env=CartPole"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "rollout: INVALID_ARGUMENT: " + pendulum +
                       ": input \"observation\" has shape [3] but CartPole's \"observation\" has shape [4]\n");

  const std::string cartpole = runfile("policies/cartpole_categorical.pbtxt");
  r = rollout({"--policy=" + cartpole, "--env=goal"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "rollout: INVALID_ARGUMENT: " + cartpole +
                       ": writes no \"action_type\", an action Goal reads; its outputs: action, action_log_prob\n");
}

TEST(Rollout, BadFlagsExitOneWithTheReason) {
  Result r = rollout({"--policy=" + runfile("policies/recurrent_gru.pbtxt")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "rollout: INVALID_ARGUMENT: --env: required, since the policy file name \"recurrent_gru.pbtxt\" does not "
            "start with an environment name (ant-v5, cartpole, goal, halfcheetah-v5, hopper-v5, humanoid-v5, "
            "pendulum, walker2d-v5)\n");

  r = rollout({"--env=mountaincar"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "rollout: INVALID_ARGUMENT: --env: unknown environment \"mountaincar\"; known: ant-v5, cartpole, goal, "
            "halfcheetah-v5, hopper-v5, humanoid-v5, pendulum, walker2d-v5\n");

  r = rollout({"--episodes=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "rollout: INVALID_ARGUMENT: --episodes: must be at least 1, got 0\n");

  r = rollout({"--interaction=median"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("on CartPole with --interaction=median: "));

  r = rollout({"--policy=/nonexistent/cartpole.pbtxt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/cartpole.pbtxt"));
}

}  // namespace
