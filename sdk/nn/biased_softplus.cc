#include "sdk/nn/biased_softplus.h"

#include <ATen/Functions.h>

#include <cmath>
#include <ostream>

namespace tdp::nn {

double inv_softplus(double bias) { return std::log(std::max(std::expm1(bias), 1e-6)); }

at::Tensor inv_softplus(const at::Tensor& bias) { return bias.expm1().clamp_min(1e-6).log(); }

BiasedSoftplusImpl::BiasedSoftplusImpl(BiasedSoftplusOptions options) : options_(options) {
  reset();
}

void BiasedSoftplusImpl::reset() { shift_ = inv_softplus(options_.bias() - options_.min_val()); }

at::Tensor BiasedSoftplusImpl::forward(const at::Tensor& x) {
  // min_val is added in place: softplus's output is fresh and its backward reads its input, not
  // its output, so this saves a tensor per call (at batch 1 the allocations are the cost) and
  // leaves values and gradients as they were.
  return at::softplus(x.add(shift_)).add_(options_.min_val());
}

void BiasedSoftplusImpl::pretty_print(std::ostream& stream) const {
  stream << "tdp::nn::BiasedSoftplus(bias=" << options_.bias() << ", min_val=" << options_.min_val()
         << ")";
}

}  // namespace tdp::nn
