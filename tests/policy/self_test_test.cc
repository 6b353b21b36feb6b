// Self-test vectors: make_self_test records what a policy computes, the spec carries it through
// save and load, run_self_tests recomputes it, and a tampered value fails naming the field.
#include "sdk/policy/self_test.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::temp_path;

LoadOptions checking() {
  LoadOptions options;
  options.run_self_tests = true;
  return options;
}

// The pendulum actor with one self test at batch 6, saved to `path` (and kept in `*out` when
// given). A failed load, recording or save fails the test: call it under ASSERT_NO_FATAL_FAILURE.
void pendulum_with_self_test(const std::string& path, Policy* out = nullptr) {
  Policy local;
  Policy& policy = out != nullptr ? *out : local;
  ASSERT_OK_AND_ASSIGN(policy, load_policy("policies/pendulum_tanh_gaussian.pbtxt"));
  at::manual_seed(8);
  TensorDict inputs({{"observation", at::randn({6, 3})}}, {6});
  TensorDict actions({{"action", at::rand({6, 1}) * 3.8 - 1.9}}, {6});
  ASSERT_OK_AND_ASSIGN(*policy.spec.add_self_tests(), make_self_test(policy, inputs, actions));
  ASSERT_OK(save_policy(policy, path));
}

TEST(SelfTest, RecordsInputsOutputsAndLogProbs) {
  Policy policy;
  ASSERT_NO_FATAL_FAILURE(pendulum_with_self_test(temp_path("recorded.pb"), &policy));
  ASSERT_EQ(policy.spec.self_tests_size(), 1);
  const tdpolicy::SelfTest& test = policy.spec.self_tests(0);
  ASSERT_EQ(test.inputs_size(), 1);
  EXPECT_EQ(test.inputs(0).name(), "observation");
  ASSERT_EQ(test.expected_outputs_size(), 2);
  EXPECT_EQ(test.expected_outputs(0).name(), "action");
  EXPECT_EQ(test.expected_outputs(1).name(), "action_log_prob");
  ASSERT_EQ(test.actions_size(), 1);
  ASSERT_EQ(test.expected_log_probs_size(), 1);
  EXPECT_EQ(test.expected_log_probs(0).name(), "action_log_prob");
  // The log-probs are those of the given actions, not of the deterministic ones.
  EXPECT_NE(test.expected_log_probs(0).tensor().data(), test.expected_outputs(1).tensor().data());
}

TEST(SelfTest, PassesAfterSaveAndLoadInEveryForm) {
  ASSERT_NO_FATAL_FAILURE(pendulum_with_self_test(temp_path("checked.pb")));
  ASSERT_OK_AND_ASSIGN(Policy loaded, load_policy(temp_path("checked.pb"), checking()));
  ASSERT_EQ(loaded.spec.self_tests_size(), 1);
  for (const char* extension : {".pbtxt", ".json"}) {
    const std::string path = temp_path(std::string("checked") + extension);
    ASSERT_OK(save_policy(loaded, path));
    EXPECT_OK(load_policy(path, checking())) << extension;
  }
}

// The autoregressive Goal actor (two probabilistic modules, the parameter computed from the
// sampled type) records its outputs and the per-part log-probs of given actions, saves, and
// passes its self test on load; a tampered parameter log-prob fails it.
TEST(SelfTest, AutoregressivePolicyRecordsAndPasses) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/goal_autoregressive.pbtxt"));
  at::manual_seed(9);
  TensorDict inputs({{"observation", at::randn({6, 4})}}, {6});
  TensorDict actions({{"action_type", at::randint(0, 2, {6}, at::kLong)}, {"action_param", at::randn({6, 1})}}, {6});
  ASSERT_OK_AND_ASSIGN(*policy.spec.add_self_tests(), make_self_test(policy, inputs, actions));
  const tdpolicy::SelfTest& test = policy.spec.self_tests(0);
  std::vector<std::string> names;
  for (const auto& lp : test.expected_log_probs()) names.push_back(lp.name());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"action_param_log_prob", "action_type_log_prob"}));
  const std::string path = temp_path("goal_autoregressive_self_test.pb");
  ASSERT_OK(save_policy(policy, path));
  ASSERT_OK(load_policy(path, checking()));

  for (auto& lp : *policy.spec.mutable_self_tests(0)->mutable_expected_log_probs()) {
    if (lp.name() != "action_param_log_prob") continue;
    ASSERT_OK_AND_ASSIGN(at::Tensor t, from_tensor_proto(lp.tensor()));
    *lp.mutable_tensor() = to_tensor_proto(t + 0.5);
  }
  ASSERT_OK(save_policy(policy, path));
  EXPECT_FALSE(load_policy(path, checking()).ok());
}

