// BiasedSoftplus: softplus(x + shift) + min_val, with the shift chosen so that a zero input
// maps to `bias`. Networks use it to produce positive values (a distribution's scale) that
// start at a chosen value. Python's tensordict.nn.biased_softplus; inv_softplus is its helper.
//
//   tdp::nn::BiasedSoftplus scale_map(tdp::nn::BiasedSoftplusOptions(1.0).min_val(0.01));
//   at::Tensor scale = scale_map(torch::zeros({3}));    // [1, 1, 1]
//   double x = tdp::nn::inv_softplus(2.0);              // softplus(x) == 2
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <iosfwd>

namespace tdp::nn {

// log(exp(bias) - 1), the input for which softplus returns `bias` (clamped at 1e-6 before the
// log, as tensordict does, so that bias <= 0 gives a large negative number, not NaN).
double inv_softplus(double bias);
at::Tensor inv_softplus(const at::Tensor& bias);

struct BiasedSoftplusOptions {
  /* implicit */ BiasedSoftplusOptions(double bias) : bias_(bias) {}  // NOLINT
  // The output for a zero input.
  TORCH_ARG(double, bias);
  // The infimum of the output.
  TORCH_ARG(double, min_val) = 0.01;
};

class BiasedSoftplusImpl : public torch::nn::Cloneable<BiasedSoftplusImpl> {
 public:
  explicit BiasedSoftplusImpl(BiasedSoftplusOptions options);
  at::Tensor forward(const at::Tensor& x);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  const BiasedSoftplusOptions& options() const { return options_; }
  // The shift added to x: inv_softplus(bias - min_val).
  double shift() const { return shift_; }

 private:
  BiasedSoftplusOptions options_;
  double shift_ = 0.0;
};

TORCH_MODULE(BiasedSoftplus);

}  // namespace tdp::nn
