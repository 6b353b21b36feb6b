// The usage examples at the top of the sdk/spec headers (keys.h, policy.h, self_test.h,
// tensor_proto.h; networks.h is tested with tdp::nn), compiled and run as written, so that they
// stay true. An example that returns early on an error sits in a function of its own; the names
// it takes from its context (policy, example_inputs, weight, ...) are defined around it, and
// the files it writes go to the test's scratch folder instead of /tmp or the working directory.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/self_test.h"
#include "sdk/policy/tensor_proto.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::temp_path;

TEST(HeaderExamplesTest, Keys) {
  ASSERT_OK_AND_ASSIGN(const Policy policy, load_policy("policies/recurrent_gru.pbtxt"));

  tdp::NestedKey key = tdp::policy::parse_key("next/observation").value();   // ('next', 'observation')
  std::string text = tdp::policy::key_string(key);                           // "next/observation"
  std::vector<tdp::NestedKey> state = tdp::policy::state_keys(policy.spec);   // recurrent_gru: ['hidden']

  EXPECT_EQ(key, (NestedKey{"next", "observation"}));
  EXPECT_EQ(text, "next/observation");
  EXPECT_EQ(state, std::vector<NestedKey>{"hidden"});
}

int policy_example(const std::string& saved_path, TensorDict& out) {
  absl::StatusOr<tdp::policy::Policy> policy = tdp::policy::load_policy("policies/cartpole_categorical.pbtxt");
  if (!policy.ok()) { std::cerr << policy.status() << "\n"; return 1; }
  tdp::TensorDict td({{"observation", at::randn({8, 4})}}, {8});
  policy->module->forward(td);                       // writes the spec's output_keys
  absl::Status saved = tdp::policy::save_policy(*policy, saved_path);   // one binary file
  out = td;
  return saved.ok() ? 0 : 1;
}

TEST(HeaderExamplesTest, Policy) {
  const std::string path = temp_path("cartpole.pb");
  TensorDict out;
  ASSERT_EQ(policy_example(path, out), 0);
  EXPECT_EQ(out.get("action").sizes(), at::IntArrayRef({8}));
  EXPECT_TRUE(out.contains("action_log_prob"));
  EXPECT_TRUE(load_policy(path).ok());
}

TEST(HeaderExamplesTest, SelfTest) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/pendulum_tanh_gaussian.pbtxt"));
  at::manual_seed(3);
  const TensorDict example_inputs({{"observation", at::randn({4, 3})}}, {4});
  const TensorDict example_actions({{"action", at::rand({4, 1}) * 3.8 - 1.9}}, {4});
  const std::string saved_path = temp_path("actor.pb");

  auto test = tdp::policy::make_self_test(policy, example_inputs, example_actions);
  ASSERT_TRUE(test.ok()) << test.status();
  *policy.spec.add_self_tests() = *test;
  ASSERT_TRUE(tdp::policy::save_policy(policy, saved_path).ok());
  auto checked = tdp::policy::load_policy(saved_path, {/*run_self_tests=*/true});   // recomputes it
  EXPECT_TRUE(checked.ok()) << checked.status();
}

TEST(HeaderExamplesTest, TensorProto) {
  at::Tensor weight = at::randn({3, 5});
  weight[1][2] = std::nan("");

  tdpolicy::TensorProto proto = tdp::policy::to_tensor_proto(weight);
  absl::StatusOr<at::Tensor> back = tdp::policy::from_tensor_proto(proto);
  // back->equal(weight), same dtype, same bits (NaN payloads included)

  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->scalar_type(), weight.scalar_type());
  EXPECT_TRUE(at::equal(back->view(at::kInt), weight.view(at::kInt)));
}

}  // namespace
}  // namespace tdp::policy
