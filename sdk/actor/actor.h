// Actor: the object a simulator holds to act. It loads a policy once and maps a batch of
// observations to actions every step: RANDOM to explore, DETERMINISTIC to evaluate (per actor or
// per call), from its own seeded random stream, on the device it was asked to use. One of three
// backends runs each call (LibTorch eager, the fused CPU plan, replayed CUDA graphs); all give
// the same keys, shapes and recurrent-state rules, and deterministic types the same values.
// sdk/actor/README.md says which backend runs what, how recurrent state is kept, and what is
// thread-safe.
//
//   auto actor = tdp::actor::Actor::load("policies/cartpole_categorical.pbtxt",
//                                        tdp::actor::ActorOptions().seed(0));
//   if (!actor.ok()) return fail(actor.status());
//   tdp::TensorDict action = (*actor)->act(env.reset(0));                    // exploring
//   tdp::TensorDict greedy = (*actor)->act(obs, tdp::nn::InteractionType::kDeterministic);
//   std::cout << (*actor)->describe().modules[0];                           // "module...: fused (Mlp 4->2, tanh)"
//
// Errors at this edge follow one rule: what reads files or raw buffers returns absl::Status or
// StatusOr (load, act_flat, refresh_parameters); what takes tensors throws std::invalid_argument
// naming the key, what was expected and what was given, as LibTorch does (act, reset, the
// constructor).
//
// This header includes no protobuf or torch::nn headers: spec() and module() return types that
// are only declared here; include "tdpolicy/spec.pb.h" / "sdk/nn/tensordict_module_base.h" (or
// "sdk/policy/policy.h") to use them. Actor is movable, not copyable; a moved-from Actor may
// only be destroyed or assigned to.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <absl/status/status.h>
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
#include "sdk/policy/cuda_graph_settings.h"
#include "sdk/policy/signature.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdpolicy {
class PolicySpec;
}  // namespace tdpolicy

namespace tdp::nn {
class TensorDictModuleBase;
}  // namespace tdp::nn

namespace tdp::policy {
struct LoadOptions;
struct Policy;
}  // namespace tdp::policy

namespace tdp::actor {

// Which implementation runs act() on a CPU: kAuto uses the fused plan at batch sizes up to
// fused_max_batch and LibTorch above them or when the policy does not lower; kLibTorch never
// lowers; kFused makes a policy that does not lower a load error naming the module and why.
enum class Backend { kAuto, kLibTorch, kFused };

// CUDA-graph capture for an actor on a GPU: one graph per (batch bucket, interaction type),
// calls padded to the smallest bucket that fits (the spec's `cuda_graph` block is the default).
struct CudaGraphOptions {
  TORCH_ARG(bool, enabled) = true;
  // Eager calls before each capture (1 to policy::kMaxCudaGraphWarmup).
  TORCH_ARG(int64_t, warmup) = policy::kDefaultCudaGraphWarmup;
  // The batch sizes captured: at most policy::kMaxBatchBuckets, each 1 to policy::kMaxBatchBucket, increasing.
  TORCH_ARG(std::vector<int64_t>, batch_buckets) =
      std::vector<int64_t>(policy::kDefaultBatchBuckets.begin(), policy::kDefaultBatchBuckets.end());
  // Capture every bucket for the actor's interaction type when the actor is made (true), or each
  // graph on its first call (false).
  TORCH_ARG(bool, capture_at_load) = true;
};

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
  // the same mode. Aggregated, act() also returns the root's log-prob keys ("sample_log_prob")
  // when the spec's output_keys do not list them.
  TORCH_ARG(std::optional<bool>, composite_lp_aggregate);
  // What act() returns: the spec's output keys and the recurrent state (false), or every entry
  // of the TensorDict the policy produced: the observation, intermediate entries and outputs
  // (true; what `tdp run` prints).
  TORCH_ARG(bool, return_all_entries) = false;
  // The fused CPU plan or LibTorch (CPU devices only; see Backend).
  TORCH_ARG(Backend, backend) = Backend::kAuto;
  // Under kAuto, the largest batch the fused plan runs: the largest fused_benchmark's AutoThreshold
  // measures (the plan's act() took at most 0.71 of LibTorch's time at every batch to 16384 on
  // each policy measured, with one intra-op thread and with two).
  TORCH_ARG(int64_t, fused_max_batch) = 16384;
  // CUDA graphs on a GPU; empty: the spec's cuda_graph block (off when the spec has none).
  TORCH_ARG(std::optional<CudaGraphOptions>, cuda_graph);
  // The rule for non-finite and extreme inputs, the same on every backend (LibTorch, the fused
  // plan, CUDA graphs), in act_flat, the C API and BatchingActor::submit: a NaN, a +-Inf or a
  // value beyond +-kLargestInput in a declared floating-point input is an error naming the key
  // and the first bad row (std::invalid_argument from act, InvalidArgument from act_flat),
  // checked in one pass over the input before the policy runs. Beyond kLargestInput a policy's
  // float32 arithmetic overflows on the way (a Linear's sums, a LayerNorm's moments), and the
  // result then depends on the order each backend sums in, so such inputs are refused like NaN:
  // every backend gives the same answer for every input it accepts. false skips the check for
  // speed; a NaN then propagates through the fused plan as through LibTorch (NaN in, NaN out;
  // tests/fused: FusedNonFinite), and extreme values give what each backend's arithmetic gives.
  TORCH_ARG(bool, check_finite) = true;
};

