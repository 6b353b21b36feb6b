// composite_lp_aggregate(): whether a CompositeDistribution sums the log-probabilities (and
// entropies) of its parts into one tensor (true) or returns them per part in a TensorDict
// (false), as tensordict.nn.composite_lp_aggregate / set_composite_lp_aggregate do. The
// default is false unless the environment variable COMPOSITE_LP_AGGREGATE is set to a truth
// value ("1", "true", "yes", "on", "t", "y"; "0", "false", ... for false).
//
//   {
//     tdp::dist::CompositeLpAggregateGuard aggregate(true);   // process-wide inside the scope
//     at::Tensor lp = std::get<at::Tensor>(composite.log_prob(sample));
//   }
//   tdp::dist::CompositeLpAggregateGuard mine(false, /*thread_local_only=*/true);
//   bool summed = tdp::dist::composite_lp_aggregate();        // false on this thread
//
// A thread-local setting, when present, wins over the process-wide one on its thread. Guards
// restore the previous setting when they go out of scope, so they nest; destroy them in
// reverse order of creation (as scopes do).
#pragma once

#include <optional>

namespace tdp::dist {

// The setting in force on this thread: thread-local guard, else process-wide guard or
// set_composite_lp_aggregate, else COMPOSITE_LP_AGGREGATE, else false. Throws
// std::invalid_argument when COMPOSITE_LP_AGGREGATE holds something that is not a truth value.
bool composite_lp_aggregate();
// The same without the final default: nullopt when nothing set it (tensordict's get_mode()).
std::optional<bool> composite_lp_aggregate_mode();
// Sets the process-wide setting for good (tensordict's set_composite_lp_aggregate(mode).set());
// nullopt returns to the environment default.
void set_composite_lp_aggregate(std::optional<bool> mode);

class CompositeLpAggregateGuard {
 public:
  explicit CompositeLpAggregateGuard(bool mode, bool thread_local_only = false);
  ~CompositeLpAggregateGuard();
  CompositeLpAggregateGuard(const CompositeLpAggregateGuard&) = delete;
  CompositeLpAggregateGuard& operator=(const CompositeLpAggregateGuard&) = delete;

 private:
  bool thread_local_only_;
  std::optional<bool> previous_;
};

}  // namespace tdp::dist
