// Layers: the torch.nn / TorchRL building blocks a policy spec names beside the Mlp, and the two
// networks made of other networks.
// - Activation: an elementwise torch.nn activation with its arguments (ELU alpha, LeakyReLU
//   negative_slope, GELU approximate, Softplus beta and threshold, SiLU, ...);
// - Conv2d: torch.nn.Conv2d over [..., C, H, W], any number of batch dims (as TorchRL's ConvNet
//   flattens them around its layers);
// - Flatten: joins the last num_dims dims (TorchRL's SquashDims, nn.Flatten over per-env dims);
// - Sequence: Python's nn.Sequential, each layer's output feeding the next; the last layer may
//   write several tensors (a NormalParamExtractor's loc and scale);
// - Dueling: TorchRL's DuelingCnnDQNet / DuelingMlpDQNet, value + advantage - mean(advantage).
// A Layer is a module with its call over tensors, so that a Sequence or a Dueling can hold any
// network: these, torch::nn's, or whatever a TensorDictModule can wrap.
//
//   tdp::nn::Sequence actor;
//   actor->push_back(torch::nn::Linear(4, 8));
//   actor->push_back(tdp::nn::Activation(tdp::nn::ActivationOptions("elu").alpha(0.5)));
//   actor->push_back(torch::nn::Linear(8, 4));
//   actor->push_back(tdp::nn::NormalParamExtractor());
//   tdp::nn::TensorList out = actor->forward({at::randn({3, 4})});   // {loc [3, 2], scale [3, 2]}
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sdk/nn/tensor_function.h"

namespace tdp::nn {

// A network and how to call it: its inputs in order to its outputs in order.
struct Layer {
  std::shared_ptr<torch::nn::Module> module;
  TensorFunction forward;
};

namespace detail {
inline TensorList layer_outputs(at::Tensor out) { return {std::move(out)}; }
inline TensorList layer_outputs(std::tuple<at::Tensor, at::Tensor> out) {
  return {std::move(std::get<0>(out)), std::move(std::get<1>(out))};
}
inline TensorList layer_outputs(TensorList out) { return out; }
}  // namespace detail

// The Layer of a module whose forward takes one tensor and returns a tensor, a pair of tensors
// or a TensorList (torch::nn::Linear, Mlp, NormalParamExtractor, the layers below, ...).
template <typename M>
Layer make_layer(std::shared_ptr<M> module) {
  return Layer{module, [module](TensorList& in) { return detail::layer_outputs(module->forward(in.at(0))); }};
}
template <typename M>
Layer make_layer(torch::nn::ModuleHolder<M> module) {
  return make_layer(module.ptr());
}

// The activation names an Activation accepts.
const std::vector<std::string>& layer_activation_names();

struct ActivationOptions {
  /* implicit */ ActivationOptions(std::string name) : name_(std::move(name)) {}  // NOLINT
  // One of layer_activation_names().
  TORCH_ARG(std::string, name);
  // Each argument belongs to one activation and is torch's default when unset.
  TORCH_ARG(std::optional<double>, alpha);           // elu (1)
  TORCH_ARG(std::optional<double>, negative_slope);  // leaky_relu (0.01)
  TORCH_ARG(std::string, approximate);               // gelu: "none" (when empty) or "tanh"
  TORCH_ARG(std::optional<double>, beta);            // softplus (1)
  TORCH_ARG(std::optional<double>, threshold);       // softplus (20)
};

// No parameters. Throws std::invalid_argument for an unknown name, an argument of another
// activation, a non-finite argument, a softplus beta of 0 or an unknown gelu approximation.
class ActivationImpl : public torch::nn::Cloneable<ActivationImpl> {
 public:
  explicit ActivationImpl(ActivationOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  const ActivationOptions& options() const { return options_; }

 private:
  enum class Kind { kTanh, kRelu, kElu, kGelu, kLeakyRelu, kSigmoid, kSoftplus, kSilu, kIdentity };
  ActivationOptions options_;
  Kind kind_ = Kind::kIdentity;
};
TORCH_MODULE(Activation);

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(std::move(kernel_size)) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(std::vector<int64_t>, kernel_size);  // [kh, kw]
  TORCH_ARG(std::vector<int64_t>, stride) = std::vector<int64_t>{1, 1};
  TORCH_ARG(std::vector<int64_t>, padding) = std::vector<int64_t>{0, 0};  // zeros on each side
  TORCH_ARG(std::vector<int64_t>, dilation) = std::vector<int64_t>{1, 1};
  TORCH_ARG(int64_t, groups) = 1;
  TORCH_ARG(bool, bias) = true;
};

// Parameters "weight" [out, in / groups, kh, kw] and "bias" [out], initialized as torch.nn.Conv2d.
// Reads [..., in_channels, H, W] (at least 3 dims), writes [..., out_channels, H', W'].
class Conv2dImpl : public torch::nn::Cloneable<Conv2dImpl> {
 public:
  // Throws std::invalid_argument for a non-positive size, a list not of 2 values, or channels
  // that groups does not divide.
  explicit Conv2dImpl(Conv2dOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  const Conv2dOptions& options() const { return options_; }

  at::Tensor weight, bias;

 private:
  Conv2dOptions options_;
};
TORCH_MODULE(Conv2d);

// Joins the last num_dims dims into one; no parameters. Throws std::invalid_argument for
// num_dims < 1, and on forward for an input of fewer dims.
class FlattenImpl : public torch::nn::Cloneable<FlattenImpl> {
 public:
  explicit FlattenImpl(int64_t num_dims);
  void reset() override;
  at::Tensor forward(const at::Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  int64_t num_dims() const { return num_dims_; }

 private:
  int64_t num_dims_;
};
TORCH_MODULE(Flatten);

// Layers in order, registered as "layers.0", "layers.1", ...: the first reads the inputs, each
// next one the single output of the one before, and the last one's outputs are the Sequence's.
class SequenceImpl : public torch::nn::Module {
 public:
  SequenceImpl();
  void push_back(Layer layer);
  template <typename M>
  void push_back(torch::nn::ModuleHolder<M> module) {
    push_back(make_layer(module.ptr()));
  }
  // Throws std::invalid_argument when there is no layer, or when a layer but the last writes
  // other than one tensor.
  TensorList forward(TensorList inputs);
  const std::vector<Layer>& layers() const { return layers_; }

 private:
  torch::nn::ModuleList modules_{nullptr};
  std::vector<Layer> layers_;
};
TORCH_MODULE(Sequence);

// value(f) + advantage(f) - mean(advantage(f), -1) with f = features(x): each network reads one
// tensor and writes one; they are registered as "features", "advantage" and "value".
class DuelingImpl : public torch::nn::Module {
 public:
  DuelingImpl(Layer features, Layer advantage, Layer value);
  at::Tensor forward(const at::Tensor& input);
  const Layer& features() const { return features_; }
  const Layer& advantage() const { return advantage_; }
  const Layer& value() const { return value_; }

 private:
  Layer features_, advantage_, value_;
};
TORCH_MODULE(Dueling);

}  // namespace tdp::nn
