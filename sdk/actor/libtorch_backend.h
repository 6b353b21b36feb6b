// LibTorchBackend: runs a call eagerly through the policy's module tree on the actor's device.
// It takes every call (the last backend asked), checks the observation against the signature,
// supplies and keeps the recurrent state, and returns the signature's outputs. The CUDA-graph
// backend reuses all of that and replaces only how the module runs (run_module). Internal to
// sdk/actor.
#pragma once

#include "sdk/actor/backend.h"

namespace tdp::actor {

class LibTorchBackend : public ActorBackend {
 public:
  explicit LibTorchBackend(ActorCore& core) : core_(core) {}

  bool accepts(const ActCall&) const override { return true; }
  TensorDict act(const ActCall& call) override;
  void describe(ActorInfo& info) const override;

 protected:
  // One call of the module on `td` (the observation on the device, with its state).
  virtual TensorDict run_module(TensorDict td, const ActCall& call);

  ActorCore& core_;
};

}  // namespace tdp::actor
