// Actor: the object a simulator holds to act. It loads a policy spec once and maps a batch of
// observations to actions every step, choosing per actor (and per call) how actions are taken
// (RANDOM to explore, DETERMINISTIC to evaluate), with its own seeded random stream, under
// c10::InferenceMode, on the device it was asked to use.
//
//   auto actor = tdp::actor::Actor::Load("policies/cartpole_categorical.pbtxt",
//                                        tdp::actor::ActorOptions().seed(0));
//   if (!actor.ok()) return fail(actor.status());
//   tdp::TensorDict action = (*actor)->act(env.reset(0));                    // exploring
//   tdp::TensorDict greedy = (*actor)->act(obs, tdp::nn::InteractionType::kDeterministic);
//
// Recurrent policies: the keys a spec both declares as inputs and overwrites (a hidden state)
// are the actor's state. When an observation lacks them the actor supplies its own copy (zeros
// at first) and keeps what the policy writes back, per environment; reset(env_mask) zeroes the
// environments that finished. An observation that carries the state keys is used as given and
// the actor's copy is left alone (the stateless form).
//
// Thread safety: act() may be called from many threads at once. Each call's interaction type is
// scoped to its thread; the kept recurrent state is guarded by a mutex (threads sharing one
// recurrent actor share that state, so give each simulator thread its own recurrent actor, or
// pass the state in the observation). Draws come from the generator passed to act(), else from
// the actor's own: that one is shared by the threads using the actor, safe but interleaved, so
// for per-thread reproducibility use one actor per thread or pass a generator per call.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <absl/status/statusor.h>
#include <c10/core/Device.h>
#include <torch/arg.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sdk/probabilistic/interaction_type.h"
#include "sdk/spec/policy.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::actor {

struct ActorOptions {
  // How act() takes actions unless a call says otherwise.
  TORCH_ARG(nn::InteractionType, interaction_type) = nn::InteractionType::kRandom;
  // Seeds the actor's own generator (default: 0, so runs are reproducible unless asked).
  TORCH_ARG(uint64_t, seed) = 0;
  TORCH_ARG(c10::Device, device) = c10::Device(c10::kCPU);
  // Recompute the spec's self tests at load (a deployment proves it computes what the trainer did).
  TORCH_ARG(bool, run_self_tests) = true;
};

class Actor {
 public:
  static absl::StatusOr<std::unique_ptr<Actor>> Load(const std::string& spec_path, ActorOptions options = {});
  Actor(spec::Policy policy, ActorOptions options = {});

  // The spec's output keys (and any recurrent state it returns) for the batch in `observation`.
  // The observation itself is not modified.
  TensorDict act(const TensorDict& observation) { return act(observation, options_.interaction_type()); }
  TensorDict act(const TensorDict& observation, nn::InteractionType type,
                 std::optional<at::Generator> generator = std::nullopt);
  // Named tensors instead of a TensorDict; the batch size comes from the declared input shapes.
  TensorDict act(const std::vector<std::pair<NestedKey, at::Tensor>>& observation);

  // Zeroes the kept recurrent state of the environments where `env_mask` ([N] bool) is true.
  void reset(const at::Tensor& env_mask);
  // Forgets the kept recurrent state entirely (the next call starts from zeros for any N).
  void reset();

  void set_interaction_type(nn::InteractionType type) { options_.interaction_type(type); }
  const ActorOptions& options() const { return options_; }
  const tdpolicy::PolicySpec& spec() const { return policy_.spec; }
  const std::vector<NestedKey>& state_keys() const { return state_keys_; }
  const std::shared_ptr<nn::TensorDictModuleBase>& module() const { return policy_.module; }

 private:

  spec::Policy policy_;
  ActorOptions options_;
  at::Generator generator_;
  std::vector<NestedKey> output_keys_;
  std::vector<NestedKey> state_keys_;
  std::vector<std::vector<int64_t>> state_shapes_;
  std::mutex state_mutex_;
  std::optional<TensorDict> state_;
};

}  // namespace tdp::actor
