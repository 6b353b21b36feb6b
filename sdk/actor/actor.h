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
// tdp::policy::state_keys) are the actor's state. When an observation lacks them the actor
// supplies its own copy (zeros at first) and keeps what the policy writes back, per
// environment; reset(env_mask) zeroes the environments that finished. An observation that
// carries the state keys is used as given and the actor's copy is left alone (the stateless
// form); one that carries some of them but not all is an error naming the missing ones.
//
// Observations: every declared input (tdp::policy::DeclaredInputs) must be present with the
// observation's batch_size + its declared shape and dtype, else act() throws
// std::invalid_argument naming the key, what is declared and what was given; entries the spec
// does not declare are ignored.
//
// Thread safety: act() may be called from many threads at once. Each call's interaction type and
// aggregation mode are scoped to its thread; the kept recurrent state is guarded by a mutex
// (threads sharing one recurrent actor share that state, so give each simulator thread its own
// recurrent actor, or pass the state in the observation). Draws come from the generator passed
// to act(), else from the actor's own: that one is shared by the threads using the actor, safe
// but interleaved, so for per-thread reproducibility use one actor per thread or pass a
// generator per call. set_interaction_type() is not synchronized with act().
//
// The fused CPU path (sdk/fused, issue 14): at load a CPU actor lowers what it can of its
// policy to a static float32 plan that runs without LibTorch's dispatcher (about a microsecond
// at batch 1 for the CartPole and Pendulum policies): MLP and Linear networks, GRU and LSTM
// cells, one head of the common distributions or a composite of them (sdk/fused/plan.h lists
// what lowers). ActorOptions::backend chooses: kAuto (the default) uses the plan at batch
// sizes <= fused_max_batch and LibTorch above, or when the policy does not lower
// (fused_status() says why); kLibTorch never builds a plan; kFused makes a
// policy that does not lower a load error naming the module and the reason. Both paths give
// the same keys and shapes; deterministic types the same values to 1e-5. The plan's draws come
// from a counter-based Philox stream seeded by ActorOptions::seed: which values a call draws
// depends on the seed and the call's index only, so a seeded actor repeats its draws on any
// number of threads. A recurrent policy keeps the recurrent-state rules above on the plan (the
// kept state is the same one either path reads and writes, so calls may alternate between
// them). Calls given an explicit generator, observations with several batch dims and
// interaction types without a closed form (categorical MEAN, tanh_normal MODE...) run on LibTorch.
//
// The flat API, for simulators that hold plain arrays (caller-owned buffers; no allocation per
// call on the fused path after a thread's first call):
//
//   std::vector<float> obs(n * actor->flat_observation_size()), act(n * actor->flat_action_size()), lp(n);
//   absl::Status s = actor->act_flat(obs.data(), n, act.data(), lp.data());   // lp may be null
//
// observation is [n, flat_observation_size()] row-major float32 (the spec's one input);
// action gets [n, flat_action_size()] (the probabilistic module's sample; categorical indices
// as floats) and log_prob [n] (or [n, flat_action_size()] for a per-element "normal"). It
// needs a lowerable policy with one input, no recurrent state and no composite head (else
// FailedPrecondition with the reason, as flat_status() says; those run on the plan through
// act()). At batch sizes above fused_max_batch under kAuto, and for interaction types the plan
// lacks, it runs act() on LibTorch and copies out.
//
// On a GPU (ActorOptions().device("cuda:0")), an actor replays captured CUDA graphs
// (sdk/nn/cuda_graph_module.h) when its spec's `cuda_graph` block or ActorOptions::cuda_graph
// enables them: one graph per (batch bucket, interaction type), all in one memory pool. A call is
// padded up to the smallest bucket that fits and split into chunks of the largest bucket beyond
// it (sdk/actor/batch_buckets.h); padding rows never reach the outputs or the kept recurrent
// state. Graphs for the actor's interaction type are captured at load (capture_at_load), others
// on their first call; captures take a process-wide lock. Random types draw fresh samples on
// every replay from the actor's seeded generator, so a seeded actor repeats its sequence. Graph
// calls are serialized per actor (the graphs share their memory pool) and return once their
// outputs are ready. Calls given an explicit generator, observations with several batch dims and
// empty batches run eagerly. Enabled on a CPU device: one warning at load, then eager calls.
//
//   auto gpu = tdp::actor::Actor::load("policies/pendulum_tanh_gaussian.pbtxt",
//       tdp::actor::ActorOptions().device(c10::Device("cuda:0"))
//           .cuda_graph(tdp::actor::CudaGraphOptions().batch_buckets({1, 64, 1024})));
//
// This header includes no protobuf or torch::nn headers: spec() and module() return types that
// are only declared here; include "tdpolicy/spec.pb.h" / "sdk/nn/tensordict_module_base.h" (or
// "sdk/policy/policy.h") to use them. Actor is movable, not copyable; a moved-from Actor may only
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
#include "sdk/policy/cuda_graph_settings.h"
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

