// Actor: the object a simulator holds to act. It loads a policy spec once and maps a batch of
// observations to actions every step, choosing per actor (and per call) how actions are taken
// (RANDOM to explore, DETERMINISTIC to evaluate), with its own seeded random stream, under
// c10::InferenceMode, on the device it was asked to use. `tdp run` and `tdp bench` call a policy
// through this class too, so the command line runs and times exactly what simulators call.
//
//   auto actor = tdp::actor::Actor::load("policies/cartpole_categorical.pbtxt",
//                                        tdp::actor::ActorOptions().seed(0));
//   if (!actor.ok()) return fail(actor.status());
//   tdp::TensorDict action = (*actor)->act(env.reset(0));                    // exploring
//   tdp::TensorDict greedy = (*actor)->act(obs, tdp::nn::InteractionType::kDeterministic);
//
// Recurrent policies: the keys a spec both declares as inputs and overwrites (a hidden state;
// tdp::spec::state_keys) are the actor's state. When an observation lacks them the actor
// supplies its own copy (zeros at first) and keeps what the policy writes back, per
// environment; reset(env_mask) zeroes the environments that finished. An observation that
// carries the state keys is used as given and the actor's copy is left alone (the stateless
// form); one that carries some of them but not all is an error naming the missing ones.
//
// Thread safety: act() may be called from many threads at once. Each call's interaction type and
// aggregation mode are scoped to its thread; the kept recurrent state is guarded by a mutex
// (threads sharing one recurrent actor share that state, so give each simulator thread its own
// recurrent actor, or pass the state in the observation). Draws come from the generator passed
// to act(), else from the actor's own: that one is shared by the threads using the actor, safe
// but interleaved, so for per-thread reproducibility use one actor per thread or pass a
// generator per call. set_interaction_type() is not synchronized with act().
//
// This header includes no protobuf or torch::nn headers: spec() and module() return types that
// are only declared here; include "tdpolicy/spec.pb.h" / "sdk/nn/tensordict_module_base.h" (or
// "sdk/spec/policy.h") to use them. Actor is movable, not copyable; a moved-from Actor may only
// be destroyed or assigned to.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <absl/status/statusor.h>
#include <c10/core/Device.h>
#include <torch/arg.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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

namespace tdp::spec {
struct LoadOptions;
struct Policy;
}  // namespace tdp::spec

namespace tdp::actor {

struct ActorOptions {
  // How act() takes actions unless a call says otherwise. Empty: no type is imposed, and each
  // probabilistic module uses its own default_interaction_type (the spec's, else tensordict's),
  // whatever scope the calling thread is in.
  TORCH_ARG(std::optional<nn::InteractionType>, interaction_type) = nn::InteractionType::kRandom;
  // Seeds the actor's own generator (default: 0, so runs are reproducible unless asked).
  TORCH_ARG(uint64_t, seed) = 0;
  TORCH_ARG(c10::Device, device) = c10::Device(c10::kCPU);
  // Recompute the spec's self tests at load (a deployment proves it computes what the trainer did).
  TORCH_ARG(bool, run_self_tests) = true;
  // Whether a composite distribution sums its parts' log-probs into one entry (true; written to
  // "sample_log_prob", as tensordict does) or keeps one per part (false). Probabilistic modules
  // fix their log-prob keys by this mode when they are built, so load() builds the policy under
  // it and every act() runs under it, whatever the calling thread's setting. Empty: the mode in
  // force (tdp::nn::composite_lp_aggregate(): a scope, else COMPOSITE_LP_AGGREGATE, else false)
  // when the actor is made. The constructor that takes a built Policy expects one built under
  // the same mode.
  TORCH_ARG(std::optional<bool>, composite_lp_aggregate);
  // What act() returns: the spec's output keys and the recurrent state (false), or every entry
  // of the TensorDict the policy produced: the observation, intermediate entries and outputs
  // (true; what `tdp run` prints).
  TORCH_ARG(bool, return_all_entries) = false;
};

class Actor {
 public:
  static absl::StatusOr<std::unique_ptr<Actor>> load(const std::string& spec_path, ActorOptions options = {});
  // The same, with the loader's limits and file rules (sdk/spec/policy.h: LoadOptions; its
  // run_self_tests is replaced by options.run_self_tests()).
  static absl::StatusOr<std::unique_ptr<Actor>> load(const std::string& spec_path, ActorOptions options,
                                                     const spec::LoadOptions& load_options);
  // An actor over an already loaded policy (sdk/spec/policy.h). Throws std::invalid_argument
  // when it has no module or the device cannot be used.
  Actor(spec::Policy policy, ActorOptions options = {});
  ~Actor();
  Actor(Actor&& other) noexcept;
  Actor& operator=(Actor&& other) noexcept;
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;

  // The spec's output keys (and any recurrent state it returns) for the batch in `observation`,
  // or every entry with return_all_entries. The observation itself is not modified.
  TensorDict act(const TensorDict& observation);
  // `type` for this call only; empty: each module's default_interaction_type.
  TensorDict act(const TensorDict& observation, std::optional<nn::InteractionType> type,
                 std::optional<at::Generator> generator = std::nullopt);
  // Named tensors instead of a TensorDict; the batch size comes from the declared input shapes.
  TensorDict act(const std::vector<std::pair<NestedKey, at::Tensor>>& observation);

  // Zeroes the kept recurrent state of the environments where `env_mask` ([N] bool) is true.
  void reset(const at::Tensor& env_mask);
  // Forgets the kept recurrent state entirely (the next call starts from zeros for any N).
  void reset();

  void set_interaction_type(std::optional<nn::InteractionType> type);
  const ActorOptions& options() const;
  const tdpolicy::PolicySpec& spec() const;
  // tdp::spec::state_keys(spec()): the recurrent state the actor keeps.
  const std::vector<NestedKey>& state_keys() const;
  const std::shared_ptr<nn::TensorDictModuleBase>& module() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tdp::actor
