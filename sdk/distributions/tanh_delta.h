// TanhDelta: a Delta whose value is squashed by tanh onto [low, high] (TorchRL's
// torchrl.modules.TanhDelta), DDPG's deterministic actor as a distribution: every draw, the mode
// and the deterministic sample are the same squashed value; log_prob is +inf for that value
// (within atol + rtol * |param| before the squashing, over the event) and -inf elsewhere.
//
//   tdp::dist::TanhDelta actor(param, tdp::dist::TanhDeltaOptions().low(at::full({6}, -2.0)).high(2.0));
//   at::Tensor action = actor.deterministic_sample();   // [32, 6] inside (-2, 2)
//   actor.sample({4});                                  // [4, 32, 6]: the same action repeated
//   actor.log_prob(action);                             // [32] of +inf
//
// TorchRL 0.13's numerics, op for op: the Delta sits at param + (high - low) / 2 + low (TorchRL
// tests `is_compiling`, a function, for truth, so this shift is always applied), and the value
// is (high + low) / 2 + (high - low) / 2 * tanh(.), tanh clamped into +-(1 - resolution of the
// dtype) when `safe` (the default). mean() throws, as in TorchRL.
#pragma once

#include <memory>
#include <variant>

#include "sdk/distributions/delta.h"
#include "sdk/distributions/distribution.h"

namespace tdp::dist {

struct TanhDeltaOptions {
  // Bounds: numbers or tensors broadcasting with param (default -1 and 1).
  TanhDeltaOptions& low(double value) { low_ = value; return *this; }
  TanhDeltaOptions& low(at::Tensor value) { low_ = std::move(value); return *this; }
  TanhDeltaOptions& high(double value) { high_ = value; return *this; }
  TanhDeltaOptions& high(at::Tensor value) { high_ = std::move(value); return *this; }
  // Rightmost dims of param that form one event (default 1).
  TanhDeltaOptions& event_dims(int64_t value) { event_dims_ = value; return *this; }
  TanhDeltaOptions& atol(double value) { atol_ = value; return *this; }
  TanhDeltaOptions& rtol(double value) { rtol_ = value; return *this; }
  // The clamped tanh (TorchRL's SafeTanhTransform); false: torch's TanhTransform.
  TanhDeltaOptions& safe(bool value) { safe_ = value; return *this; }

  std::variant<double, at::Tensor> low_ = -1.0;
  std::variant<double, at::Tensor> high_ = 1.0;
  int64_t event_dims_ = 1;
  double atol_ = 1e-6;
  double rtol_ = 1e-6;
  bool safe_ = true;
};

class TanhDelta : public Distribution {
 public:
  // Throws std::invalid_argument unless high > low everywhere, or when event_dims exceeds
  // param's dims.
  explicit TanhDelta(const at::Tensor& param, const TanhDeltaOptions& options = TanhDeltaOptions());

  std::string name() const override { return "TanhDelta"; }
  // The Delta before the squashing (at the shifted param).
  const std::shared_ptr<const Delta>& base_dist() const { return base_; }

  at::Tensor sample(c10::IntArrayRef sample_shape = {}, const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor rsample(c10::IntArrayRef sample_shape = {}, const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor mode() const override { return transform(base_->param()); }
  at::Tensor deterministic_sample() const override { return mode(); }
  // No closed form, as in TorchRL: throws NotImplementedError.
  at::Tensor mean() const override;
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"param", base_->param()}};
  }

  // The squashing map and its inverse.
  at::Tensor transform(const at::Tensor& x) const;
  at::Tensor inverse_transform(const at::Tensor& y) const;

 private:
  // (high + low) / 2 and (high - low) / 2, numbers or tensors as the bounds were given.
  std::variant<double, at::Tensor> affine_loc_;
  std::variant<double, at::Tensor> affine_scale_;
  bool safe_;
  int64_t event_dims_;
  std::shared_ptr<const Delta> base_;
};

}  // namespace tdp::dist
