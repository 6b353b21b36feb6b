// Keys as specs write them: a string whose "/" separates nesting levels, and the keys a spec
// gives a role: its recurrent state.
//
//   tdp::NestedKey key = tdp::policy::parse_key("next/observation").value();   // ('next', 'observation')
//   std::string text = tdp::policy::key_string(key);                           // "next/observation"
//   std::vector<tdp::NestedKey> state = tdp::policy::state_keys(policy.spec);   // recurrent_gru: ['hidden']
#pragma once

#include <absl/status/statusor.h>

#include <string>
#include <vector>

#include "sdk/tensordict/nested_key.h"

namespace tdpolicy {
class PolicySpec;
}  // namespace tdpolicy

namespace tdp::policy {

// An empty string, or an empty level ("a//b", "/a"), is an error.
absl::StatusOr<NestedKey> parse_key(const std::string& text);
std::string key_string(const NestedKey& key);

// A policy's recurrent state: the keys it both reads and writes back, that is the declared
// inputs that some module of the tree overwrites on purpose (lists in overwrite_keys), in the
// order of spec.inputs(). The one definition of "state key": the actor keeps these between calls
// and supplies them when an observation lacks them (sdk/actor/actor.h), and `tdp run` / `tdp
// bench` let the input leave them out. Keys that do not parse are skipped (validate_spec reports
// them).
std::vector<NestedKey> state_keys(const tdpolicy::PolicySpec& spec);

}  // namespace tdp::policy
