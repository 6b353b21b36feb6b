#include "sdk/distributions/tanh_normal.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "sdk/distributions/dist_utils.h"
#include "sdk/distributions/independent.h"
#include "sdk/distributions/normal.h"
#include "sdk/nn/safe_tanh_clamp.h"

namespace tdp::dist {
namespace {

at::Tensor clamped_tanh(const at::Tensor& x) { return nn::safe_tanh_clamp(x.tanh()); }

at::Tensor clamped_atanh(const at::Tensor& y) { return nn::safe_tanh_clamp(y).atanh(); }

// TorchRL's safetanh_noeps: tanh clamped inside (-1, 1); the backward uses the clamped output.
struct SafeTanh : public torch::autograd::Function<SafeTanh> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input) {
    at::Tensor output = clamped_tanh(input);
    ctx->save_for_backward({output});
    return output;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const at::Tensor output = ctx->get_saved_variables()[0];
    return {grad[0] * (1 - output.pow(2))};
  }
};

// TorchRL's safeatanh_noeps: atanh of the input clamped inside (-1, 1).
struct SafeAtanh : public torch::autograd::Function<SafeAtanh> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& tanh_val) {
    ctx->save_for_backward({tanh_val});
    return clamped_atanh(tanh_val);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const at::Tensor tanh_val = ctx->get_saved_variables()[0];
    const at::Tensor output = nn::safe_tanh_clamp(tanh_val);
    return {grad[0] / (1 - output.pow(2))};
  }
};

// When autograd records nothing (no grad mode, inference mode, or an input without grad),
// Function::apply would still build a graph node, wrap the outputs and save tensors for a
// backward that never runs: about as costly as the ops themselves at batch 1. The forward's
// ops alone give the same values.
bool records_grad(const at::Tensor& input) {
  return at::GradMode::is_enabled() && input.requires_grad();
}

at::Tensor safe_tanh(const at::Tensor& x) {
  return records_grad(x) ? SafeTanh::apply(x) : clamped_tanh(x);
}

at::Tensor safe_atanh(const at::Tensor& y) {
  return records_grad(y) ? SafeAtanh::apply(y) : clamped_atanh(y);
}

}  // namespace

struct TanhNormal::Prepared {
  at::Tensor loc, scale, low, high;
  bool number_bounds = false;
  double low_number = -1.0, high_number = 1.0;
  bool non_trivial = false;
  bool safe_tanh = true;
  int64_t event_dims = 0;
  DistributionPtr base;
  std::shared_ptr<const Normal> normal;
};

// Everything the constructor needs before the Distribution base knows its shapes.
void TanhNormal::prepare(const at::Tensor& loc_in, const at::Tensor& scale_in,
                         const TanhNormalOptions& o, Prepared& p) {
  internal::require_defined(loc_in, "TanhNormal", "loc");
  internal::require_defined(scale_in, "TanhNormal", "scale");
  // Number bounds (the usual case, and the one policies build every step) are checked and
  // applied as doubles. Tensor bounds are checked as given: number bounds live on the CPU, so
  // building a TanhNormal on an accelerator needs no device sync (TorchRL skips these checks
  // under graph capture).
  p.number_bounds = !o.low_.defined() && !o.high_.defined();
  p.event_dims = o.event_dims_.value_or(std::min<int64_t>(1, loc_in.dim()));
  at::Tensor loc = loc_in;
  if (p.number_bounds) {
    p.low_number = o.low_number_.value_or(-1.0);
    p.high_number = o.high_number_.value_or(1.0);
    if (!(p.high_number > p.low_number)) {
      throw std::invalid_argument(
          "TanhNormal high values must be strictly greater than low values (low: " +
          internal::param_to_string(at::scalar_tensor(p.low_number, at::kDouble)) + ", high: " +
          internal::param_to_string(at::scalar_tensor(p.high_number, at::kDouble)) + ")");
    }
    p.non_trivial = p.high_number != 1.0 || p.low_number != -1.0;
    if (o.tanh_loc_) {
      loc = (loc / o.upscale_).tanh() * o.upscale_;
      if (p.non_trivial) loc = loc + (p.high_number - p.low_number) / 2 + p.low_number;
    }
    std::array<at::Tensor, 2> all = internal::broadcast_all<2>({loc, scale_in});
    p.loc = all[0];
    p.scale = all[1];
  } else {
    const at::Tensor low_given =
        o.low_.defined() ? o.low_ : at::scalar_tensor(o.low_number_.value_or(-1.0), at::kDouble);
    const at::Tensor high_given =
        o.high_.defined() ? o.high_ : at::scalar_tensor(o.high_number_.value_or(1.0), at::kDouble);
    if (!(high_given > low_given).all().item<bool>()) {
      throw std::invalid_argument("TanhNormal high values must be strictly greater than low values (low: " +
                                  internal::param_to_string(low_given) + ", high: " +
                                  internal::param_to_string(high_given) + ")");
    }
    p.non_trivial = (high_given != 1.0).any().item<bool>() || (low_given != -1.0).any().item<bool>();
    at::Tensor low = low_given.to(loc_in.device(), loc_in.scalar_type());
    at::Tensor high = high_given.to(loc_in.device(), loc_in.scalar_type());
    if (o.tanh_loc_) {
      loc = (loc / o.upscale_).tanh() * o.upscale_;
      if (p.non_trivial) loc = loc + (high - low) / 2 + low;
    }
    // Bounds that carry more (or larger) dims than loc widen the batch, as a broadcasting
    // affine transform would in PyTorch.
    std::array<at::Tensor, 4> all = internal::broadcast_all<4>({loc, scale_in, low, high});
    p.loc = all[0];
    p.scale = all[1];
    p.low = low;
    p.high = high;
  }
  if (p.event_dims < 0 || p.event_dims > p.loc.dim()) {
    throw std::invalid_argument("TanhNormal: event_dims must be in [0, " +
                                std::to_string(p.loc.dim()) + "] for loc of shape " +
                                internal::shape_to_string(p.loc.sizes()) + ", got " +
                                std::to_string(p.event_dims));
  }
}


