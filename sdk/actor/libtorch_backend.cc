#include "sdk/actor/libtorch_backend.h"

#include <absl/strings/str_cat.h>
#include <c10/core/InferenceMode.h>

#include "sdk/policy/call.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"

namespace tdp::actor {

TensorDict LibTorchBackend::act(const ActCall& call) {
  core_.policy.signature.check_observation(call.observation, "Actor.act", /*state_optional=*/true);
  c10::InferenceMode inference;
  nn::CompositeLpAggregateGuard aggregate(core_.lp_aggregate, /*thread_local_only=*/true);
  // to() builds a new TensorDict (sharing tensors already on the device), as clone does: one
  // copy of the structure, not two, when the observation does not carry the actor's device.
  const c10::Device& device = core_.options.device();
  TensorDict td = call.observation.device() == device ? call.observation.clone(/*deep=*/false)
                                                      : call.observation.to(device);
  core_.state.fill_optional(td);
  const bool kept = core_.state.uses_kept(td);
  if (kept) core_.state.supply(td);
  TensorDict out = run_module(std::move(td), call);
  if (kept) core_.state.keep(out);
  if (core_.options.return_all_entries()) return out;
  return out.select(core_.returned_keys, /*strict=*/false);
}

TensorDict LibTorchBackend::run_module(TensorDict td, const ActCall& call) {
  return policy::call_policy(*core_.policy.module, td,
                             nn::SampleRequest{call.type, call.generator.value_or(core_.generator)});
}

void LibTorchBackend::describe(ActorInfo& info) const {
  if (info.modules.empty()) info.modules.push_back(absl::StrCat("module: LibTorch (", info.fused_status.message(), ")"));
}

}  // namespace tdp::actor
