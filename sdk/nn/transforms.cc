#include "sdk/nn/transforms.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <torch/types.h>

#include <cmath>
#include <numeric>
#include <stdexcept>

namespace tdp::nn {

ObservationNormImpl::ObservationNormImpl(ObservationNormOptions options) : options_(std::move(options)) { reset(); }

void ObservationNormImpl::reset() {
  for (int64_t size : options_.shape()) {
    if (size < 0) {
      throw std::invalid_argument(
          absl::StrCat("ObservationNorm: shape [", absl::StrJoin(options_.shape(), ", "), "] has a negative size"));
    }
  }
  if (options_.clip() && !(*options_.clip() > 0 && std::isfinite(*options_.clip()))) {
    throw std::invalid_argument(
        absl::StrCat("ObservationNorm: clip must be positive and finite, got ", *options_.clip()));
  }
  loc = register_buffer("loc", at::zeros(options_.shape()));
  scale = register_buffer("scale", at::ones(options_.shape()));
}

at::Tensor ObservationNormImpl::forward(const at::Tensor& input) {
  // TorchRL's expressions, op for op, so that the results are bitwise Python's.
  at::Tensor out = options_.standard_normal() ? (input - loc) / scale : input * scale + loc;
  if (options_.clip()) out = out.clamp(-*options_.clip(), *options_.clip());
  return out;
}

void ObservationNormImpl::set_statistics(const at::Tensor& new_loc, const at::Tensor& new_scale) {
  torch::NoGradGuard no_grad;
  loc.copy_(new_loc);
  scale.copy_(new_scale);
}

at::Tensor ToTensorImageImpl::forward(const at::Tensor& input) {
  const int64_t dims = input.dim();
  if (dims < 3) {
    throw std::invalid_argument(
        absl::StrCat("ToTensorImage: expects an image [..., H, W, C], got a tensor of ", dims, " dim(s)"));
  }
  std::vector<int64_t> order(dims);
  std::iota(order.begin(), order.end() - 3, 0);
  order[dims - 3] = dims - 1;
  order[dims - 2] = dims - 3;
  order[dims - 1] = dims - 2;
  at::Tensor out = input.permute(order);
  if (from_int_) out = out.div(255);
  return out.to(at::kFloat);
}

}  // namespace tdp::nn