TanhNormal::TanhNormal(const at::Tensor& loc, const at::Tensor& scale,
                       const TanhNormalOptions& options)
    : TanhNormal([&] {
        Prepared p;
        prepare(loc, scale, options, p);
        p.safe_tanh = options.safe_tanh_;
        p.normal = std::make_shared<Normal>(p.loc, p.scale, options.validate_args_);
        p.base = p.event_dims > 0
                     ? DistributionPtr(std::make_shared<Independent>(p.normal, p.event_dims,
                                                                     options.validate_args_))
                     : DistributionPtr(p.normal);
        return p;
      }()) {}

TanhNormal::TanhNormal(Prepared p)
    : Distribution(p.base->batch_shape(), p.base->event_shape(), p.normal->validate_args()),
      loc_(p.loc),
      scale_(p.scale),
      low_(p.low),
      high_(p.high),
      affine_loc_(p.number_bounds ? at::Tensor() : (p.high + p.low) / 2),
      affine_scale_(p.number_bounds ? at::Tensor() : (p.high - p.low) / 2),
      number_bounds_(p.number_bounds),
      low_number_(p.low_number),
      high_number_(p.high_number),
      non_trivial_bounds_(p.non_trivial),
      safe_tanh_(p.safe_tanh),
      event_dims_(p.event_dims),
      base_(p.base),
      normal_(p.normal) {}

at::Tensor TanhNormal::low() const {
  return number_bounds_ ? at::scalar_tensor(low_number_, loc_.options()) : low_;
}

at::Tensor TanhNormal::high() const {
  return number_bounds_ ? at::scalar_tensor(high_number_, loc_.options()) : high_;
}

at::Tensor TanhNormal::transform(const at::Tensor& x) const {
  at::Tensor y = safe_tanh_ ? safe_tanh(x) : x.tanh();
  if (!non_trivial_bounds_) return y;
  if (number_bounds_) {
    // Symmetric bounds ([-2, 2], the usual action range) need no shift: one op less per call.
    const double shift = (high_number_ + low_number_) / 2;
    at::Tensor scaled = y * ((high_number_ - low_number_) / 2);
    return shift == 0 ? scaled : scaled + shift;
  }
  return affine_loc_ + affine_scale_ * y;
}

at::Tensor TanhNormal::inverse_transform(const at::Tensor& y) const {
  at::Tensor x = y;
  if (non_trivial_bounds_ && number_bounds_) {
    const double shift = (high_number_ + low_number_) / 2;
    x = (shift == 0 ? y : y - shift) / ((high_number_ - low_number_) / 2);
  } else if (non_trivial_bounds_) {
    x = (y - affine_loc_) / affine_scale_;
  }
  return safe_tanh_ ? safe_atanh(x) : x.atanh();
}

at::Tensor TanhNormal::log_abs_det_jacobian(const at::Tensor& x, const at::Tensor& y) const {
  // d tanh(x)/dx = 1 - tanh(x)^2, written in a form that stays finite for large |x|.
  at::Tensor result = 2. * (std::log(2.) - x - at::softplus(-2. * x));
  if (non_trivial_bounds_ && number_bounds_) {
    result = result + std::log(std::abs((high_number_ - low_number_) / 2));
  } else if (non_trivial_bounds_) {
    result = result + at::abs(affine_scale_).log().expand(y.sizes());
  }
  return result;
}

at::Tensor TanhNormal::sample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  c10::NoGradGuard no_grad;
  return transform(base_->sample(sample_shape, generator));
}

at::Tensor TanhNormal::rsample(c10::IntArrayRef sample_shape,
                               const GeneratorOpt& generator) const {
  return transform(base_->rsample(sample_shape, generator));
}

at::Tensor TanhNormal::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  at::Tensor x = inverse_transform(value);
  at::Tensor jacobian = internal::sum_rightmost(log_abs_det_jacobian(x, value), event_dims_);
  return base_->log_prob(x) - jacobian;
}

at::Tensor TanhNormal::deterministic_sample() const { return transform(loc_); }

at::Tensor TanhNormal::mode() const {
  throw NotImplementedError(
      "TanhNormal has no analytical mode; use deterministic_sample() (the DETERMINISTIC "
      "interaction type) for a deterministic action");
}

at::Tensor TanhNormal::mean() const {
  throw NotImplementedError(
      "TanhNormal does not have a closed form formula for the mean; estimate it with "
      "sample({N}).mean(0) for a large N");
}

at::Tensor TanhNormal::cdf(const at::Tensor& value) const {
  if (event_dims_ > 0) not_implemented("cdf with event_dims > 0 (construct it with event_dims(0))");
  validate_sample(value, "cdf");
  return normal_->cdf(inverse_transform(value));
}

at::Tensor TanhNormal::icdf(const at::Tensor& value) const {
  if (event_dims_ > 0) not_implemented("icdf with event_dims > 0 (construct it with event_dims(0))");
  return transform(normal_->icdf(value));
}

}  // namespace tdp::dist
