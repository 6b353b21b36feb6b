// composite_lp_aggregate(): whether a CompositeDistribution (and so a probabilistic module
// with several outputs) sums the log-probabilities of its parts into one tensor, and the
// CompositeLpAggregateGuard scope that sets it. They live in tdp::dist (sdk/distributions/
// composite_lp_aggregate.h); this header puts them in tdp::nn next to InteractionType, where
// tensordict users look for them (tensordict.nn.composite_lp_aggregate).
//
//   tdp::nn::CompositeLpAggregateGuard aggregate(true, /*thread_local_only=*/true);
//   tdp::nn::ProbabilisticTensorDictModule actor(options);   // built while aggregating
//   bool summed = tdp::nn::composite_lp_aggregate();          // true on this thread
#pragma once

#include "sdk/distributions/composite_lp_aggregate.h"

namespace tdp::nn {

using ::tdp::dist::composite_lp_aggregate;
using ::tdp::dist::composite_lp_aggregate_mode;
using ::tdp::dist::CompositeLpAggregateGuard;
using ::tdp::dist::set_composite_lp_aggregate;

}  // namespace tdp::nn
