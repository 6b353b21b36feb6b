// FusedPlan: a policy lowered, once, to a static list of float32 kernels over one contiguous
// weight arena, so that a small policy runs at batch 1 in about a microsecond instead of tens
// through LibTorch's dispatcher. tdp::actor::Actor builds one at load (ActorOptions::backend)
// and replays it; it is also usable on its own.
//
//   absl::StatusOr<std::shared_ptr<const tdp::fused::FusedPlan>> plan = tdp::fused::FusedPlan::lower(policy);
//   if (!plan.ok()) std::cerr << plan.status();   // "module.sequential.modules[1]: a TensorDictModule ..."
//   float obs[4] = {0, 0, 0.05f, 0}, action[1], log_prob[1];
//   tdp::fused::FlatOutputs out{action, log_prob};
//   absl::Status s = (*plan)->run_flat(obs, /*batch=*/1, tdp::nn::InteractionType::kRandom, {seed, call}, out);
//
// What lowers: float32 inputs of one dim, any number (the observation, a recurrent state...),
// and float64 ones that a to_dtype to float32 reads (TorchRL's DoubleToFloat: the caller's rows
// are cast to float32, which is that cast); ObservationNorm (clip included) and ToDtype to float32;
// (nested) TensorDictSequential / ProbabilisticTensorDictSequential; TensorDictModules around
// Mlp (every activation, layer_norm), torch::nn::Linear, MappingModule (the built-in mappings),
// NormalParamExtractor, AddStateIndependentNormalScale, GruCell (in_keys input, hidden; out_keys
// hidden) and LstmCell (input, h, c; h, c) with torch.nn.GRUCell / LSTMCell's equations; lstm
// and gru modules (TorchRL's LSTMModule / GRUModule, any number of layers: the state inputs
// [num_layers, hidden_size], the is_init input, bool, passed to run() as 0 / 1 floats);
// multi_agent_mlp (TorchRL's MultiAgentMLP, every centralized / share_params variant: its
// [n_agents, features] input and output held flat, each agent's MLP on its columns; such a value
// is read by a multi_agent_mlp, a normal_param_extractor (each agent's row split), elementwise
// activation and mapping layers, and a normal, independent_normal, tanh_normal, delta or
// tanh_delta head, one log-prob per agent: MAPPO's actor); at most
// one ProbabilisticTensorDictModule, last, with categorical, one_hot_categorical,
// masked_categorical, masked_one_hot_categorical (the mask: a bool input of one flag per class,
// or one per row, passed to run() as 0 / 1 floats), bernoulli, normal, independent_normal,
// tanh_normal or tanh_delta (number or tensor bounds that broadcast onto the parameter, per
// dimension or per agent), delta, or a CompositeDistribution of those parts
// (each part's sample and log-prob, and their sum under composite_lp_aggregate, at the keys the
// LibTorch module writes); no num_samples, no own generator; a q_value module (TorchRL's
// QValueModule, one_hot or categorical, with or without an action mask (a bool input of one
// flag per action), without a support) and an egreedy module (the
// action as is: RANDOM and calls without a type, where it explores, are reported by check() and
// run on LibTorch, whose draws the plan does not reproduce). A module's output that overwrites
// an input (a recurrent state) goes to a new slot: the input keeps the old value. Anything else
// is "not lowerable": lower() returns an error naming the module's path in the spec and why
// (a second probabilistic module, as in an autoregressive policy, among them). Interaction
// types a head has no closed form for (what LibTorch throws for, or estimates by drawing:
// (one-hot) categorical mean/median, bernoulli, independent_normal and delta median,
// tanh_normal mode/median/mean, tanh_delta median, any composite's median) are reported by check(); the actor
// runs those on LibTorch.
//
// lower() walks policy.spec's module tree beside policy.module: each spec node's kind picks its
// lowering (in plan.cc, a table keyed by tdpolicy.Network's kind: a network kind without an entry
// there is not lowerable), the built module gives the weights. A policy whose spec does not
// describe its module (a tree put together in C++ with a header-only spec) is lowered from the
// spec export_spec() writes for it.
//
// lower() reads the policy's inputs and outputs from its signature (sdk/policy/signature.h) and
// the probabilistic module's log-prob keys in the thread's composite_lp_aggregate mode, which
// must be the one the module was built under (Actor lowers under its own). A plan computes
// every output of the signature (else it does not lower), so it returns what LibTorch returns.
//
// The flat API (run_flat, the action/log-prob slots and sizes) is for plans of one input and
// one non-composite head: flat_status() says why not otherwise; run() takes every plan.
//
// Randomness: Philox4x32-10 keyed by the stream's seed, counter (call, row, block): a call's
// draws depend on (seed, call, row) only; a composite's parts draw from disjoint blocks.
// Normals by Box-Muller, categorical by inverse CDF (a masked one over its allowed classes only).
// tanh_normal samples keep the pre-tanh value and score the log-prob from it.
//
// Thread safety: a plan is immutable; run() may be called from any number of threads. Each
// thread has its own scratch (allocated on its first call, grown only for a larger plan): no
// heap allocation per call after that. A call of more than 256 rows spreads its tiles of 64 over
// LibTorch's intra-op threads (at::get_num_threads(), as LibTorch's own ops do), with the same
// results as on one thread.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sdk/fused/kernels.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/nested_key.h"

