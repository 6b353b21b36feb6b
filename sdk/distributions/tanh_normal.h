// TanhNormal: a Normal squashed by tanh and rescaled to [low, high] (TorchRL's
// torchrl.modules.TanhNormal), the usual policy for bounded continuous actions (SAC, PPO).
// log_prob adds the tanh Jacobian and inverts through a numerically safe atanh, so actions at
// the bounds still score finitely. With `tanh_loc`, the location is first squashed as
// upscale * tanh(loc / upscale) to keep it from drifting far into tanh's flat tails.
//
//   tdp::dist::TanhNormal policy(loc, scale, tdp::dist::TanhNormalOptions().low(-2.0).high(2.0));
//   at::Tensor action = policy.rsample({}, generator);  // [32, 6] inside (-2, 2)
//   at::Tensor lp = policy.log_prob(action);            // [32]: the action dim is the event
//   at::Tensor greedy = policy.deterministic_sample();  // tanh(loc) rescaled
//   policy.mode();                                      // throws: no closed form, as in TorchRL
#pragma once

#include <memory>

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

class Normal;

struct TanhNormalOptions {
  // `upscale` in loc = upscale * tanh(loc / upscale); used only with tanh_loc.
  TanhNormalOptions& upscale(double value) { upscale_ = value; return *this; }
  // Bounds of the support (default -1 and 1); scalars or tensors broadcasting with loc.
  // Construction checks high > low on the bounds as given: free for numbers, a device sync
  // for accelerator tensors.
  // Number bounds stay numbers: no tensor ops or device syncs per construction.
  TanhNormalOptions& low(double value) { low_number_ = value; low_ = at::Tensor(); return *this; }
  TanhNormalOptions& low(at::Tensor value) { low_ = std::move(value); low_number_.reset(); return *this; }
  TanhNormalOptions& high(double value) { high_number_ = value; high_ = at::Tensor(); return *this; }
  TanhNormalOptions& high(at::Tensor value) { high_ = std::move(value); high_number_.reset(); return *this; }
  // Rightmost dims of loc that form one event, summed by log_prob (default min(1, loc.dim())).
  TanhNormalOptions& event_dims(int64_t value) { event_dims_ = value; return *this; }
  TanhNormalOptions& tanh_loc(bool value) { tanh_loc_ = value; return *this; }
  // Clamps tanh to +-(1 - resolution of the dtype) so that atanh of a sample stays finite.
  TanhNormalOptions& safe_tanh(bool value) { safe_tanh_ = value; return *this; }
  TanhNormalOptions& validate_args(bool value) { validate_args_ = value; return *this; }

  double upscale_ = 5.0;
  at::Tensor low_;
  at::Tensor high_;
  c10::optional<double> low_number_;
  c10::optional<double> high_number_;
  c10::optional<int64_t> event_dims_;
  bool tanh_loc_ = false;
  bool safe_tanh_ = true;
  c10::optional<bool> validate_args_;
};

class TanhNormal : public Distribution {
 public:
  TanhNormal(const at::Tensor& loc, const at::Tensor& scale,
             const TanhNormalOptions& options = TanhNormalOptions());

  std::string name() const override { return "TanhNormal"; }
  // The Normal's location after tanh_loc, and its scale.
  const at::Tensor& loc() const { return loc_; }
  const at::Tensor& scale() const { return scale_; }
  // The bounds as tensors of loc's dtype (0-dim when given as numbers).
  at::Tensor low() const;
  at::Tensor high() const;
  // The Normal (or Independent Normal when event_dims > 0) before the squashing.
  const DistributionPtr& base_dist() const { return base_; }

  at::Tensor sample(c10::IntArrayRef sample_shape = {},
                    const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const override;
  bool has_rsample() const override { return true; }
  at::Tensor log_prob(const at::Tensor& value) const override;
  // The squashed location: what TorchRL's DETERMINISTIC interaction returns.
  at::Tensor deterministic_sample() const override;
  // Not closed-form; throw with what to use instead, as in TorchRL.
  at::Tensor mode() const override;
  at::Tensor mean() const override;
  // Only for event_dims == 0 (an Independent base has no cdf).
  at::Tensor cdf(const at::Tensor& value) const override;
  at::Tensor icdf(const at::Tensor& value) const override;
  Support support() const override { return Support::interval(low(), high()); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return {{"loc", loc_}, {"scale", scale_}, {"low", low()}, {"high", high()}};
  }

  // The squashing map and its inverse, exposed for modules that cache pre-tanh values.
  at::Tensor transform(const at::Tensor& x) const;
  at::Tensor inverse_transform(const at::Tensor& y) const;

 private:
  struct Prepared;
  explicit TanhNormal(Prepared prepared);
  static void prepare(const at::Tensor& loc, const at::Tensor& scale, const TanhNormalOptions& options,
                      Prepared& prepared);

  // log |d transform / dx| per element.
  at::Tensor log_abs_det_jacobian(const at::Tensor& x, const at::Tensor& y) const;

  at::Tensor loc_;
  at::Tensor scale_;
  // Tensor bounds (undefined when the bounds are numbers) ...
  at::Tensor low_;
  at::Tensor high_;
  at::Tensor affine_loc_;
  at::Tensor affine_scale_;
  // ... or number bounds, applied as scalars.
  bool number_bounds_;
  double low_number_;
  double high_number_;
  bool non_trivial_bounds_;
  bool safe_tanh_;
  int64_t event_dims_;
  DistributionPtr base_;
  std::shared_ptr<const Normal> normal_;
};

}  // namespace tdp::dist
