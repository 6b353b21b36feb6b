// TruncatedStandardNormal and TruncatedNormal: a normal distribution restricted to [a, b]
// (tensordict.nn.distributions.truncated_normal, after github.com/toshas/torch_truncnorm).
// Moments and entropy are closed-form; rsample inverts the cdf of a uniform draw, so it is
// reparameterizable. As in tensordict, Phi(a), Phi(b) and the mass Z between them are clamped
// to [1e-6, 1 - 1e-6], which keeps bounds far in the tails finite.
//
//   tdp::dist::TruncatedNormal torque(loc, scale, at::full({6}, -2.0), at::full({6}, 2.0));
//   at::Tensor u = torque.rsample({}, generator);   // [6], inside [-2, 2]
//   at::Tensor lp = torque.log_prob(u);
//   at::Tensor m = torque.mean();                   // pulled toward the interval's centre
//   at::Tensor median = torque.icdf(at::full({6}, 0.5));
#pragma once

#include <array>

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class TruncatedStandardNormal : public Distribution {
 public:
  // a and b broadcast together; a < b must hold everywhere.
  TruncatedStandardNormal(const at::Tensor& a, const at::Tensor& b,
                          c10::optional<bool> validate_args = c10::nullopt);

  std::string name() const override { return "TruncatedStandardNormal"; }
  const at::Tensor& a() const { return a_; }
  const at::Tensor& b() const { return b_; }
  // Z = Phi(b) - Phi(a), the mass of the untruncated normal inside [a, b].
  const at::Tensor& auc() const { return z_; }

  at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const override;
  bool has_rsample() const override { return true; }
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override { return entropy_; }
  at::Tensor mean() const override { return mean_; }
  at::Tensor variance() const override { return variance_; }
  // The untruncated mode clamped into [a, b] (tensordict leaves this undefined).
  at::Tensor mode() const override;
  at::Tensor deterministic_sample() const override { return mean(); }
  at::Tensor cdf(const at::Tensor& value) const override;
  at::Tensor icdf(const at::Tensor& value) const override;
  Support support() const override { return Support::interval(a_, b_); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"a", a_}, {"b", b_}};
  }

 protected:
  static constexpr double kEps = 1e-6;
  // `display_name` names the concrete class in construction errors.
  TruncatedStandardNormal(const at::Tensor& a, const at::Tensor& b,
                          c10::optional<bool> validate_args, const std::string& display_name);
  at::Tensor big_phi(const at::Tensor& x) const;
  // cdf of a standardized value, without validation (the subclass validates its own units).
  at::Tensor standard_cdf(const at::Tensor& value) const;

  at::Tensor a_;
  at::Tensor b_;
  at::Tensor big_phi_a_;
  at::Tensor z_;
  at::Tensor log_z_;
  at::Tensor mean_;
  at::Tensor variance_;
  at::Tensor entropy_;

};

class TruncatedNormal : public TruncatedStandardNormal {
 public:
  // scale is clamped to at least 1e-6 first; loc, scale, a, b broadcast together.
  TruncatedNormal(const at::Tensor& loc, const at::Tensor& scale, const at::Tensor& a,
                  const at::Tensor& b, c10::optional<bool> validate_args = c10::nullopt);

  std::string name() const override { return "TruncatedNormal"; }
  const at::Tensor& loc() const { return loc_; }
  const at::Tensor& scale() const { return scale_; }
  // The bounds in the distribution's own units (a() and b() are standardized).
  const at::Tensor& low() const { return low_; }
  const at::Tensor& high() const { return high_; }

  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor mode() const override;
  at::Tensor cdf(const at::Tensor& value) const override;
  // Clamped into [low, high] without cutting the gradient, as tensordict does.
  at::Tensor icdf(const at::Tensor& value) const override;
  Support support() const override { return Support::interval(low_, high_); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"loc", loc_}, {"scale", scale_}, {"a", low_}, {"b", high_}};
  }

 private:
  TruncatedNormal(std::array<at::Tensor, 4> params, c10::optional<bool> validate_args);

  at::Tensor loc_;
  at::Tensor scale_;
  at::Tensor low_;
  at::Tensor high_;
  at::Tensor log_scale_;
};

}  // namespace tdp::dist
