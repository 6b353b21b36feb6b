// RecurrentState: the state an Actor keeps between calls for a recurrent policy (its
// signature's state keys, a hidden state), per environment, and the one rule every backend
// follows: an observation that carries none of the state keys uses the kept state (zeros at
// first, or when the batch size changes) and the call's outputs are kept; one that carries all
// of them is used as given and the kept state is left alone (the stateless form); one that
// carries only some is an error naming the missing keys. Thread-safe. Internal to sdk/actor.
//
//   RecurrentState state(policy.signature, device);
//   if (state.uses_kept(observation)) {
//     std::vector<at::Tensor> hidden = state.get({batch});   // one tensor per state key
//     ... run the policy ...
//     state.keep(out);
//   }
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "sdk/policy/signature.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::actor {

class RecurrentState {
 public:
  RecurrentState(const policy::Signature& signature, c10::Device device);

  const std::vector<NestedKey>& keys() const { return keys_; }
  bool empty() const { return keys_.empty(); }

  // Whether a call takes the state from the actor (the observation carries none of it) rather
  // than from the observation (it carries all); false for a policy without state. Throws
  // std::invalid_argument when the observation carries only some.
  bool uses_kept(const TensorDict& observation) const;
  // The kept state for a call of `batch` (one tensor per key, in keys() order): zeros when
  // there is none yet or it was kept for another batch.
  std::vector<at::Tensor> get(const std::vector<int64_t>& batch);
  // Writes the kept state into `td` (batch from its batch_size).
  void supply(TensorDict& td);
  // Keeps the state a call wrote into `out` (a reset while the call ran wins).
  void keep(const TensorDict& out);
  // Zeroes the environments where `env_mask` ([N] bool) is true.
  void reset(const at::Tensor& env_mask);
  void reset();

 private:
  std::vector<NestedKey> keys_;
  std::vector<std::vector<int64_t>> shapes_;  // per environment, per key
  c10::Device device_;
  std::mutex mutex_;
  std::optional<TensorDict> kept_;
};

}  // namespace tdp::actor
