#include "sdk/nn/normal_param_extractor.h"

#include <ATen/ops/full.h>
#include <c10/core/ScalarType.h>
#include <c10/core/DefaultDtype.h>

#include <ostream>
#include <stdexcept>

#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {
NormalParamExtractorImpl::NormalParamExtractorImpl(NormalParamExtractorOptions options)
    : options_(std::move(options)), mapping_(mappings(options_.scale_mapping())) {}

std::tuple<at::Tensor, at::Tensor> NormalParamExtractorImpl::forward(const at::Tensor& tensor) {
  if (tensor.dim() == 0 || tensor.size(-1) % 2 != 0) {
    throw std::invalid_argument("NormalParamExtractor: the last dim of the input must be even "
                                "(loc and scale halves); got shape " +
                                shape_to_string(tensor.sizes()) + ".");
  }
  auto halves = tensor.chunk(2, -1);
  return {halves[0], mapping_(halves[1]).clamp_min(options_.scale_lb())};
}

void NormalParamExtractorImpl::pretty_print(std::ostream& stream) const {
  stream << "NormalParamExtractor(scale_mapping=" << options_.scale_mapping()
         << ", scale_lb=" << options_.scale_lb() << ")";
}

AddStateIndependentNormalScaleImpl::AddStateIndependentNormalScaleImpl(
    AddStateIndependentNormalScaleOptions options)
    : options_(std::move(options)), mapping_(mappings(options_.scale_mapping())) {
  at::TensorOptions tensor_options =
      at::TensorOptions().dtype(c10::get_default_dtype()).device(
          options_.device().value_or(c10::Device(c10::kCPU)));
  at::Tensor init = at::full(options_.scale_shape(), options_.init_value(), tensor_options);
  state_independent_scale = options_.make_param()
                                ? register_parameter("state_independent_scale", init)
                                : register_buffer("state_independent_scale", init);
}

std::tuple<at::Tensor, at::Tensor> AddStateIndependentNormalScaleImpl::forward(
    const at::Tensor& loc) {
  const auto& shape = options_.scale_shape();
  const int64_t n = static_cast<int64_t>(shape.size());
  bool matches = loc.dim() >= n;
  for (int64_t i = 0; matches && i < n; ++i) matches = loc.size(loc.dim() - n + i) == shape[i];
  if (!matches) {
    std::vector<int64_t> last(loc.sizes().end() - std::min<int64_t>(n, loc.dim()), loc.sizes().end());
    throw std::invalid_argument("AddStateIndependentNormalScale: last dimensions of loc (" +
                                shape_to_string(last) +
                                ") do not match the number of dimensions in scale (" +
                                shape_to_string(shape) + ")");
  }
  at::Tensor scale = mapping_(state_independent_scale.expand_as(loc)).clamp_min(options_.scale_lb());
  return {loc, scale};
}

void AddStateIndependentNormalScaleImpl::pretty_print(std::ostream& stream) const {
  stream << "AddStateIndependentNormalScale(scale_shape=" << shape_to_string(options_.scale_shape())
         << ", scale_mapping=" << options_.scale_mapping() << ", scale_lb=" << options_.scale_lb()
         << ")";
}

}  // namespace tdp::nn
