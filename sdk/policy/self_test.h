// make_self_test: records what a policy computes from example inputs (and the log-probs of
// given actions) as a tdpolicy.SelfTest, which the spec carries and run_self_tests (policy.h)
// recomputes at load time.
//
//   auto test = tdp::policy::make_self_test(policy, example_inputs, example_actions);
//   *policy.spec.add_self_tests() = *test;
//   tdp::policy::save_policy(policy, "actor.pb");
//   auto checked = tdp::policy::load_policy("actor.pb", {/*run_self_tests=*/true});   // recomputes it
#pragma once

#include <absl/status/statusor.h>

#include "sdk/policy/policy.h"
#include "sdk/tensordict/tensordict.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::policy {

// Outputs are taken under the DETERMINISTIC interaction type, in the composite_lp_aggregate()
// mode in force (probabilistic modules fix their log-prob keys when built, so recording and
// checking use the mode the policy was loaded under); `actions` may be empty.
absl::StatusOr<tdpolicy::SelfTest> make_self_test(const Policy& policy, const TensorDict& inputs,
                                                  const TensorDict& actions);

}  // namespace tdp::policy
