// Signature: what a loaded policy reads and what a call of it returns, worked out once when the
// policy is loaded, so that every consumer (the Actor and its backends, the fused lowering, the
// C API, the `tdp` command, the samples) reads the same answer instead of parsing the spec's keys
// or probing the module again.
//
//   absl::StatusOr<tdp::policy::Policy> policy = tdp::policy::load_policy("policies/goal_hybrid.pbtxt");
//   const tdp::policy::Signature& signature = policy->signature;
//   for (const tdp::policy::TensorSignature& out : signature.outputs)   // "action", "sample_log_prob", ...
//     std::cout << out.name << " " << c10::toString(out.dtype) << "\n";
//   signature.check_observation(observation, "my_simulator");            // names the key that is wrong
//
// Inputs are the spec's declared inputs (key, dtype, per-environment shape), in its order.
// Outputs are the entries a call returns: the spec's output keys that the module writes, then,
// when the policy was built with composite_lp_aggregate on, the root's aggregated log-prob keys
// ("sample_log_prob") the spec does not list, then where the recurrent state's next values go
// (keys.h, recurrent_state: the state key itself, or ("next", key) for TorchRL's recurrent
// modules). Their dtypes and shapes come from one call at batch 1 on zeros, made when the
// signature is computed, under each interaction type: the types that run are the ones the
// policy supports.
#pragma once

#include <absl/status/statusor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdpolicy {
class PolicySpec;
}  // namespace tdpolicy

namespace tdp::nn {
class TensorDictModuleBase;
}  // namespace tdp::nn

namespace tdp::policy {

// One entry a policy reads or writes.
struct TensorSignature {
  NestedKey key;
  std::string name;            // the key as a spec writes it: "goal/position"
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;  // per environment, after the batch dims
  // A recurrent state key (an input read and written back), or where a call writes its next
  // value (an output: the key itself, or ("next", key)).
  bool state = false;
  // An input a call may leave out without being state: a recurrent module's is_init (missing:
  // false, no row starts over).
  bool optional = false;

  int64_t numel_per_env() const;
};

struct Signature {
  std::vector<TensorSignature> inputs;
  std::vector<TensorSignature> outputs;
  // The recurrent state, in the order of the spec's inputs (keys.h, recurrent_state): what a
  // call reads, and, at the same index, where it writes the next call's value (the key itself,
  // or ("next", key) as TorchRL's recurrent modules write it).
  std::vector<NestedKey> state_keys;
  std::vector<NestedKey> next_state_keys;
  // The interaction types a call can use, in InteractionType's order.
  std::vector<nn::InteractionType> interaction_types;
  // The composite_lp_aggregate mode the policy was built under (it fixed the log-prob keys).
  bool composite_lp_aggregate = false;

  const TensorSignature* find_input(const NestedKey& key) const;
  const TensorSignature* find_output(const NestedKey& key) const;
  bool is_state(const NestedKey& key) const;
  bool supports(nn::InteractionType type) const;
  std::vector<NestedKey> input_keys() const;
  std::vector<NestedKey> output_keys() const;

  // Throws std::invalid_argument, prefixed by `who`, unless every declared input is an entry of
  // `observation` (a tensor, not a nested TensorDict) of shape batch_size + declared shape and of
  // the declared dtype; with `state_optional`, state keys may be absent (checked when present);
  // optional inputs (is_init) always may.
  // Entries the spec does not declare are allowed.
  void check_observation(const TensorDict& observation, const std::string& who, bool state_optional) const;
};

// The inputs a spec declares, in its order, state keys marked: the part of a signature that needs
// no module (what a tool reading inputs for a spec uses). An error names a bad key or dtype.
absl::StatusOr<std::vector<TensorSignature>> declared_inputs(const tdpolicy::PolicySpec& spec);

// The signature of `module` built from `spec` (a validated spec), in the composite_lp_aggregate
// mode in force, which must be the one the module was built under. Runs the module at batch 1
// on zeros once per interaction type, on the device of its parameters, with a generator of its
// own (no caller's random stream is touched), under InferenceMode. An error when no type runs.
absl::StatusOr<Signature> compute_signature(const tdpolicy::PolicySpec& spec, nn::TensorDictModuleBase& module);

}  // namespace tdp::policy
