#include "sdk/distributions/normal.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>

#include <cmath>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {

Normal::Normal(const at::Tensor& loc, const at::Tensor& scale, c10::optional<bool> validate_args)
    : Normal(internal::broadcast_all<2>({internal::require_defined(loc, "Normal", "loc"),
                                         internal::require_defined(scale, "Normal", "scale")}),
             validate_args) {}

Normal::Normal(std::array<at::Tensor, 2> loc_scale, c10::optional<bool> validate_args)
    : Distribution(loc_scale[0].sizes(), {}, validate_args),
      loc_(std::move(loc_scale[0])),
      scale_(std::move(loc_scale[1])) {
  check_param("loc", loc_, Support::real());
  check_param("scale", scale_, Support::positive());
}

at::Tensor Normal::sample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  const auto shape = extended_shape(sample_shape);
  c10::NoGradGuard no_grad;
  // What at::normal(loc, scale) computes (standard normal draws, times scale, plus loc: the same
  // numbers from the same generator), without its check that scale >= 0, which reads the minimum
  // back to the host: a synchronization that CUDA-graph capture forbids. The constructor's
  // validation checks scale (when validate_args is on).
  return at::empty(shape, loc_.options()).normal_(0, 1, generator).mul_(scale_).add_(loc_);
}

at::Tensor Normal::rsample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  at::Tensor eps = at::empty(extended_shape(sample_shape), loc_.options()).normal_(0, 1, generator);
  return loc_ + eps * scale_;
}

at::Tensor Normal::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  // torch's -(value - loc)^2 / (2 scale^2) - log(scale) - log(sqrt(2 pi)): the same ops in the same
  // order (the same numbers), one or two per statement so that each intermediate is freed once
  // the next exists. Written as one expression, every intermediate lives to its end; at batch 1
  // that burst of tensors outgrows glibc's per-thread cache of freed blocks, and the allocator's
  // slow path cost a policy step about 2k instructions (1%) in probabilistic_benchmark.
  at::Tensor log_prob = (value - loc_).pow(2);
  log_prob = -log_prob;
  log_prob = log_prob / (2 * scale_.pow(2));
  log_prob = log_prob - scale_.log();
  return log_prob - std::log(std::sqrt(2 * M_PI));
}

at::Tensor Normal::entropy() const {
  return 0.5 + 0.5 * std::log(2 * M_PI) + at::log(scale_);
}

at::Tensor Normal::variance() const { return scale_.pow(2); }

at::Tensor Normal::cdf(const at::Tensor& value) const {
  validate_sample(value, "cdf");
  return 0.5 * (1 + at::erf((value - loc_) * scale_.reciprocal() / std::sqrt(2.0)));
}

at::Tensor Normal::icdf(const at::Tensor& value) const {
  return loc_ + scale_ * at::erfinv(2 * value - 1) * std::sqrt(2.0);
}

}  // namespace tdp::dist
