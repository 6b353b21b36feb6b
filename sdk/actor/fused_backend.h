// FusedBackend: runs calls on the fused CPU plan (sdk/fused/plan.h) the policy was lowered to
// when the actor was made: about a microsecond at batch 1 for small policies. It takes a call
// when the policy lowered, the call has one batch dim within the batch limit, an interaction
// type the plan computes, no generator of its own (the plan draws from a counter-based Philox
// stream seeded by ActorOptions::seed, so a seeded actor repeats its draws on any number of
// threads), and inputs of their declared dtypes and shapes; anything else goes to LibTorch, which
// says what is wrong and gives the same keys, shapes and recurrent-state rules. Internal to
// sdk/actor.
#pragma once

#include <absl/status/status.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "sdk/actor/backend.h"
#include "sdk/actor/current_plan.h"
#include "sdk/fused/plan.h"

namespace tdp::actor {

class FusedBackend : public ActorBackend {
 public:
  // Lowers the policy unless the options rule the plan out; throws std::invalid_argument when
  // kFused was asked and it does not lower.
  explicit FusedBackend(ActorCore& core);

  bool accepts(const ActCall& call) const override;
  TensorDict act(const ActCall& call) override;
  // Writes the outputs straight into out's tensors where they can take them (no allocation).
  void act_into(const ActCall& call, TensorDict& out) override;
  void describe(ActorInfo& info) const override;

  // Whether a call of `batch` rows under `type` (empty: the plan's default) runs on the plan.
  bool runs(int64_t batch, std::optional<nn::InteractionType> type) const;
  // OK when act_flat applies; else why not (FailedPrecondition).
  absl::Status flat_status() const;
  // The flat call on the plan as it is when the call starts; runs(batch, type) must hold.
  absl::Status act_flat(const float* observation, int64_t batch, float* action, float* log_prob,
                        std::optional<nn::InteractionType> type);
  // Lowers the module's current parameters again and swaps the new plan in; an error (a plan of
  // another layout: a parameter changed shape) leaves the plan as it was. Safe while other
  // threads act: a call runs wholly on the plan it took when it started, the old or the new one.
  absl::Status refresh();
  // The first plan lowered (null when the policy did not lower; status() says why): its slots,
  // shapes and heads are every later plan's too, its weights may be out of date.
  const fused::FusedPlan* layout() const { return layout_.get(); }
  const absl::Status& status() const { return status_; }

 private:
  // Runs the call on the plan and sets its outputs into `out`; with reuse_out, into out's own
  // tensors where they can take the values in place.
  void run(const ActCall& call, TensorDict& out, bool reuse_out);
  nn::InteractionType plan_type(std::optional<nn::InteractionType> type) const;
  absl::StatusOr<std::shared_ptr<const fused::FusedPlan>> lower() const;

  ActorCore& core_;
  // The first plan lowered: what accepts(), runs() and describe() read. A refresh keeps the
  // layout (slots, shapes, heads), so these answers hold for every later plan too.
  std::shared_ptr<const fused::FusedPlan> layout_;
  // The plan calls run, with the refreshed weights, held once per call: a refresh racing a call
  // never frees the plan under it nor mixes two plans in one call.
  CurrentPlan current_;
  std::mutex refresh_mutex_;  // one refresh at a time
  absl::Status status_ = absl::OkStatus();
  // Calls on the plan so far: the Philox counter of the next one.
  std::atomic<uint64_t> calls_{0};
  // The plan's slots that act() returns: the returned keys', and every entry with return_all_entries.
  std::vector<int> output_slots_;
  std::vector<int> all_slots_;
};

}  // namespace tdp::actor
