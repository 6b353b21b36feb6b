// Bernoulli: a distribution over {0, 1} given by the probability `probs` of a 1 or its
// `logits` (torch.distributions.Bernoulli). Samples have the parameter's dtype.
//
//   auto press = tdp::dist::Bernoulli::from_logits(scores);  // scores [32, 3]
//   at::Tensor buttons = press.sample({}, generator);        // [32, 3] of 0.0 / 1.0
//   at::Tensor lp = press.log_prob(buttons);                 // [32, 3]
//   at::Tensor greedy = press.mode();                        // NaN where probs == 0.5
//   at::Tensor h = press.entropy();
#pragma once

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class Bernoulli : public Distribution {
 public:
  // Exactly one of `probs` (in [0, 1]) and `logits` must be defined.
  Bernoulli(const at::Tensor& probs, const at::Tensor& logits,
            c10::optional<bool> validate_args = c10::nullopt);
  static Bernoulli from_probs(const at::Tensor& probs,
                              c10::optional<bool> validate_args = c10::nullopt) {
    return Bernoulli(probs, at::Tensor(), validate_args);
  }
  static Bernoulli from_logits(const at::Tensor& logits,
                               c10::optional<bool> validate_args = c10::nullopt) {
    return Bernoulli(at::Tensor(), logits, validate_args);
  }

  std::string name() const override { return "Bernoulli"; }
  const at::Tensor& probs() const { return probs_; }
  const at::Tensor& logits() const { return logits_; }

  at::Tensor sample(c10::IntArrayRef sample_shape = {},
                    const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mean() const override { return probs_; }
  at::Tensor mode() const override;
  at::Tensor variance() const override;
  at::Tensor deterministic_sample() const override { return mode(); }
  Support support() const override { return Support::boolean(); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override;

 private:
  at::Tensor probs_;
  at::Tensor logits_;
  bool from_probs_;
};

}  // namespace tdp::dist
