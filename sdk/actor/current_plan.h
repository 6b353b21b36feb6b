// CurrentPlan: the fused plan the calls run, which refresh_parameters() replaces from any thread
// while other threads call. A call takes a Hold on the plan for its duration: two atomic additions
// on a counter, no lock and no reference count (an atomic shared_ptr load would take a lock from
// libstdc++'s pool and update a reference count twice: 25-30 ns, a twentieth of a batch-1 call).
// replace() publishes the new plan in the other of two slots, then waits for the calls still
// holding the old plan to finish before it frees it. Internal to sdk/actor.
//
//   CurrentPlan current;
//   current.replace(std::move(lowered));                  // one replacement at a time
//   { CurrentPlan::Hold plan = current.hold(); plan->run_flat(...); }   // any thread, any time
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "sdk/fused/plan.h"

namespace tdp::actor {

class CurrentPlan {
 public:
  // A call's hold on the plan it took: the plan stays alive, and stays the one this call runs,
  // until the hold ends. Returned by hold() only.
  class Hold {
   public:
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { readers_->fetch_sub(1, std::memory_order_release); }

    const fused::FusedPlan& operator*() const { return *plan_; }
    const fused::FusedPlan* operator->() const { return plan_; }

   private:
    friend class CurrentPlan;
    Hold(const fused::FusedPlan* plan, std::atomic<int64_t>* readers) : plan_(plan), readers_(readers) {}

    const fused::FusedPlan* plan_;
    std::atomic<int64_t>* readers_;
  };

  CurrentPlan() = default;
  CurrentPlan(const CurrentPlan&) = delete;
  CurrentPlan& operator=(const CurrentPlan&) = delete;

  // The plan now; replace() must have been called once. Never blocks.
  Hold hold() const;
  // Makes `plan` the one later holds take and frees the previous plan once no hold is left on it
  // (waits for those calls to end). Callers serialize their replacements, and hold no lock a call
  // may wait for (Python's bindings release the GIL around a refresh: a call freeing a tensor
  // Python wrapped takes it).
  void replace(std::shared_ptr<const fused::FusedPlan> plan);

 private:
  // The slot holds take; the other slot is the previous plan until replace() has drained its
  // holds, then empty. A reader counts itself in a slot's readers, then checks that the slot is
  // still current: either replace() sees its count and waits for it, or it sees the switch and
  // tries again (both sides sequentially consistent).
  std::atomic<int> current_{0};
  std::shared_ptr<const fused::FusedPlan> plans_[2];
  mutable std::atomic<int64_t> readers_[2] = {};
};

}  // namespace tdp::actor
