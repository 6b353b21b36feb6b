// Uniform: the continuous uniform distribution on the half-open interval [low, high)
// (torch.distributions.Uniform). Reparameterizable, with closed-form cdf/icdf.
//
//   tdp::dist::Uniform noise(at::full({4}, -0.5), at::full({4}, 0.5));
//   at::Tensor u = noise.rsample({100}, generator);   // [100, 4]
//   at::Tensor lp = noise.log_prob(u);                // log(1 / (high - low)) = 0
//   at::Tensor c = noise.cdf(at::zeros({4}));          // 0.5
//   noise.mean();                                     // 0
#pragma once

#include <array>

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class Uniform : public Distribution {
 public:
  // In validate-args mode low < high must hold everywhere.
  Uniform(const at::Tensor& low, const at::Tensor& high,
          c10::optional<bool> validate_args = c10::nullopt);

  std::string name() const override { return "Uniform"; }
  const at::Tensor& low() const { return low_; }
  const at::Tensor& high() const { return high_; }

  at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const override;
  bool has_rsample() const override { return true; }
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mean() const override;
  // NaN: every point is a mode.
  at::Tensor mode() const override;
  at::Tensor stddev() const override;
  at::Tensor variance() const override;
  at::Tensor deterministic_sample() const override { return mean(); }
  at::Tensor cdf(const at::Tensor& value) const override;
  at::Tensor icdf(const at::Tensor& value) const override;
  Support support() const override { return Support::interval(low_, high_); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"low", low_}, {"high", high_}};
  }

 private:
  Uniform(std::array<at::Tensor, 2> low_high, c10::optional<bool> validate_args);

  at::Tensor low_;
  at::Tensor high_;
};

}  // namespace tdp::dist
