// Normal: the Gaussian distribution with mean `loc` and standard deviation `scale`
// (torch.distributions.Normal). loc and scale broadcast to the batch shape; the event is a
// scalar. It is reparameterizable and has closed-form cdf/icdf.
//
//   tdp::dist::Normal normal(at::zeros({3, 4}), at::ones({3, 4}));
//   at::Tensor x = normal.rsample({8}, generator);        // [8, 3, 4]
//   at::Tensor lp = normal.log_prob(x);                  // [8, 3, 4]
//   at::Tensor q = normal.icdf(at::full({3, 4}, 0.975));  // about 1.96
//   normal.to_string();                                  // "Normal(loc: [3, 4], scale: [3, 4])"
#pragma once

#include <array>

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class Normal : public Distribution {
 public:
  Normal(const at::Tensor& loc, const at::Tensor& scale,
         c10::optional<bool> validate_args = c10::nullopt);

  std::string name() const override { return "Normal"; }
  const at::Tensor& loc() const { return loc_; }
  const at::Tensor& scale() const { return scale_; }

  at::Tensor sample(c10::IntArrayRef sample_shape = {},
                    const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const override;
  bool has_rsample() const override { return true; }
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mean() const override { return loc_; }
  at::Tensor mode() const override { return loc_; }
  at::Tensor stddev() const override { return scale_; }
  at::Tensor variance() const override;
  at::Tensor deterministic_sample() const override { return loc_; }
  at::Tensor cdf(const at::Tensor& value) const override;
  at::Tensor icdf(const at::Tensor& value) const override;
  Support support() const override { return Support::real(); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"loc", loc_}, {"scale", scale_}};
  }

 private:
  Normal(std::array<at::Tensor, 2> loc_scale, c10::optional<bool> validate_args);

  at::Tensor loc_;
  at::Tensor scale_;
};

}  // namespace tdp::dist
