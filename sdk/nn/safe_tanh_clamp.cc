#include "sdk/nn/safe_tanh_clamp.h"

namespace tdp::nn {
namespace {

// torch.finfo(dtype).resolution: 10^-(decimal digits of precision).
double resolution(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble:
      return 1e-15;
    case at::kHalf:
      return 1e-3;
    case at::kBFloat16:
      return 1e-2;
    default:
      return 1e-6;
  }
}

}  // namespace

at::Tensor safe_tanh_clamp(const at::Tensor& x) {
  const double limit = 1.0 - resolution(x.scalar_type());
  return x.clamp(-limit, limit);
}

}  // namespace tdp::nn
