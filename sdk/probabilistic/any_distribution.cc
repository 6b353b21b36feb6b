#include "sdk/probabilistic/any_distribution.h"

#include <stdexcept>
#include <utility>

namespace tdp::nn {

AnyDistribution::AnyDistribution(dist::DistributionPtr distribution)
    : distribution_(std::move(distribution)) {
  if (distribution_ == nullptr) throw std::invalid_argument("AnyDistribution: null distribution.");
}

AnyDistribution::AnyDistribution(std::shared_ptr<const dist::CompositeDistribution> composite)
    : composite_(std::move(composite)) {
  if (composite_ == nullptr) throw std::invalid_argument("AnyDistribution: null composite.");
}

const dist::DistributionPtr& AnyDistribution::distribution() const {
  if (is_composite()) {
    throw std::logic_error("AnyDistribution holds a CompositeDistribution, not a Distribution.");
  }
  return distribution_;
}

const std::shared_ptr<const dist::CompositeDistribution>& AnyDistribution::composite() const {
  if (!is_composite()) {
    throw std::logic_error("AnyDistribution holds a " + distribution_->name() +
                           ", not a CompositeDistribution.");
  }
  return composite_;
}

bool AnyDistribution::has_rsample() const {
  if (!is_composite()) return distribution_->has_rsample();
  for (const auto& part : composite_->dists()) {
    if (!part.second->has_rsample()) return false;
  }
  return true;
}

std::string AnyDistribution::to_string() const {
  return is_composite() ? composite_->to_string() : distribution_->to_string();
}

std::ostream& operator<<(std::ostream& out, const AnyDistribution& distribution) {
  return out << distribution.to_string();
}

}  // namespace tdp::nn
