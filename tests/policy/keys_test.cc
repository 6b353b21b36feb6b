// Keys as specs write them, and state_keys(): the one place that says which keys of a policy
// are its recurrent state (the actor, `tdp run` and `tdp bench` all ask it).
#include "sdk/policy/keys.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::parse_text_or_fail;

TEST(Keys, ParseAndPrint) {
  EXPECT_EQ(parse_key("a").value(), NestedKey("a"));
  EXPECT_EQ(parse_key("a/b/c").value(), (NestedKey{"a", "b", "c"}));
  for (const char* bad : {"", "/a", "a/", "a//b"}) EXPECT_FALSE(parse_key(bad).ok()) << bad;
  EXPECT_EQ(key_string(NestedKey{"next", "reward"}), "next/reward");
}

TEST(StateKeys, DeclaredInputsThatSomeModuleOverwritesInInputOrder) {
  const tdpolicy::PolicySpec spec = parse_text_or_fail(R"pb(
    name: "two_states" version: "1" init_seed: 1
    inputs { key: "memory/c" shape: [3] }
    inputs { key: "observation" shape: [4] }
    inputs { key: "memory/h" shape: [3] }
    output_keys: ["action"]
    module { sequential { modules {
      probabilistic_sequential {
        modules { overwrite_keys: ["memory/h", "memory/c"]
                  network { in_keys: ["observation", "memory/h", "memory/c"] out_keys: ["memory/h", "memory/c"]
                            network { lstm_cell { input_size: 4 hidden_size: 3 } } } }
        modules { overwrite_keys: ["logits"]
                  network { in_keys: ["memory/h"] out_keys: ["logits"]
                            network { linear { in_features: 3 out_features: 2 } } } }
        modules { probabilistic { in_keys: ["logits"] out_keys: ["action"] distribution: "categorical" } } } } } }
  )pb");
  // Nested sequences are searched; "logits" is overwritten but is no input, so no state.
  EXPECT_EQ(state_keys(spec), (std::vector<NestedKey>{{"memory", "c"}, {"memory", "h"}}));
}

TEST(StateKeys, ThePoliciesThatShip) {
  ASSERT_OK_AND_ASSIGN(const Policy recurrent, load_policy("policies/recurrent_gru.pbtxt"));
  EXPECT_EQ(state_keys(recurrent.spec), std::vector<NestedKey>{"hidden"});
  for (const char* path : {"policies/cartpole_categorical.pbtxt", "policies/pendulum_tanh_gaussian.pbtxt",
                           "policies/goal_hybrid.pbtxt", "policies/goal_autoregressive.pbtxt"}) {
    ASSERT_OK_AND_ASSIGN(const Policy policy, load_policy(path));
    EXPECT_TRUE(state_keys(policy.spec).empty()) << path;
  }
}

TEST(StateKeys, KeysThatDoNotParseAreSkipped) {
  tdpolicy::PolicySpec spec;
  spec.add_inputs()->set_key("a//b");
  spec.add_inputs()->set_key("hidden");
  spec.mutable_module()->add_overwrite_keys("a//b");
  spec.mutable_module()->add_overwrite_keys("hidden");
  EXPECT_EQ(state_keys(spec), std::vector<NestedKey>{"hidden"});
}

}  // namespace
}  // namespace tdp::policy
