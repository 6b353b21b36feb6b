// TorchRLTruncatedNormal: TorchRL's torchrl.modules.TruncatedNormal, a normal truncated to
// [low, high] over an action vector: an Independent over the last dim of the truncated normal
// (tensordict's numerics, tdp::dist::TruncatedNormal), with TorchRL's location squashing and its
// own mode and log_prob. Registered as "torchrl_truncated_normal"; "truncated_normal" is
// tensordict's class, which differs (no event dim, no tanh_loc, bounds named a and b).
//
//   tdp::dist::TorchRLTruncatedNormal actor(loc, scale, tdp::dist::TorchRLTruncatedNormalOptions().low(-2.0).high(2.0));
//   at::Tensor a = actor.deterministic_sample();   // [32, 6]: the truncated mean
//   at::Tensor lp = actor.log_prob(a);             // [32]: summed over the action dim
//
// As in TorchRL 0.13: with tanh_loc, loc becomes upscale * tanh(loc / upscale) (no recentring on
// [low, high]); the mode is loc clamped into [low + 1e-6, high - 1e-6]; log_prob clamps the
// value into that interval, sums over the event, and is -inf for an event with an element
// outside [low, high].
#pragma once

#include <memory>
#include <variant>

#include "sdk/distributions/distribution.h"
#include "sdk/distributions/truncated_normal.h"

namespace tdp::dist {

struct TorchRLTruncatedNormalOptions {
  TorchRLTruncatedNormalOptions& upscale(double value) { upscale_ = value; return *this; }
  // Numbers or tensors broadcasting with loc (default -1 and 1).
  TorchRLTruncatedNormalOptions& low(double value) { low_ = value; return *this; }
  TorchRLTruncatedNormalOptions& low(at::Tensor value) { low_ = std::move(value); return *this; }
  TorchRLTruncatedNormalOptions& high(double value) { high_ = value; return *this; }
  TorchRLTruncatedNormalOptions& high(at::Tensor value) { high_ = std::move(value); return *this; }
  TorchRLTruncatedNormalOptions& tanh_loc(bool value) { tanh_loc_ = value; return *this; }

  double upscale_ = 5.0;
  std::variant<double, at::Tensor> low_ = -1.0;
  std::variant<double, at::Tensor> high_ = 1.0;
  bool tanh_loc_ = false;
};

class TorchRLTruncatedNormal : public Distribution {
 public:
  // Throws std::invalid_argument unless high > low everywhere and loc has a dim.
  TorchRLTruncatedNormal(const at::Tensor& loc, const at::Tensor& scale,
                         const TorchRLTruncatedNormalOptions& options = TorchRLTruncatedNormalOptions());

  std::string name() const override { return "TruncatedNormal"; }
  // The truncated normal of each element (loc after tanh_loc).
  const std::shared_ptr<const TruncatedNormal>& base_dist() const { return base_; }

  at::Tensor sample(c10::IntArrayRef sample_shape = {}, const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor rsample(c10::IntArrayRef sample_shape = {}, const GeneratorOpt& generator = c10::nullopt) const override;
  bool has_rsample() const override { return true; }
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor mean() const override { return base_->mean(); }
  at::Tensor mode() const override;
  at::Tensor deterministic_sample() const override { return mean(); }
  at::Tensor entropy() const override;
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"loc", base_->loc()}, {"scale", base_->scale()}};
  }

 private:
  static constexpr double kEps = 1e-6;
  at::Tensor low_;   // as given (0-dim for a number)
  at::Tensor high_;
  std::shared_ptr<const TruncatedNormal> base_;
};

}  // namespace tdp::dist
