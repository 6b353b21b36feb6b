// ActorBackend: one way of running an Actor's calls (LibTorch eager, the fused CPU plan, replayed
// CUDA graphs), behind one interface so that Actor::act only picks one and hands the call over.
// ActorCore is what the backends of one actor share: the loaded policy, the options, the
// aggregation mode, the actor's own generator and its kept recurrent state. Internal to
// sdk/actor (not installed).
//
//   const ActCall call(signature, observation, type, generator);
//   for (ActorBackend* backend : backends)                 // most specific first, LibTorch last
//     if (backend->accepts(call)) return backend->act(call);
#pragma once

#include <ATen/core/Generator.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/actor/recurrent_state.h"
#include "sdk/policy/policy.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::actor {

struct ActorCore {
  ActorCore(policy::Policy policy, ActorOptions options);

  policy::Policy policy;
  ActorOptions options;
  // The composite_lp_aggregate mode the policy was built under; every call runs under it.
  bool lp_aggregate;
  // The actor's own random stream, on its device; calls without a generator draw from it.
  at::Generator generator;
  RecurrentState state;
  // What act() returns without return_all_entries: the signature's outputs.
  std::vector<NestedKey> returned_keys;
};

// One act() call, its choices resolved once at the top. `inputs` holds the observation's tensor
// for each of the signature's inputs, in its order (undefined where the observation lacks one):
// looked up once per call, for the finiteness check and the backend that runs it.
struct ActCall {
  ActCall(const policy::Signature& signature, const TensorDict& observation, std::optional<nn::InteractionType> type,
          std::optional<at::Generator> generator);

  const TensorDict& observation;
  std::optional<nn::InteractionType> type;
  std::optional<at::Generator> generator;
  c10::SmallVector<at::Tensor, 4> inputs;
};

// check_finite_inputs (actor.h) of a call's inputs, already looked up.
void check_finite(const policy::Signature& signature, c10::ArrayRef<at::Tensor> inputs, const char* who);

// Whether `into` can take a value of `sizes`, `dtype` and `device` in place: a contiguous strided
// tensor of exactly those, which no gradient is recorded for.
bool takes_in_place(const at::Tensor& into, c10::IntArrayRef sizes, at::ScalarType dtype, c10::Device device);
// Whether (contiguous) `into`'s bytes overlap any byte of `other`'s storage: writing `into` could
// then change what a view of that storage reads.
bool shares_memory(const at::Tensor& into, const at::Tensor& other);
// Puts every entry of `result` into `out`: copied into out's tensor at the same key where that
// takes it in place and shares no memory with `observation`'s tensors or with another entry
// copied into, else set (out then holds result's tensor). All decided before anything is written.
void write_outputs(const TensorDict& result, const TensorDict& observation, TensorDict& out);

class ActorBackend {
 public:
  virtual ~ActorBackend() = default;
  // Whether this backend runs `call` (cheap: act() asks before every call).
  virtual bool accepts(const ActCall& call) const = 0;
  // Runs a call that accepts() took: what Actor::act returns.
  virtual TensorDict act(const ActCall& call) = 0;
  // The same call, its outputs written into `out` (Actor::act_into): here, act()'s result copied
  // by write_outputs.
  virtual void act_into(const ActCall& call, TensorDict& out) { write_outputs(act(call), call.observation, out); }
  // Adds what this backend knows to `info`.
  virtual void describe(ActorInfo& info) const = 0;
};

}  // namespace tdp::actor