// The largest magnitude a checked input may hold (ActorOptions::check_finite): far beyond any
// simulator's observation, and far enough below FLT_MAX that a policy's sums cannot overflow.
inline constexpr float kLargestInput = 1e18f;

// Throws std::invalid_argument when a declared floating-point input of `observation` holds a NaN,
// a +-Inf or a value beyond +-kLargestInput: "<who>: input "observation" has nan in row 3
// (element 13); expected finite values within +-1e+18".
// Rows count over the batch dims, flattened. Inputs missing, not strided or on the meta device
// are left to the shape checks.
void check_finite_inputs(const policy::Signature& signature, const TensorDict& observation, const std::string& who);

// What an actor does with its policy, for logs, tests and tools (`tdp validate` prints it).
struct ActorInfo {
  // One line per module of the spec: its path and which backend runs it.
  std::vector<std::string> modules;
  // OK when the policy lowered to a fused plan; else why not (or that kLibTorch was asked).
  absl::Status fused_status;
  // The interaction types the plan computes (empty without a plan), and the largest batch it
  // runs (fused_max_batch under kAuto, unbounded under kFused, 0 without a plan).
  std::vector<nn::InteractionType> fused_interaction_types;
  int64_t fused_max_batch = 0;
  // OK when act_flat() applies (a fused plan, one input, no recurrent state, no composite head);
  // else why not (FailedPrecondition). The flat sizes are 0 when it does not.
  absl::Status flat_status;
  int64_t flat_observation_size = 0;
  int64_t flat_action_size = 0;
  // The CUDA-graph settings calls use (empty when calls run without graphs), and how many graphs
  // are captured so far (one per bucket and interaction type used).
  std::optional<CudaGraphOptions> cuda_graph;
  int64_t captured_graph_count = 0;

  // Whether a call of `batch` rows under `type` runs on the fused plan.
  bool runs_fused(int64_t batch, nn::InteractionType type) const;
};

