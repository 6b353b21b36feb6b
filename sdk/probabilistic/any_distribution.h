// AnyDistribution: what a probabilistic module's get_dist() returns, either one
// tdp::dist::Distribution (a tensor-valued sample) or a tdp::dist::CompositeDistribution (a
// TensorDict-valued sample). Python returns either object from the same method; C++ needs one
// type for both. It is a cheap, shareable handle: the distribution inside is immutable.
//
//   tdp::nn::AnyDistribution d = actor->get_dist(td);
//   if (d.is_composite()) {
//     tdp::TensorDict s = d.composite()->sample({}, gen);
//   } else {
//     at::Tensor lp = d.distribution()->log_prob(td.get("action"));
//   }
//   std::cout << d.to_string();   // "Normal(loc: [3, 4], scale: [3, 4])"
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "sdk/distributions/composite_distribution.h"
#include "sdk/distributions/distribution.h"

namespace tdp::nn {

class AnyDistribution {
 public:
  AnyDistribution(dist::DistributionPtr distribution);  // NOLINT: implicit by design
  AnyDistribution(std::shared_ptr<const dist::CompositeDistribution> composite);  // NOLINT

  bool is_composite() const { return composite_ != nullptr; }
  // The single distribution; throws std::logic_error when this holds a composite.
  const dist::DistributionPtr& distribution() const;
  // The composite; throws std::logic_error when this holds a single distribution.
  const std::shared_ptr<const dist::CompositeDistribution>& composite() const;
  // Whether a RANDOM draw can be reparameterized (for a composite: every part can).
  bool has_rsample() const;

  // The held distribution's printed form.
  std::string to_string() const;

 private:
  dist::DistributionPtr distribution_;
  std::shared_ptr<const dist::CompositeDistribution> composite_;
};

std::ostream& operator<<(std::ostream& out, const AnyDistribution& distribution);

}  // namespace tdp::nn
