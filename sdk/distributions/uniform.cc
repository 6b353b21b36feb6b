#include "sdk/distributions/uniform.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {

Uniform::Uniform(const at::Tensor& low, const at::Tensor& high, c10::optional<bool> validate_args)
    : Uniform(internal::broadcast_all<2>({internal::require_defined(low, "Uniform", "low"),
                                          internal::require_defined(high, "Uniform", "high")}),
              validate_args) {}

Uniform::Uniform(std::array<at::Tensor, 2> low_high, c10::optional<bool> validate_args)
    : Distribution(low_high[0].sizes(), {}, validate_args),
      low_(std::move(low_high[0])),
      high_(std::move(low_high[1])) {
  if (this->validate_args()) {
    check_param("low", low_, Support::real());
    check_param("high", high_, Support::real());
    if (!at::lt(low_, high_).all().item<bool>()) {
      throw std::invalid_argument("Uniform is not defined when low >= high: " + to_string());
    }
  }
}

at::Tensor Uniform::rsample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  at::Tensor rand = at::rand(extended_shape(sample_shape), generator, low_.options());
  return low_ + rand * (high_ - low_);
}

at::Tensor Uniform::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  at::Tensor lb = low_.le(value).type_as(low_);
  at::Tensor ub = high_.gt(value).type_as(low_);
  return at::log(lb.mul(ub)) - at::log(high_ - low_);
}

at::Tensor Uniform::entropy() const { return at::log(high_ - low_); }
at::Tensor Uniform::mean() const { return (high_ + low_) / 2; }
at::Tensor Uniform::mode() const { return std::numeric_limits<double>::quiet_NaN() * high_; }
at::Tensor Uniform::stddev() const { return (high_ - low_) / std::pow(12.0, 0.5); }
at::Tensor Uniform::variance() const { return (high_ - low_).pow(2) / 12; }

at::Tensor Uniform::cdf(const at::Tensor& value) const {
  validate_sample(value, "cdf");
  at::Tensor result = (value - low_) / (high_ - low_);
  return result.clamp(0, 1);
}

at::Tensor Uniform::icdf(const at::Tensor& value) const {
  return value * (high_ - low_) + low_;
}

}  // namespace tdp::dist
