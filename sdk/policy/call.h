// call_policy: one call of a policy's root module with the per-call choices (interaction type,
// generator) given as a value. A probabilistic root (a ProbabilisticTensorDictModule or
// ProbabilisticTensorDictSequential) takes them as an argument; any other root reads them from
// scopes opened here for this thread only. Every place that runs a loaded policy (the Actor's
// backends, the signature's probe, self tests) calls it, so they agree on what a call means.
//
//   tdp::nn::SampleRequest request{tdp::nn::InteractionType::kRandom, generator};
//   tdp::TensorDict out = tdp::policy::call_policy(*policy.module, observation, request);
#pragma once

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/probabilistic/probabilistic_module_interface.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy {

TensorDict call_policy(nn::TensorDictModuleBase& root, const TensorDict& tensordict, const nn::SampleRequest& request);

}  // namespace tdp::policy
