// RecurrentState: the state an Actor keeps between calls for a recurrent policy (its
// signature's state keys, a hidden state), per environment, and the one rule every backend
// follows: an observation that carries none of the state keys uses the kept state (zeros at
// first, or when the batch size changes) and the call's next state is kept; one that carries
// all of them is used as given and the kept state is left alone (the stateless form); one that
// carries only some is an error naming the missing keys. The next state of key K is what the
// call wrote at the signature's next_state_keys: ("next", K) for TorchRL's LSTMModule /
// GRUModule (what step_mdp would move to K), K itself for a module that overwrites it. A
// recurrent module's is_init is an optional input: a call without it gets false (no row starts
// over); rows where it is true start from zeros (the module resets them, in every backend).
// Thread-safe. Internal to sdk/actor.
//
//   RecurrentState state(policy.signature, device);
//   state.fill_optional(td);                                  // is_init = false where absent
//   if (state.uses_kept(observation)) {
//     std::vector<at::Tensor> hidden = state.get({batch});   // one tensor per state key
//     ... run the policy ...
//     state.keep(out);                                        // out's ("next", K) becomes K
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
  // Where a call writes each key's next value, in keys() order.
  const std::vector<NestedKey>& next_keys() const { return next_keys_; }
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
  // Sets the optional inputs (is_init) that `td` lacks to zeros (false).
  void fill_optional(TensorDict& td) const;
  // Keeps the next state a call wrote into `out`, at next_keys() (a reset while the call ran
  // wins; a call at another batch size that took the state over meanwhile loses to this one).
  void keep(const TensorDict& out);
  // The same, given the next state itself (one tensor per key, in keys() order), which the state
  // then holds: never tensors the caller owns (act_into's, which the caller may overwrite, or
  // free when they view its arrays).
  void keep(std::vector<at::Tensor> next);
  // Zeroes the environments where `env_mask` ([N] bool) is true.
  void reset(const at::Tensor& env_mask);
  void reset();

 private:
  std::vector<NestedKey> keys_;
  std::vector<NestedKey> next_keys_;
  std::vector<policy::TensorSignature> optional_;  // inputs a call may leave out (is_init)
  std::vector<std::vector<int64_t>> shapes_;  // per environment, per key
  c10::Device device_;
  std::mutex mutex_;
  std::optional<TensorDict> kept_;
};

}  // namespace tdp::actor
