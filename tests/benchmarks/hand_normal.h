// The Normal log-density written by hand, as the hand-written baselines compute it:
// torch's -(value - loc)^2 / (2 scale^2) - log(scale) - log(sqrt(2 pi)), the ops and their order
// that tdp::dist::Normal::log_prob issues, one or two per statement as it does, so that each
// intermediate is freed once the next exists. A baseline written as one expression keeps all of
// them alive to its end, which at batch 1 costs it glibc's allocator slow path (about 2k
// instructions a step): the baselines and the SDK then differ in how long temporaries live, not
// only in the SDK's layers.
//
//   at::Tensor log_prob = tdp::benchmarks::normal_log_density(action, loc, scale);
#pragma once

#include <ATen/ATen.h>

#include <cmath>

namespace tdp::benchmarks {

inline at::Tensor normal_log_density(const at::Tensor& value, const at::Tensor& loc, const at::Tensor& scale) {
  at::Tensor log_prob = (value - loc).pow(2);
  log_prob = -log_prob;
  log_prob = log_prob / (2 * scale.pow(2));
  log_prob = log_prob - scale.log();
  return log_prob - std::log(std::sqrt(2 * M_PI));
}

}  // namespace tdp::benchmarks
