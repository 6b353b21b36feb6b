#include "sdk/distributions/truncated_normal.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

const double kSqrt2 = std::sqrt(2.0);
const double kInvSqrt2Pi = 1 / std::sqrt(2 * M_PI);
const double kInvSqrt2 = 1 / std::sqrt(2.0);
const double kLogInvSqrt2Pi = std::log(kInvSqrt2Pi);
const double kLogSqrt2PiE = 0.5 * std::log(2 * M_PI * M_E);

at::Tensor little_phi(const at::Tensor& x) { return (-(x.pow(2)) * 0.5).exp() * kInvSqrt2Pi; }

at::Tensor inv_big_phi(const at::Tensor& x) { return kSqrt2 * (2 * x - 1).erfinv(); }

std::array<at::Tensor, 2> broadcast_bounds(const at::Tensor& a, const at::Tensor& b, const std::string& name) {
  internal::require_defined(a, name, "a");
  internal::require_defined(b, name, "b");
  if (a.scalar_type() != b.scalar_type()) {
    throw std::invalid_argument(name + ": truncation bounds types are different (" +
                                std::string(c10::toString(a.scalar_type())) + " vs " +
                                c10::toString(b.scalar_type()) + ")");
  }
  return internal::broadcast_all<2>({a, b});
}

}  // namespace

TruncatedStandardNormal::TruncatedStandardNormal(const at::Tensor& a, const at::Tensor& b,
                                                 c10::optional<bool> validate_args)
    : TruncatedStandardNormal(a, b, validate_args, "TruncatedStandardNormal") {}

TruncatedStandardNormal::TruncatedStandardNormal(const at::Tensor& a, const at::Tensor& b,
                                                 c10::optional<bool> validate_args,
                                                 const std::string& display_name)
    : Distribution(at::broadcast_tensors({internal::require_defined(a, display_name, "a"),
                                          internal::require_defined(b, display_name, "b")})[0]
                       .sizes()
                       .vec(),
                   {}, validate_args) {
  std::array<at::Tensor, 2> a_b = broadcast_bounds(a, b, display_name);
  a_ = a_b[0];
  b_ = a_b[1];
  check_param("a", a_, Support::real());
  check_param("b", b_, Support::real());
  // Always checked, as in tensordict: an empty interval has no distribution at all.
  if ((a_ >= b_).any().item<bool>()) {
    throw std::invalid_argument(display_name + ": incorrect truncation range, a < b must hold (a: " +
                                internal::param_to_string(a_) + ", b: " +
                                internal::param_to_string(b_) + ")");
  }
  at::Tensor little_phi_a = little_phi(a_);
  at::Tensor little_phi_b = little_phi(b_);
  big_phi_a_ = big_phi(a_);
  at::Tensor big_phi_b = big_phi(b_);
  z_ = (big_phi_b - big_phi_a_).clamp(kEps, 1 - kEps);
  log_z_ = z_.log();
  // nan_to_num maps infinite bounds to the largest finite value, so phi(inf) * inf is 0.
  at::Tensor coeff_a = at::nan_to_num(a_, std::numeric_limits<double>::quiet_NaN());
  at::Tensor coeff_b = at::nan_to_num(b_, std::numeric_limits<double>::quiet_NaN());
  at::Tensor lpbb_m_lpaa_d_z = (little_phi_b * coeff_b - little_phi_a * coeff_a) / z_;
  mean_ = -(little_phi_b - little_phi_a) / z_;
  variance_ = 1 - lpbb_m_lpaa_d_z - ((little_phi_b - little_phi_a) / z_).pow(2);
  entropy_ = kLogSqrt2PiE + log_z_ - 0.5 * lpbb_m_lpaa_d_z;
}

at::Tensor TruncatedStandardNormal::big_phi(const at::Tensor& x) const {
  at::Tensor phi = 0.5 * (1 + (x * kInvSqrt2).erf());
  return phi.clamp(kEps, 1 - kEps);
}

