// OneHotCategorical: a categorical distribution whose values are one-hot vectors over the
// last dim, with tensordict's semantics: int64 samples, a one-hot mode (every maximal class
// set when tied), and a straight-through rsample (a Gumbel-softmax draw at temperature 1 whose
// values are replaced by the one-hot of its argmax while gradients follow the relaxed draw).
//
//   auto policy = tdp::dist::OneHotCategorical::from_logits(scores);  // scores [32, 5]
//   at::Tensor a = policy.sample({}, generator);        // [32, 5] int64 one-hot
//   at::Tensor lp = policy.log_prob(a);                 // [32]
//   at::Tensor st = policy.rsample({}, generator);      // [32, 5] one-hot, d/dscores defined
//   policy.event_shape();                               // [5]
#pragma once

#include "sdk/distributions/categorical.h"
#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class OneHotCategorical : public Distribution {
 public:
  // Exactly one of `probs` and `logits` must be defined (see Categorical).
  OneHotCategorical(const at::Tensor& probs, const at::Tensor& logits,
                    c10::optional<bool> validate_args = c10::nullopt);
  static OneHotCategorical from_probs(const at::Tensor& probs,
                                      c10::optional<bool> validate_args = c10::nullopt) {
    return OneHotCategorical(probs, at::Tensor(), validate_args);
  }
  static OneHotCategorical from_logits(const at::Tensor& logits,
                                       c10::optional<bool> validate_args = c10::nullopt) {
    return OneHotCategorical(at::Tensor(), logits, validate_args);
  }

  std::string name() const override { return "OneHotCategorical"; }
  const at::Tensor& probs() const { return categorical_.probs(); }
  const at::Tensor& logits() const { return categorical_.logits(); }

  at::Tensor sample(c10::IntArrayRef sample_shape = {},
                    const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const override;
  bool has_rsample() const override { return true; }
  // Scores the argmax class of `value`.
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override { return categorical_.entropy(); }
  at::Tensor mean() const override { return categorical_.probs(); }
  at::Tensor variance() const override;
  at::Tensor mode() const override;
  at::Tensor deterministic_sample() const override { return mode(); }
  Support support() const override { return Support::one_hot(); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return categorical_.printed_params();
  }

 private:
  OneHotCategorical(Categorical categorical, c10::optional<bool> validate_args);

  Categorical categorical_;
};

}  // namespace tdp::dist
