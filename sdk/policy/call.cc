#include "sdk/policy/call.h"

#include "sdk/probabilistic/generator_scope.h"
#include "sdk/probabilistic/interaction_type.h"

namespace tdp::policy {

TensorDict call_policy(nn::TensorDictModuleBase& root, const TensorDict& tensordict, const nn::SampleRequest& request) {
  if (auto* probabilistic = dynamic_cast<nn::ProbabilisticModuleInterface*>(&root)) {
    return probabilistic->forward_with_request(tensordict, request);
  }
  nn::InteractionTypeGuard scope(request.type, /*thread_local_only=*/true);
  if (!request.generator) return root.forward(tensordict);
  nn::GeneratorGuard stream(*request.generator);
  return root.forward(tensordict);
}

}  // namespace tdp::policy
