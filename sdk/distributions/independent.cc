#include "sdk/distributions/independent.h"

#include <stdexcept>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

std::vector<int64_t> checked_shape(const DistributionPtr& base, int64_t ndims, bool batch) {
  if (!base) throw std::invalid_argument("Independent: base_distribution is null");
  const int64_t base_batch = static_cast<int64_t>(base->batch_shape().size());
  if (ndims < 0 || ndims > base_batch) {
    throw std::invalid_argument(
        "Independent: expected 0 <= reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
        "actual " + std::to_string(ndims) + " vs " + std::to_string(base_batch) + " for " +
        base->to_string());
  }
  const std::vector<int64_t> shape = internal::concat(base->batch_shape(), base->event_shape());
  const size_t cut = static_cast<size_t>(base_batch - ndims);
  return batch ? std::vector<int64_t>(shape.begin(), shape.begin() + cut)
               : std::vector<int64_t>(shape.begin() + cut, shape.end());
}

}  // namespace

Independent::Independent(DistributionPtr base_distribution, int64_t reinterpreted_batch_ndims,
                         c10::optional<bool> validate_args)
    : Distribution(checked_shape(base_distribution, reinterpreted_batch_ndims, true),
                   checked_shape(base_distribution, reinterpreted_batch_ndims, false),
                   validate_args),
      base_(std::move(base_distribution)),
      reinterpreted_batch_ndims_(reinterpreted_batch_ndims) {}

at::Tensor Independent::sample(c10::IntArrayRef sample_shape,
                               const GeneratorOpt& generator) const {
  return base_->sample(sample_shape, generator);
}

at::Tensor Independent::rsample(c10::IntArrayRef sample_shape,
                                const GeneratorOpt& generator) const {
  return base_->rsample(sample_shape, generator);
}

at::Tensor Independent::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  return internal::sum_rightmost(base_->log_prob(value), reinterpreted_batch_ndims_);
}

at::Tensor Independent::entropy() const {
  return internal::sum_rightmost(base_->entropy(), reinterpreted_batch_ndims_);
}

Support Independent::support() const {
  return Support::independent(base_->support(), reinterpreted_batch_ndims_);
}

std::string Independent::to_string() const {
  return "Independent(" + base_->to_string() + ", " +
         std::to_string(reinterpreted_batch_ndims_) + ")";
}

}  // namespace tdp::dist