// Which implementation runs act(); see the header comment.
enum class Backend { kAuto, kLibTorch, kFused };

// CUDA-graph capture for an actor on a GPU (see the header comment; the spec's `cuda_graph` block).
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
  // The fused CPU plan or LibTorch (CPU devices only; see the header comment).
  TORCH_ARG(Backend, backend) = Backend::kAuto;
  // Under kAuto, the largest batch the fused plan runs (measured: tests/benchmarks/fused_benchmark.cc).
  TORCH_ARG(int64_t, fused_max_batch) = 64;
  // CUDA graphs on a GPU; empty: the spec's cuda_graph block (off when the spec has none).
  TORCH_ARG(std::optional<CudaGraphOptions>, cuda_graph);
};

class Actor {
 public:
  static absl::StatusOr<std::unique_ptr<Actor>> load(const std::string& spec_path, ActorOptions options = {});
  // The same, with the loader's limits and file rules (sdk/policy/policy.h: LoadOptions; its
  // run_self_tests is replaced by options.run_self_tests()).
  static absl::StatusOr<std::unique_ptr<Actor>> load(const std::string& spec_path, ActorOptions options,
                                                     const policy::LoadOptions& load_options);
  // An actor over an already loaded policy (sdk/policy/policy.h). Throws std::invalid_argument
  // when it has no module or the device cannot be used.
  Actor(policy::Policy policy, ActorOptions options = {});
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

  // The flat API (see the header comment). `type` for this call; empty: the actor's.
  absl::Status act_flat(const float* observation, int64_t batch, float* action, float* log_prob = nullptr,
                        std::optional<nn::InteractionType> type = std::nullopt);
  // OK when act_flat() applies: a fused plan, one input, no recurrent state, no composite head;
  // else why not (FailedPrecondition).
  absl::Status flat_status() const;
  int64_t flat_observation_size() const;  // 0 when flat_status() is not OK
  int64_t flat_action_size() const;
  // Whether a call of `batch` rows under `type` runs on the fused plan.
  bool uses_fused(int64_t batch, std::optional<nn::InteractionType> type) const;
  // OK when the policy lowered to a fused plan; else why not (or that kLibTorch was asked).
  absl::Status fused_status() const;
  // One line per module: its path in the spec and which path runs it.
  std::vector<std::string> describe_backend() const;
  // The policy's parameters were changed in place (a trainer's optimizer step on module()): the
  // fused plan, which runs on its own copy of the weights, lowers them again. The LibTorch path
  // and captured CUDA graphs read the module's parameters themselves and need nothing. Not
  // synchronized with act(): call it between calls, as a trainer does after each update.
  // An error (the plan no longer lowers: a parameter changed shape) leaves the actor as it was.
  absl::Status refresh_parameters();

  // The CUDA-graph settings calls use; empty when calls run without graphs.
  const std::optional<CudaGraphOptions>& cuda_graph() const;
  // How many graphs are captured so far (one per bucket and interaction type used).
  int64_t captured_graph_count() const;

  void set_interaction_type(std::optional<nn::InteractionType> type);
  const ActorOptions& options() const;
  const tdpolicy::PolicySpec& spec() const;
  // tdp::policy::state_keys(spec()): the recurrent state the actor keeps.
  const std::vector<NestedKey>& state_keys() const;
  const std::shared_ptr<nn::TensorDictModuleBase>& module() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tdp::actor
