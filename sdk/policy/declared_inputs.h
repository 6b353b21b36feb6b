// DeclaredInputs: the entries a policy spec says it reads (its `inputs`: key, per-environment
// shape, dtype), parsed once, and the one check of an observation against them. Actor::act and
// BatchingActor::submit run it on every call, so a wrong observation is an error that names the
// key, what the spec declares and what was given, instead of a matrix-size error deep inside a
// network.
//
//   const tdp::policy::DeclaredInputs inputs(policy.spec);        // a validated spec
//   inputs.check(observation, "Actor.act");
//   // std::invalid_argument: Actor.act: input "observation" has shape [8, 5], expected [8, 4]
//   //                        (float32 [4] per environment, batch_size [8])
//
// An InputSpec without a dtype is float32, here and everywhere a spec's inputs are read
// (input_scalar_type).
#pragma once

#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::policy {

// The dtype of a declared input: its DType, float32 when unspecified. Throws
// std::invalid_argument for a number no DType names (validate_spec rejects those).
at::ScalarType input_scalar_type(const tdpolicy::InputSpec& input);

struct DeclaredInput {
  NestedKey key;
  std::string name;            // the key as the spec writes it ("goal/position")
  std::vector<int64_t> shape;  // per environment, after the batch dims
  at::ScalarType dtype;
};

class DeclaredInputs {
 public:
  DeclaredInputs() = default;
  // Throws std::invalid_argument for a key that does not parse or an unknown dtype (a spec that
  // passed validate_spec has neither).
  explicit DeclaredInputs(const tdpolicy::PolicySpec& spec);

  const std::vector<DeclaredInput>& inputs() const { return inputs_; }

  // Throws std::invalid_argument, prefixed by `who`, unless every declared input but those in
  // `optional_keys` is an entry of `observation` (a tensor, not a nested TensorDict) of shape
  // batch_size + declared shape and of the declared dtype. Optional keys are checked when
  // present. Entries the spec does not declare are allowed.
  void check(const TensorDict& observation, const std::string& who,
             const std::vector<NestedKey>& optional_keys = {}) const;

 private:
  std::vector<DeclaredInput> inputs_;
};

}  // namespace tdp::policy