class Actor {
 public:
  static absl::StatusOr<std::unique_ptr<Actor>> load(const std::string& spec_path, ActorOptions options = {});
  // The same, with the loader's limits and file rules (sdk/policy/policy.h: LoadOptions; its
  // run_self_tests is replaced by options.run_self_tests()).
  static absl::StatusOr<std::unique_ptr<Actor>> load(const std::string& spec_path, ActorOptions options,
                                                     const policy::LoadOptions& load_options);
  // An actor over an already loaded policy (sdk/policy/policy.h), built under the same
  // composite_lp_aggregate mode. Throws std::invalid_argument when it has no module, the device
  // cannot be used, or kFused was asked of a policy that does not lower.
  Actor(policy::Policy policy, ActorOptions options = {});
  ~Actor();
  Actor(Actor&& other) noexcept;
  Actor& operator=(Actor&& other) noexcept;
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;

  // signature().outputs (the spec's output keys, aggregated log-probs, the recurrent state) for
  // the batch in `observation`, or every entry with return_all_entries. Every declared input must
  // be present with batch_size + its declared shape and dtype; recurrent state keys may be left
  // out (the actor supplies its kept state) or all given (the stateless form). The observation
  // itself is not modified. Safe to call from many threads (see the README). The outputs are the
  // caller's: on the fused plan a later call on the same thread may write into a tensor returned
  // earlier only once nothing refers to it or its memory any more (no copy, view or weak reference
  // left), instead of making a new one.
  TensorDict act(const TensorDict& observation);
  // `type` for this call only; empty: each module's default_interaction_type.
  TensorDict act(const TensorDict& observation, std::optional<nn::InteractionType> type,
                 std::optional<at::Generator> generator = std::nullopt);
  // Named tensors instead of a TensorDict; the batch size comes from the declared input shapes.
  TensorDict act(const std::vector<std::pair<NestedKey, at::Tensor>>& observation);

  // act(), its outputs written into `out` (tensordict's tensordict_out): an entry of `out` that
  // is a contiguous tensor of the output's shape, dtype and device (recording no gradient, and
  // sharing no memory with the observation or another output) is written in place, so a caller
  // that keeps `out` from call to call allocates nothing per call on the fused plan; any other
  // output is set into `out` as a new tensor. Entries of `out` the call does not return are left
  // alone. `out` must have the observation's batch size, or no entries (it then takes that batch
  // size). A call that throws leaves `out` as it was.
  //
  //   TensorDict out;                      // once
  //   actor->act_into(observation, out);   // each step: out["action"] is the same tensor
  void act_into(const TensorDict& observation, TensorDict& out);
  void act_into(const TensorDict& observation, TensorDict& out, std::optional<nn::InteractionType> type,
                std::optional<at::Generator> generator = std::nullopt);

  // Flat float32 buffers, for simulators that hold plain arrays: observation [batch,
  // describe().flat_observation_size], action [batch, flat_action_size] (categorical indices as
  // floats), log_prob [batch] or [batch, flat_action_size] for a per-element normal (may be
  // null). No allocation per call on the fused plan after a thread's first call.
  absl::Status act_flat(const float* observation, int64_t batch, float* action, float* log_prob = nullptr,
                        std::optional<nn::InteractionType> type = std::nullopt);

  // Zeroes the kept recurrent state of the environments where `env_mask` ([N] bool) is true.
  void reset(const at::Tensor& env_mask);
  // Forgets the kept recurrent state entirely (the next call starts from zeros for any N).
  void reset();

  // The policy's parameters were changed in place (a trainer's optimizer step on module()): the
  // fused plan, which runs on its own copy of the weights, lowers them again. May be called while
  // other threads act: each call runs wholly on the old plan or wholly on the new one. An error
  // (a parameter changed shape) leaves the actor as it was. An aoti_package network's weights are
  // compiled into its package and are not among module()'s parameters: nothing here changes them
  // (export and load the policy again).
  absl::Status refresh_parameters();

  ActorInfo describe() const;
  void set_interaction_type(std::optional<nn::InteractionType> type);
  const ActorOptions& options() const;
  const tdpolicy::PolicySpec& spec() const;
  // What the policy reads and returns, its recurrent state keys and interaction types.
  const policy::Signature& signature() const;
  const std::shared_ptr<nn::TensorDictModuleBase>& module() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tdp::actor
