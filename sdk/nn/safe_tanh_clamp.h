// safe_tanh_clamp: a tensor clamped into [-(1 - r), 1 - r], r = torch.finfo(dtype).resolution
// (float32: 1e-6, float64: 1e-15). TorchRL's safetanh and safeatanh clamp there so that a tanh
// output never reaches +-1 and atanh and log(1 - y^2) stay finite; TanhModule (clamp), TanhNormal
// and TanhDelta (safe_tanh) use it for the same reason.
//
//   at::Tensor action = tdp::nn::safe_tanh_clamp(pre_tanh.tanh());   // inside (-1, 1)
//   at::Tensor back = tdp::nn::safe_tanh_clamp(action).atanh();      // finite
#pragma once

#include <ATen/core/Tensor.h>

namespace tdp::nn {

at::Tensor safe_tanh_clamp(const at::Tensor& x);

}  // namespace tdp::nn
