#include "sdk/distributions/bernoulli.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>

#include <limits>
#include <stdexcept>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

std::vector<int64_t> checked_batch(const at::Tensor& probs, const at::Tensor& logits) {
  if (probs.defined() == logits.defined()) {
    throw std::invalid_argument("Bernoulli: either `probs` or `logits` must be specified, but not both.");
  }
  return (probs.defined() ? probs : logits).sizes().vec();
}

}  // namespace

Bernoulli::Bernoulli(const at::Tensor& probs, const at::Tensor& logits,
                     c10::optional<bool> validate_args)
    : Distribution(checked_batch(probs, logits), {}, validate_args),
      from_probs_(probs.defined()) {
  if (from_probs_) {
    probs_ = probs;
    check_param("probs", probs_, Support::unit_interval());
    logits_ = internal::probs_to_logits(probs_, /*is_binary=*/true);
  } else {
    logits_ = logits;
    check_param("logits", logits_, Support::real());
    probs_ = internal::logits_to_probs(logits_, /*is_binary=*/true);
  }
}

at::Tensor Bernoulli::sample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  c10::NoGradGuard no_grad;
  return at::bernoulli(probs_.expand(extended_shape(sample_shape)), generator);
}

at::Tensor Bernoulli::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  // binary_cross_entropy_with_logits needs a floating target; integer actions are common.
  at::Tensor target = at::isFloatingType(value.scalar_type()) ? value : value.to(logits_.scalar_type());
  std::vector<at::Tensor> both = at::broadcast_tensors({logits_, target});
  return -at::binary_cross_entropy_with_logits(both[0], both[1], {}, {}, at::Reduction::None);
}

at::Tensor Bernoulli::entropy() const {
  return at::binary_cross_entropy_with_logits(logits_, probs_, {}, {}, at::Reduction::None);
}

at::Tensor Bernoulli::mode() const {
  at::Tensor mode = (probs_ >= 0.5).to(probs_.scalar_type());
  return mode.masked_fill(probs_ == 0.5, std::numeric_limits<double>::quiet_NaN());
}

at::Tensor Bernoulli::variance() const { return probs_ * (1 - probs_); }

std::vector<std::pair<std::string, at::Tensor>> Bernoulli::printed_params() const {
  if (from_probs_) return {{"probs", probs_}};
  return {{"logits", logits_}};
}

}  // namespace tdp::dist
