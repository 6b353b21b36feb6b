// CudaGraphBackend: on a GPU, replays CUDA graphs captured from the policy (sdk/nn/
// cuda_graph_module.h) instead of launching its kernels one by one: one graph per (batch bucket,
// interaction type), all in one memory pool. A call is padded up to the smallest bucket that
// fits and split into chunks of the largest bucket beyond it (batch_buckets.h); padding rows
// never reach the outputs or the kept recurrent state. Graphs for the actor's interaction type
// are captured when the actor is made (capture_at_load), others on their first call; captures
// take a process-wide lock. Random types draw fresh samples on every replay from the actor's
// seeded generator. Calls are serialized per actor (the graphs share their memory pool). Calls
// with a generator of their own, several batch dims or an empty batch run eagerly. Everything
// around the module call (checks, recurrent state, returned keys) is LibTorchBackend's.
// Internal to sdk/actor.
#pragma once

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "sdk/actor/libtorch_backend.h"
#include "sdk/nn/cuda_graph_module.h"

namespace tdp::actor {

class CudaGraphBackend : public LibTorchBackend {
 public:
  // The settings: the actor's options, else the spec's cuda_graph block; empty when disabled.
  // Throws std::invalid_argument for settings out of their domain (named by where they came from).
  static std::optional<CudaGraphOptions> settings(const ActorOptions& options, const tdpolicy::PolicySpec& spec);

  // Captures the buckets of the actor's interaction type now when capture_at_load.
  CudaGraphBackend(ActorCore& core, CudaGraphOptions settings);

  bool accepts(const ActCall& call) const override;
  void describe(ActorInfo& info) const override;

 protected:
  TensorDict run_module(TensorDict td, const ActCall& call) override;

 private:
  // The graph for (bucket, type), captured now if it is not yet. Needs mutex_.
  nn::CudaGraphModule& graph_for(int64_t bucket, std::optional<nn::InteractionType> type);
  // Zeros of every declared input (recurrent state included) for `batch` rows, on the device.
  TensorDict zero_inputs(int64_t batch) const;

  CudaGraphOptions settings_;
  mutable std::mutex mutex_;
  // By (bucket, interaction type or -1 for the modules' defaults).
  std::map<std::pair<int64_t, int>, std::shared_ptr<nn::CudaGraphModule>> graphs_;
  c10::MempoolId_t pool_{0, 0};
  // What a graph copies back: the entries an eager call adds to its input or replaces in it (a
  // recurrent state) that act() returns (all of them with return_all_entries). Found by one eager
  // call, not from the root's out_keys, which can miss some (a composite's per-part log-probs
  // under aggregation are written undeclared, as in tensordict).
  std::vector<NestedKey> out_keys_;
};

}  // namespace tdp::actor