at::Tensor TruncatedStandardNormal::standard_cdf(const at::Tensor& value) const {
  return ((big_phi(value) - big_phi_a_) / z_).clamp(0, 1);
}

at::Tensor TruncatedStandardNormal::cdf(const at::Tensor& value) const {
  validate_sample(value, "cdf");
  return standard_cdf(value);
}

at::Tensor TruncatedStandardNormal::icdf(const at::Tensor& value) const {
  at::Tensor y = big_phi_a_ + value * z_;
  y = y.clamp(kEps, 1 - kEps);
  return inv_big_phi(y);
}

at::Tensor TruncatedStandardNormal::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  return kLogInvSqrt2Pi - log_z_ - value.pow(2) * 0.5;
}

at::Tensor TruncatedStandardNormal::mode() const {
  return at::minimum(at::maximum(at::zeros_like(a_), a_), b_);
}

at::Tensor TruncatedStandardNormal::rsample(c10::IntArrayRef sample_shape,
                                            const GeneratorOpt& generator) const {
  // tensordict draws the uniforms in the default dtype (float32) whatever the bounds' dtype.
  at::Tensor p = at::empty(extended_shape(sample_shape), at::TensorOptions().device(a_.device()))
                     .uniform_(kEps, 1 - kEps, generator);
  return icdf(p);
}

// ---- TruncatedNormal -----------------------------------------------------------------------

namespace {

std::array<at::Tensor, 4> broadcast_truncated(const at::Tensor& loc, const at::Tensor& scale, const at::Tensor& a,
                                              const at::Tensor& b) {
  internal::require_defined(loc, "TruncatedNormal", "loc");
  internal::require_defined(scale, "TruncatedNormal", "scale");
  internal::require_defined(a, "TruncatedNormal", "a");
  internal::require_defined(b, "TruncatedNormal", "b");
  return internal::broadcast_all<4>({loc, scale.clamp_min(1e-6), a, b});
}

}  // namespace

TruncatedNormal::TruncatedNormal(const at::Tensor& loc, const at::Tensor& scale,
                                 const at::Tensor& a, const at::Tensor& b,
                                 c10::optional<bool> validate_args)
    : TruncatedNormal(broadcast_truncated(loc, scale, a, b), validate_args) {}

TruncatedNormal::TruncatedNormal(std::array<at::Tensor, 4> p, c10::optional<bool> validate_args)
    : TruncatedStandardNormal((p[2] - p[0]) / p[1], (p[3] - p[0]) / p[1], validate_args, "TruncatedNormal"),
      loc_(p[0]),
      scale_(p[1]),
      low_(p[2]),
      high_(p[3]) {
  check_param("loc", loc_, Support::real());
  check_param("scale", scale_, Support::positive());
  log_scale_ = scale_.log();
  mean_ = mean_ * scale_ + loc_;
  variance_ = variance_ * scale_.pow(2);
  entropy_ = entropy_ + log_scale_;
}

at::Tensor TruncatedNormal::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  at::Tensor standard = (value - loc_) / scale_;
  return kLogInvSqrt2Pi - log_z_ - standard.pow(2) * 0.5 - log_scale_;
}

at::Tensor TruncatedNormal::mode() const { return at::minimum(at::maximum(loc_, low_), high_); }

at::Tensor TruncatedNormal::cdf(const at::Tensor& value) const {
  validate_sample(value, "cdf");
  return standard_cdf((value - loc_) / scale_);
}

at::Tensor TruncatedNormal::icdf(const at::Tensor& value) const {
  at::Tensor sample = TruncatedStandardNormal::icdf(value) * scale_ + loc_;
  at::Tensor clipped = at::minimum(at::maximum(sample.detach(), low_.detach().expand_as(sample)),
                                   high_.detach().expand_as(sample));
  sample.variable_data().copy_(clipped);
  return sample;
}

}  // namespace tdp::dist