namespace tdp::policy {
struct Policy;
}  // namespace tdp::policy

namespace tdp::fused {

// Which random numbers a call uses: (seed, call) selects a disjoint Philox stream.
struct RandomStream {
  uint64_t seed = 0;
  uint64_t call = 0;
};

// Caller-owned outputs of run_flat: action [batch, action_size()] (categorical indices as
// floats) and, when not null, log_prob [batch, log_prob_size()].
struct FlatOutputs {
  float* action = nullptr;
  float* log_prob = nullptr;
};

class FusedPlan {
 public:
  // One of the values the plan computes, per row: a float vector of `width` written to a
  // TensorDict with the batch dims followed by `shape` (empty: one value per row), as int64
  // when `integer` (categorical samples).
  struct Slot {
    NestedKey key;
    int64_t width = 0;
    std::vector<int64_t> shape;
    bool integer = false;
    // An input the policy declares float64, which only a to_dtype (DoubleToFloat) reads: the
    // caller's rows are cast to float32 (that cast is the to_dtype) before run() reads them.
    bool float64 = false;
    // An input the policy declares bool (an action mask, an is_init): run() reads it as 0 / 1
    // floats (nonzero: true); only a masked categorical's mask, a recurrent module's is_init and
    // a to_dtype read one.
    bool boolean = false;
  };
  // Where run() writes slot `slot`'s rows: [batch, width] contiguous floats.
  struct Destination {
    int slot = -1;
    float* data = nullptr;
  };

  static absl::StatusOr<std::shared_ptr<const FusedPlan>> lower(const policy::Policy& policy);

  // OK when run() can compute `type`; else why not (FailedPrecondition naming the head).
  const absl::Status& check(nn::InteractionType type) const;
  // The head's default_interaction_type (kDeterministic without a head).
  nn::InteractionType default_interaction_type() const;

  // The slots of the signature's inputs, in their order: what run() reads.
  const std::vector<int>& input_slots() const;
  // The slots of the signature's outputs (what a call returns), in their order.
  const std::vector<int>& output_slots() const;
  // The slot holding `key` after the modules ran (the last one written there, else the
  // input's), -1 when the plan has none.
  int find_slot(const NestedKey& key) const;
  const Slot& slot(int index) const;
  // Every slot, in the order the modules write them (temporaries are keyed "_").
  int slot_count() const;

  // OK when the flat API applies (one input, no composite head); else why not (FailedPrecondition).
  const absl::Status& flat_status() const;
  // The flat API's sizes (0 when flat_status() is not OK), action (the head's sample, else the
  // first output key) and log-prob slots.
  int64_t observation_size() const;
  int action_slot() const;
  int log_prob_slot() const;  // -1 without a probabilistic head
  int64_t action_size() const;
  int64_t log_prob_size() const;

  // Computes rows [0, batch) of `inputs` (inputs[i] is [batch, width] for input_slots()[i])
  // and writes the destinations. `type` must pass check(). No allocation after the thread's
  // first call. Throws std::invalid_argument, naming the mask's key and the row, when a masked
  // categorical's row allows no class under kRandom, before any destination is written: there is
  // nothing to draw, and LibTorch's sampling raises there too (its probabilities are NaN).
  void run(const float* const* inputs, int64_t batch, nn::InteractionType type, const RandomStream& stream,
           const Destination* destinations, int count) const;
  absl::Status run_flat(const float* observation, int64_t batch, nn::InteractionType type, const RandomStream& stream,
                        const FlatOutputs& out) const;

  // One line per module: its path in the spec and what the plan runs for it.
  const std::vector<std::string>& description() const;

  struct Impl;
  explicit FusedPlan(std::unique_ptr<Impl> impl);
  ~FusedPlan();

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tdp::fused
