// Delta: all the mass on one value, `param` (tensordict.nn.distributions.Delta). It turns a
// deterministic network output into a distribution, e.g. for DDPG-style actors. log_prob is
// +inf where a value matches param within atol + rtol * |param| (over the whole event) and
// -inf elsewhere. As in tensordict, rsample returns param with its gradient but has_rsample()
// is false, so probabilistic modules draw it with sample().
//
//   tdp::dist::Delta actor(action);              // action [32, 6]: batch [32], event [6]
//   actor.sample({4});                           // [4, 32, 6], param repeated
//   actor.mode();                                // param
//   actor.log_prob(action);                      // [32] of +inf
//   actor.log_prob(action + 1);                  // [32] of -inf
#pragma once

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class Delta : public Distribution {
 public:
  // With both shapes empty (the default), batch_shape is param's shape without its last dim
  // and event_shape its last dim, as tensordict infers them.
  explicit Delta(const at::Tensor& param, double atol = 1e-6, double rtol = 1e-6,
                 std::vector<int64_t> batch_shape = {}, std::vector<int64_t> event_shape = {},
                 c10::optional<bool> validate_args = c10::nullopt);

  std::string name() const override { return "Delta"; }
  const at::Tensor& param() const { return param_; }
  double atol() const { return atol_; }
  double rtol() const { return rtol_; }

  at::Tensor sample(c10::IntArrayRef sample_shape = {},
                    const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor mean() const override { return param_; }
  at::Tensor mode() const override { return param_; }
  at::Tensor deterministic_sample() const override { return param_; }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"param", param_}};
  }

 private:
  at::Tensor param_;
  double atol_;
  double rtol_;
};

}  // namespace tdp::dist
