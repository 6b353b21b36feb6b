// Beta: the distribution on [0, 1] with shape parameters `concentration1` (alpha) and
// `concentration0` (beta) (torch.distributions.Beta). Reparameterizable: rsample uses the
// implicit reparameterization of the Dirichlet sampler, as PyTorch does.
//
//   tdp::dist::Beta gripper(at::full({8}, 2.0), at::full({8}, 5.0));
//   at::Tensor x = gripper.rsample({}, generator);   // [8] in [0, 1]
//   at::Tensor lp = gripper.log_prob(x);             // [8]
//   gripper.mean();                                  // 2 / 7
//   gripper.mode();                                  // 1 / 5
#pragma once

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class Beta : public Distribution {
 public:
  Beta(const at::Tensor& concentration1, const at::Tensor& concentration0,
       c10::optional<bool> validate_args = c10::nullopt);

  std::string name() const override { return "Beta"; }
  at::Tensor concentration1() const;
  at::Tensor concentration0() const;

  at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const override;
  bool has_rsample() const override { return true; }
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mean() const override;
  at::Tensor mode() const override;
  at::Tensor variance() const override;
  at::Tensor deterministic_sample() const override { return mean(); }
  Support support() const override { return Support::unit_interval(); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"concentration1", concentration1()}, {"concentration0", concentration0()}};
  }

 private:
  explicit Beta(at::Tensor concentration, c10::optional<bool> validate_args);

  // [*batch_shape, 2]: (concentration1, concentration0), the parameters of a 2-class Dirichlet.
  at::Tensor concentration_;
};

}  // namespace tdp::dist
