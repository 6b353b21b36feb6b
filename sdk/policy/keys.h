// Keys as specs write them: a string whose "/" separates nesting levels, and the keys a spec
// gives a role: its recurrent state.
//
//   tdp::NestedKey key = tdp::policy::parse_key("next/observation").value();   // ('next', 'observation')
//   std::string text = tdp::policy::key_string(key);                           // "next/observation"
//   std::vector<tdp::NestedKey> state = tdp::policy::state_keys(policy.spec);   // recurrent_gru: ['hidden']
//   std::vector<tdp::policy::StateKey> lstm = tdp::policy::recurrent_state(spec);  // {h, ("next", h)}, ...
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

// A policy's recurrent state: the declared inputs that the tree writes back, in the order of
// spec.inputs(). The one definition of "state key": the actor keeps these between calls and
// supplies them when an observation lacks them (sdk/actor/actor.h), and `tdp run` / `tdp bench`
// let the input leave them out. A declared input K is a state key when some module writes
//   - ("next", K) (an out_key "next/K", TorchRL's convention: LSTMModule and GRUModule write the
//     next state there and step_mdp moves it to K for the next step): the next call's K is what
//     the call wrote at ("next", K);
//   - or K itself, listed in that module's overwrite_keys: the next call's K is what the call
//     wrote at K.
// When both hold, ("next", K) wins (what TorchRL's rollout carries). Keys that do not parse are
// skipped (validate_spec reports them).
struct StateKey {
  NestedKey key;   // what a call reads
  NestedKey next;  // where a call writes the next call's value: ("next", key), or key itself
};
std::vector<StateKey> recurrent_state(const tdpolicy::PolicySpec& spec);
// The keys of recurrent_state(), in its order.
std::vector<NestedKey> state_keys(const tdpolicy::PolicySpec& spec);

// The declared inputs a call may leave out although they are not state: the is_init markers that
// lstm and gru modules read (missing: false, no row starts over), in the order of spec.inputs().
std::vector<NestedKey> optional_inputs(const tdpolicy::PolicySpec& spec);

}  // namespace tdp::policy
