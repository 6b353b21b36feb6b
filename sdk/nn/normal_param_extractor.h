// NormalParamExtractor and AddStateIndependentNormalScale: LibTorch modules that turn a
// network's output into the (loc, scale) of a normal distribution, for use inside a
// TensorDictModule with out_keys {"loc", "scale"}. Python's
// tensordict.nn.NormalParamExtractor and tensordict.nn.AddStateIndependentNormalScale, in tdp::nn
// as in Python.
//
//   tdp::nn::NormalParamExtractor extractor;               // scale: biased_softplus_1.0, >= 1e-4
//   auto [loc, scale] = extractor(torch::randn({3, 4}));    // both [3, 2]
//   tdp::nn::AddStateIndependentNormalScale add_scale(
//       tdp::nn::AddStateIndependentNormalScaleOptions({2}));   // learnable, exp(0) = 1
//   auto [loc2, scale2] = add_scale(loc);                   // scale2: [3, 2], all 1
//   tdp::nn::TensorDictModule params(extractor,
//       tdp::nn::TensorDictModuleOptions({"param"}, {"loc", "scale"}));
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <c10/core/Device.h>

#include "sdk/nn/mappings.h"

namespace tdp::nn {

struct NormalParamExtractorOptions {
  // A mappings() name: softplus, exp, relu, biased_softplus_<bias>, none, ...
  TORCH_ARG(std::string, scale_mapping) = "biased_softplus_1.0";
  // The smallest scale returned.
  TORCH_ARG(double, scale_lb) = 1e-4;
};

// No parameters. Splits the last dim in two halves: loc, then scale mapped to positive values.
class NormalParamExtractorImpl : public torch::nn::Module {
 public:
  explicit NormalParamExtractorImpl(NormalParamExtractorOptions options = {});
  // Throws std::invalid_argument when the last dim is odd.
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& tensor);
  void pretty_print(std::ostream& stream) const override;

  const NormalParamExtractorOptions& options() const { return options_; }

 private:
  NormalParamExtractorOptions options_;
  Mapping mapping_;
};

TORCH_MODULE(NormalParamExtractor);

struct AddStateIndependentNormalScaleOptions {
  AddStateIndependentNormalScaleOptions() = default;
  explicit AddStateIndependentNormalScaleOptions(std::vector<int64_t> scale_shape)
      : scale_shape_(std::move(scale_shape)) {}
  // The shape of the learned scale; loc's last dims must equal it.
  TORCH_ARG(std::vector<int64_t>, scale_shape);
  TORCH_ARG(std::string, scale_mapping) = "exp";
  TORCH_ARG(double, scale_lb) = 1e-4;
  // The parameter's value before the mapping (exp(0) = 1).
  TORCH_ARG(double, init_value) = 0.0;
  TORCH_ARG(std::optional<c10::Device>, device);
  // false: the scale is a buffer, not trained.
  TORCH_ARG(bool, make_param) = true;
};

// Returns its input as loc and a learned, input-independent scale broadcast to loc's shape.
class AddStateIndependentNormalScaleImpl : public torch::nn::Module {
 public:
  explicit AddStateIndependentNormalScaleImpl(
      AddStateIndependentNormalScaleOptions options = AddStateIndependentNormalScaleOptions());
  // Throws std::invalid_argument when loc's last dims differ from scale_shape.
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& loc);
  void pretty_print(std::ostream& stream) const override;

  const AddStateIndependentNormalScaleOptions& options() const { return options_; }
  // The raw parameter (or buffer), registered as "state_independent_scale".
  at::Tensor state_independent_scale;

 private:
  AddStateIndependentNormalScaleOptions options_;
  Mapping mapping_;
};

TORCH_MODULE(AddStateIndependentNormalScale);

}  // namespace tdp::nn
