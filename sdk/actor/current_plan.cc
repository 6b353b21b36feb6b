#include "sdk/actor/current_plan.h"

#include <thread>
#include <utility>

namespace tdp::actor {

CurrentPlan::Hold CurrentPlan::hold() const {
  for (;;) {
    const int slot = current_.load();
    readers_[slot].fetch_add(1);
    if (current_.load() == slot) return Hold(plans_[slot].get(), &readers_[slot]);
    readers_[slot].fetch_sub(1);  // replaced meanwhile: take the new one
  }
}

void CurrentPlan::replace(std::shared_ptr<const fused::FusedPlan> plan) {
  const int old = current_.load();
  const int next = 1 - old;
  // No call holds the other slot's plan: the previous replace() drained it, and a call that
  // counts itself there now finds it is not current before it reads it.
  plans_[next] = std::move(plan);
  current_.store(next);
  while (readers_[old].load() != 0) std::this_thread::yield();
  plans_[old].reset();
}

}  // namespace tdp::actor
