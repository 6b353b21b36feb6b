#include "sdk/distributions/tanh_delta.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "sdk/distributions/dist_utils.h"
#include "sdk/nn/safe_tanh_clamp.h"

namespace tdp::dist {
namespace {

using Value = std::variant<double, at::Tensor>;

// Python's arithmetic on a number or a tensor bound: numbers stay numbers.
Value add(const Value& a, const Value& b) {
  if (auto* x = std::get_if<double>(&a)) {
    if (auto* y = std::get_if<double>(&b)) return *x + *y;
    return *x + std::get<at::Tensor>(b);
  }
  if (auto* y = std::get_if<double>(&b)) return std::get<at::Tensor>(a) + *y;
  return std::get<at::Tensor>(a) + std::get<at::Tensor>(b);
}
Value sub(const Value& a, const Value& b) {
  if (auto* x = std::get_if<double>(&a)) {
    if (auto* y = std::get_if<double>(&b)) return *x - *y;
    return *x - std::get<at::Tensor>(b);
  }
  if (auto* y = std::get_if<double>(&b)) return std::get<at::Tensor>(a) - *y;
  return std::get<at::Tensor>(a) - std::get<at::Tensor>(b);
}
Value half(const Value& a) {
  if (auto* x = std::get_if<double>(&a)) return *x / 2;
  return std::get<at::Tensor>(a) / 2;
}
// A tensor plus a bound.
at::Tensor plus(const at::Tensor& t, const Value& v) {
  if (auto* x = std::get_if<double>(&v)) return t + *x;
  return t + std::get<at::Tensor>(v);
}
Value on_device(const Value& v, const at::Device& device) {
  if (auto* t = std::get_if<at::Tensor>(&v)) return t->to(device);
  return v;
}

void check_bounds(const Value& low, const Value& high) {
  bool ok = true;
  if (std::holds_alternative<double>(low) && std::holds_alternative<double>(high)) {
    ok = std::get<double>(high) > std::get<double>(low);
  } else {
    const Value diff = sub(high, low);
    ok = (std::get<at::Tensor>(diff) > 0).all().item<bool>();
  }
  if (!ok) throw std::invalid_argument("TanhDelta: high value has been found to be equal or less than low value");
}

}  // namespace

TanhDelta::TanhDelta(const at::Tensor& param, const TanhDeltaOptions& options)
    : Distribution(param.sizes().slice(0, std::max<int64_t>(param.dim() - options.event_dims_, 0)),
                   param.sizes().slice(std::max<int64_t>(param.dim() - options.event_dims_, 0)), false),
      safe_(options.safe_),
      event_dims_(options.event_dims_) {
  if (!param.defined()) throw std::invalid_argument("TanhDelta: param is an undefined tensor");
  if (event_dims_ < 0 || event_dims_ > param.dim()) {
    throw std::invalid_argument("TanhDelta: event_dims " + std::to_string(event_dims_) + " for a param of shape " +
                                internal::param_to_string(param));
  }
  const Value low = on_device(options.low_, param.device());
  const Value high = on_device(options.high_, param.device());
  check_bounds(low, high);
  // update(): loc = param + (high - low) / 2 + low, in TorchRL's order.
  const at::Tensor loc = plus(plus(param, half(sub(high, low))), low);
  affine_loc_ = half(add(high, low));
  affine_scale_ = half(sub(high, low));
  const int64_t split = param.dim() - event_dims_;
  base_ = std::make_shared<Delta>(loc, options.atol_, options.rtol_, param.sizes().slice(0, split).vec(),
                                  param.sizes().slice(split).vec(), false);
}

at::Tensor TanhDelta::transform(const at::Tensor& x) const {
  at::Tensor y = x.tanh();
  if (safe_) y = nn::safe_tanh_clamp(y);
  // AffineTransform: loc + scale * y.
  at::Tensor scaled = std::holds_alternative<double>(affine_scale_) ? std::get<double>(affine_scale_) * y
                                                                    : std::get<at::Tensor>(affine_scale_) * y;
  return plus(scaled, affine_loc_);
}

at::Tensor TanhDelta::inverse_transform(const at::Tensor& y) const {
  at::Tensor centred = std::holds_alternative<double>(affine_loc_) ? y - std::get<double>(affine_loc_)
                                                                   : y - std::get<at::Tensor>(affine_loc_);
  at::Tensor x = std::holds_alternative<double>(affine_scale_) ? centred / std::get<double>(affine_scale_)
                                                               : centred / std::get<at::Tensor>(affine_scale_);
  if (safe_) x = nn::safe_tanh_clamp(x);
  return x.atanh();
}

at::Tensor TanhDelta::sample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  return transform(base_->sample(sample_shape, generator));
}

at::Tensor TanhDelta::rsample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  return transform(base_->rsample(sample_shape, generator));
}

at::Tensor TanhDelta::log_prob(const at::Tensor& value) const {
  // torch's TransformedDistribution over ComposeTransform([tanh, affine]): the value inverted,
  // minus the summed log |Jacobian| of both parts, plus the Delta's +-inf.
  const at::Tensor x = inverse_transform(value);
  at::Tensor jacobian = 2. * (std::log(2.) - x - at::softplus(-2. * x));
  if (auto* scale = std::get_if<double>(&affine_scale_)) {
    jacobian = jacobian + at::full_like(x, std::log(std::abs(*scale)));
  } else {
    jacobian = jacobian + std::get<at::Tensor>(affine_scale_).abs().log().expand(x.sizes());
  }
  return -internal::sum_rightmost(jacobian, event_dims_) + base_->log_prob(x);
}

at::Tensor TanhDelta::mean() const {
  throw NotImplementedError("TanhDelta mean has not analytical form (use the mode or deterministic_sample)");
}

}  // namespace tdp::dist
