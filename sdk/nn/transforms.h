// The observation transforms a policy depends on, as modules in front of it: TorchRL's
// ObservationNorm (and the frozen statistics of VecNorm), DoubleToFloat and ToTensorImage. In
// Python they run inside the environment (a TransformedEnv); an exported spec runs them inside
// the policy, so a C++ simulator feeds the raw observation and gets the actions Python gets from
// the transformed env.
//
//   tdp::nn::ObservationNorm norm(tdp::nn::ObservationNormOptions({3}).standard_normal(true).clip(10.0));
//   norm->set_statistics(mean, std);                              // buffers "loc" and "scale"
//   at::Tensor x = norm(tdp::nn::ToDtype(at::kFloat)(raw));       // (raw - mean) / std in [-10, 10]
//   at::Tensor image = tdp::nn::ToTensorImage(true)(pixels);      // uint8 [B, H, W, C] -> float [B, C, H, W] / 255
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace tdp::nn {

struct ObservationNormOptions {
  explicit ObservationNormOptions(std::vector<int64_t> shape) : shape_(std::move(shape)) {}
  // The buffers' shape, broadcastable to the input's (TorchRL's loc/scale shape; [] for scalars).
  TORCH_ARG(std::vector<int64_t>, shape);
  // (x - loc) / scale when true (VecNorm's and a standardizing ObservationNorm's form), else
  // x * scale + loc (ObservationNorm's default).
  TORCH_ARG(bool, standard_normal) = false;
  // Then clamped to [-clip, clip] (Gymnasium's NormalizeObservation wrapper clips, for example).
  TORCH_ARG(std::optional<double>, clip) = std::nullopt;
};

// An affine observation normalization with its statistics in float32 buffers "loc" and "scale"
// (zeros and ones when built, so an untrained one passes the observation through). The buffers
// are ordinary module state: load_policy fills them from the spec's parameters, export_spec and
// save_policy write their current values, and set_statistics() replaces them in place (what a
// running normalization does between calls).
class ObservationNormImpl : public torch::nn::Cloneable<ObservationNormImpl> {
 public:
  // Throws std::invalid_argument for a negative size or a clip that is not positive.
  explicit ObservationNormImpl(ObservationNormOptions options);
  void reset() override;
  // torch's type promotion applies: a float64 observation is normalized in float64.
  at::Tensor forward(const at::Tensor& input);
  // Copies `loc` and `scale` (broadcastable to the buffers' shape) into the buffers.
  void set_statistics(const at::Tensor& loc, const at::Tensor& scale);
  const ObservationNormOptions& options() const { return options_; }

  at::Tensor loc, scale;

 private:
  ObservationNormOptions options_;
};
TORCH_MODULE(ObservationNorm);

// x.to(dtype) (TorchRL's DoubleToFloat, DTypeCastTransform).
class ToDtypeImpl : public torch::nn::Cloneable<ToDtypeImpl> {
 public:
  explicit ToDtypeImpl(at::ScalarType dtype) : dtype_(dtype) {}
  void reset() override {}
  at::Tensor forward(const at::Tensor& input) { return input.to(dtype_); }
  at::ScalarType dtype() const { return dtype_; }

 private:
  at::ScalarType dtype_;
};
TORCH_MODULE(ToDtype);

// TorchRL's ToTensorImage: an image [..., H, W, C] becomes float32 [..., C, H, W], divided by
// 255 first when from_int (the ops and their order are TorchRL's: permute, div, to float32).
// Throws std::invalid_argument on forward for an input of fewer than 3 dims.
class ToTensorImageImpl : public torch::nn::Cloneable<ToTensorImageImpl> {
 public:
  explicit ToTensorImageImpl(bool from_int) : from_int_(from_int) {}
  void reset() override {}
  at::Tensor forward(const at::Tensor& input);
  bool from_int() const { return from_int_; }

 private:
  bool from_int_;
};
TORCH_MODULE(ToTensorImage);

}  // namespace tdp::nn