TEST(SelfTest, ATamperedOutputFailsNamingTheField) {
  const std::string path = temp_path("tampered_output.pb");
  ASSERT_NO_FATAL_FAILURE(pendulum_with_self_test(path));
  auto spec = read_spec(path);
  ASSERT_OK(spec);
  auto* expected = spec->mutable_self_tests(0)->mutable_expected_outputs(0);
  ASSERT_OK_AND_ASSIGN(at::Tensor value, from_tensor_proto(expected->tensor()));
  value[3][0] += 0.01;
  *expected->mutable_tensor() = to_tensor_proto(value);
  ASSERT_OK(write_spec(*spec, path));

  EXPECT_OK(load_policy(path)) << "without run_self_tests the spec loads";
  auto policy = load_policy(path, checking());
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(policy.status().message());
  EXPECT_THAT(message, ::testing::StartsWith(path + ": self_tests[0].expected_outputs[0] (\"action\"): differs from "
                                                    "the expected value by up to 0.0"));
  EXPECT_THAT(message, ::testing::EndsWith(" (atol 1e-05, rtol 1e-05)"));
}

TEST(SelfTest, ATamperedLogProbFailsNamingTheField) {
  const std::string path = temp_path("tampered_log_prob.pb");
  ASSERT_NO_FATAL_FAILURE(pendulum_with_self_test(path));
  auto spec = read_spec(path);
  ASSERT_OK(spec);
  auto* expected = spec->mutable_self_tests(0)->mutable_expected_log_probs(0);
  ASSERT_OK_AND_ASSIGN(at::Tensor value, from_tensor_proto(expected->tensor()));
  value[0] -= 1.0;
  *expected->mutable_tensor() = to_tensor_proto(value);
  ASSERT_OK(write_spec(*spec, path));
  auto policy = load_policy(path, checking());
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(std::string(policy.status().message()),
              ::testing::StartsWith(path + ": self_tests[0].expected_log_probs[0] (\"action_log_prob\"): differs "
                                           "from the expected value by up to 1"));
}

TEST(SelfTest, DifferentWeightsFailTheTest) {
  // The self test of one seed's weights does not pass with another seed's.
  const std::string path = temp_path("reseeded.pbtxt");
  Policy policy;
  ASSERT_NO_FATAL_FAILURE(pendulum_with_self_test(temp_path("reseed_source.pb"), &policy));
  policy.spec.set_init_seed(12345);
  ASSERT_OK(write_spec(policy.spec, path));  // the header only: weights from the new seed
  auto loaded = load_policy(path, checking());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              ::testing::StartsWith(path + ": self_tests[0].expected_outputs[0] (\"action\"): differs"));
}

TEST(SelfTest, AMissingOutputAndABadShapeAreNamed) {
  const std::string path = temp_path("renamed.pb");
  ASSERT_NO_FATAL_FAILURE(pendulum_with_self_test(path));
  auto spec = read_spec(path);
  ASSERT_OK(spec);
  spec->mutable_self_tests(0)->mutable_expected_outputs(1)->set_name("value");
  ASSERT_OK(write_spec(*spec, path));
  EXPECT_EQ(load_policy(path, checking()).status().message(),
            path + ": self_tests[0].expected_outputs[1] (\"value\"): the policy did not write this key");

  spec->mutable_self_tests(0)->mutable_expected_outputs(1)->set_name("action_log_prob");
  *spec->mutable_self_tests(0)->mutable_expected_outputs(0)->mutable_tensor() = to_tensor_proto(at::zeros({6}));
  ASSERT_OK(write_spec(*spec, path));
  EXPECT_EQ(load_policy(path, checking()).status().message(),
            path + ": self_tests[0].expected_outputs[0] (\"action\"): computed shape [6, 1] but expected [6]");
}

}  // namespace
}  // namespace tdp::policy
