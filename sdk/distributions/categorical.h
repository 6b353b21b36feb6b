// Categorical: a distribution over the integers 0..K-1 given by `probs` or `logits` along the
// last dim (torch.distributions.Categorical). Samples are int64 class indices with the batch
// shape; the event is a scalar.
//
//   auto policy = tdp::dist::Categorical::from_logits(scores);  // scores [32, 5]
//   at::Tensor action = policy.sample({}, generator);            // [32], int64 in [0, 5)
//   at::Tensor lp = policy.log_prob(action);                     // [32]
//   at::Tensor greedy = policy.mode();                           // argmax of probs
//   at::Tensor h = policy.entropy();                             // [32]
#pragma once

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class Categorical : public Distribution {
 public:
  // Exactly one of `probs` and `logits` must be a defined tensor. probs are normalized to sum
  // to one and logits shifted to log-probabilities, as PyTorch does. In validate-args mode the
  // given probs must already lie on the simplex (non-negative, summing to one within 1e-6).
  Categorical(const at::Tensor& probs, const at::Tensor& logits,
              c10::optional<bool> validate_args = c10::nullopt);
  static Categorical from_probs(const at::Tensor& probs,
                                c10::optional<bool> validate_args = c10::nullopt) {
    return Categorical(probs, at::Tensor(), validate_args);
  }
  static Categorical from_logits(const at::Tensor& logits,
                                 c10::optional<bool> validate_args = c10::nullopt) {
    return Categorical(at::Tensor(), logits, validate_args);
  }

  std::string name() const override { return "Categorical"; }
  // Normalized probabilities and log-probabilities, [*batch_shape, K].
  const at::Tensor& probs() const { return probs_; }
  const at::Tensor& logits() const { return logits_; }
  int64_t num_events() const { return num_events_; }

  at::Tensor sample(c10::IntArrayRef sample_shape = {},
                    const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  // NaN, as in PyTorch: class indices have no meaningful average.
  at::Tensor mean() const override;
  at::Tensor variance() const override;
  at::Tensor mode() const override;
  at::Tensor deterministic_sample() const override { return mode(); }
  Support support() const override { return Support::integer_interval(0, num_events_ - 1); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override;

 private:
  at::Tensor probs_;
  at::Tensor logits_;
  bool from_probs_;
  int64_t num_events_;
};

}  // namespace tdp::dist
