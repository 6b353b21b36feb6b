// ProbabilisticModuleInterface: what ProbabilisticTensorDictModule and
// ProbabilisticTensorDictSequential have in common, the methods tensordict's
// ProbabilisticTensorDictSequential calls on its probabilistic children (get_dist, log_prob,
// dist_sample_keys, ...). A sequence resolves each child against it once, when its modules are
// set, and calls its children through it. SampleRequest: the per-call choices (interaction
// type, generator, whether a value must be drawn), read from the scopes once at the outermost
// call and passed down to the children as a value.
//
//   SampleRequest request = SampleRequest::from_scopes();   // reads the guards, once
//   ProbabilisticModuleInterface& actor = *module;          // a module or a sequence
//   TensorDict out = actor.forward_with_request(td, request);
//   AnyDistribution d = actor.get_dist(td);
//   std::vector<NestedKey> keys = actor.log_prob_keys();
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "sdk/probabilistic/any_distribution.h"
#include "sdk/probabilistic/generator_scope.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

class ProbabilisticTensorDictModuleImpl;

// A log-probability: one tensor, or a TensorDict of per-part log-probs (composite
// distributions with composite_lp_aggregate() false).
using LogProb = std::variant<at::Tensor, TensorDict>;

struct SampleRequest {
  // The interaction type in force; empty: each module uses its default_interaction_type.
  std::optional<InteractionType> type;
  // The generator of the GeneratorGuard in force, for modules without one of their own.
  std::optional<at::Generator> generator;
  // False when the input already holds the samples: a module then only scores them (Python's
  // _requires_sample). A sequence decides this for its own children from its keys.
  bool requires_sample = true;

  // The choices of the guards alive in the calling thread (interaction_type(),
  // scoped_generator()): the only place the per-call scopes are read.
  static SampleRequest from_scopes(bool requires_sample = true) {
    return SampleRequest{interaction_type(), scoped_generator(), requires_sample};
  }
};

class ProbabilisticModuleInterface {
 public:
  virtual ~ProbabilisticModuleInterface() = default;

  // Runs the module with the choices in `request` instead of reading the scopes (forward()
  // reads them and calls this). Writes into `tensordict_out` when given.
  virtual TensorDict forward_with_request(const TensorDict& tensordict, const SampleRequest& request,
                                          const std::optional<TensorDict>& tensordict_out = std::nullopt) = 0;

  // The distribution built from (a sequence: computed from) `tensordict`.
  virtual AnyDistribution get_dist(const TensorDict& tensordict) const = 0;
  // The log-probability of the samples in `tensordict` under `dist` (default get_dist).
  virtual LogProb log_prob(const TensorDict& tensordict,
                           const std::optional<AnyDistribution>& dist = std::nullopt) const = 0;

  virtual std::vector<NestedKey> dist_sample_keys() const = 0;
  virtual std::vector<NestedKey> dist_params_keys() const = 0;
  virtual std::vector<NestedKey> log_prob_keys() const = 0;
  // Empty only for a sequence without a probabilistic module outside any scope.
  virtual std::optional<InteractionType> default_interaction_type() const = 0;
  // The leading sample dims a RANDOM draw adds.
  virtual std::vector<int64_t> num_samples() const = 0;
  // This as a ProbabilisticTensorDictModule, or null for a sequence (so that a sequence tells
  // its children apart without a cast).
  virtual ProbabilisticTensorDictModuleImpl* as_module() { return nullptr; }

 protected:
  ProbabilisticModuleInterface() = default;
  ProbabilisticModuleInterface(const ProbabilisticModuleInterface&) = default;
  ProbabilisticModuleInterface& operator=(const ProbabilisticModuleInterface&) = default;
};

}  // namespace tdp::nn
