#include "sdk/distributions/torchrl_truncated_normal.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

// torch.as_tensor(bound, device=loc.device): a number becomes a 0-dim tensor of the default
// dtype (float32).
at::Tensor as_tensor(const std::variant<double, at::Tensor>& bound, const at::Tensor& loc) {
  if (auto* number = std::get_if<double>(&bound)) return at::scalar_tensor(*number, loc.options().dtype(at::kFloat));
  return std::get<at::Tensor>(bound).to(loc.device());
}

at::Tensor squashed(const at::Tensor& loc, const TorchRLTruncatedNormalOptions& options) {
  if (!options.tanh_loc_) return loc;
  return (loc / options.upscale_).tanh() * options.upscale_;
}

c10::IntArrayRef batch_of(const at::Tensor& loc) { return loc.sizes().slice(0, std::max<int64_t>(loc.dim() - 1, 0)); }
c10::IntArrayRef event_of(const at::Tensor& loc) { return loc.sizes().slice(std::max<int64_t>(loc.dim() - 1, 0)); }

}  // namespace

TorchRLTruncatedNormal::TorchRLTruncatedNormal(const at::Tensor& loc, const at::Tensor& scale,
                                               const TorchRLTruncatedNormalOptions& options)
    : Distribution(batch_of(loc), event_of(loc), false) {
  if (!loc.defined() || !scale.defined()) throw std::invalid_argument("TruncatedNormal: undefined loc or scale");
  if (loc.dim() == 0) throw std::invalid_argument("TruncatedNormal: loc needs a dim (the event)");
  const bool numbers = std::holds_alternative<double>(options.low_) && std::holds_alternative<double>(options.high_);
  if (numbers ? !(std::get<double>(options.high_) > std::get<double>(options.low_))
              : !(as_tensor(options.high_, loc) > as_tensor(options.low_, loc)).all().item<bool>()) {
    throw std::invalid_argument("TruncatedNormal: high values must be strictly greater than low values");
  }
  low_ = as_tensor(options.low_, loc);
  high_ = as_tensor(options.high_, loc);
  const at::Tensor centre = squashed(loc, options);
  base_ = std::make_shared<TruncatedNormal>(centre, scale, low_.expand_as(centre), high_.expand_as(scale), false);
}

at::Tensor TorchRLTruncatedNormal::sample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  return base_->sample(sample_shape, generator);
}

at::Tensor TorchRLTruncatedNormal::rsample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  return base_->rsample(sample_shape, generator);
}

at::Tensor TorchRLTruncatedNormal::mode() const {
  const at::Tensor a = base_->low() + kEps;
  const at::Tensor b = base_->high() - kEps;
  return at::maximum(at::minimum(base_->loc(), b), a);
}

at::Tensor TorchRLTruncatedNormal::log_prob(const at::Tensor& value) const {
  at::Tensor above_or_below = (low_ > value) | (high_ < value);
  const at::Tensor a = (base_->low() + kEps).expand_as(value);
  const at::Tensor b = (base_->high() - kEps).expand_as(value);
  const at::Tensor clamped = at::maximum(at::minimum(value, b), a);
  at::Tensor lp = internal::sum_rightmost(base_->log_prob(clamped), 1);
  if (above_or_below.any().item<bool>()) {
    above_or_below = above_or_below.flatten(-1, -1).any(-1);
    lp = at::masked_fill(lp, above_or_below.expand_as(lp), -std::numeric_limits<double>::infinity());
  }
  return lp;
}

at::Tensor TorchRLTruncatedNormal::entropy() const { return internal::sum_rightmost(base_->entropy(), 1); }

}  // namespace tdp::dist
