// Independent: reinterprets the rightmost batch dims of a base distribution as event dims
// (torch.distributions.Independent), so log_prob and entropy sum over them. It is how a
// diagonal Gaussian over an action vector scores one action as one number.
//
//   auto base = std::make_shared<tdp::dist::Normal>(loc, scale);   // batch [32, 6]
//   tdp::dist::Independent policy(base, /*reinterpreted_batch_ndims=*/1);
//   policy.batch_shape();                                        // [32]
//   policy.event_shape();                                        // [6]
//   at::Tensor lp = policy.log_prob(policy.sample());            // [32]
#pragma once

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class Independent : public Distribution {
 public:
  Independent(DistributionPtr base_distribution, int64_t reinterpreted_batch_ndims,
              c10::optional<bool> validate_args = c10::nullopt);

  std::string name() const override { return "Independent"; }
  const DistributionPtr& base_dist() const { return base_; }
  int64_t reinterpreted_batch_ndims() const { return reinterpreted_batch_ndims_; }

  at::Tensor sample(c10::IntArrayRef sample_shape = {},
                    const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const override;
  bool has_rsample() const override { return base_->has_rsample(); }
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mean() const override { return base_->mean(); }
  at::Tensor mode() const override { return base_->mode(); }
  at::Tensor variance() const override { return base_->variance(); }
  at::Tensor stddev() const override { return base_->stddev(); }
  at::Tensor deterministic_sample() const override { return base_->deterministic_sample(); }
  Support support() const override;
  // "Independent(Normal(loc: [3, 4], scale: [3, 4]), 1)", as PyTorch prints it.
  std::string to_string() const override;

 private:
  DistributionPtr base_;
  int64_t reinterpreted_batch_ndims_;
};

}  // namespace tdp::dist
