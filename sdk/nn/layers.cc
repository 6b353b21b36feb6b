#include "sdk/nn/layers.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <torch/nn/init.h>
#include <torch/utils.h>

#include <cmath>
#include <ostream>
#include <stdexcept>

namespace tdp::nn {
namespace {

void check_finite(const std::optional<double>& value, const char* what) {
  if (value && !std::isfinite(*value)) {
    throw std::invalid_argument(absl::StrCat("Activation: ", what, " must be finite, got ", *value));
  }
}

// An argument (`what`, `set` when given) belongs to the activation `owner` only.
void check_owner(const ActivationOptions& o, const std::string& owner, bool set, const char* what) {
  if (set && o.name() != owner) {
    throw std::invalid_argument(
        absl::StrCat("Activation: ", what, " is an argument of ", owner, ", not of ", o.name()));
  }
}

void check_pair(const char* module, const char* what, const std::vector<int64_t>& values, int64_t min) {
  if (values.size() != 2 || values[0] < min || values[1] < min) {
    throw std::invalid_argument(
        absl::StrCat(module, ": ", what, " must be 2 values >= ", min, ", got [", absl::StrJoin(values, ", "), "]"));
  }
}

}  // namespace

const std::vector<std::string>& layer_activation_names() {
  static const std::vector<std::string> names = {"tanh",    "relu",     "elu",  "gelu",    "leaky_relu",
                                                 "sigmoid", "softplus", "silu", "identity"};
  return names;
}

ActivationImpl::ActivationImpl(ActivationOptions options) : options_(std::move(options)) { reset(); }

void ActivationImpl::reset() {
  static const std::pair<const char*, Kind> kinds[] = {{"tanh", Kind::kTanh},
                                                       {"relu", Kind::kRelu},
                                                       {"elu", Kind::kElu},
                                                       {"gelu", Kind::kGelu},
                                                       {"leaky_relu", Kind::kLeakyRelu},
                                                       {"sigmoid", Kind::kSigmoid},
                                                       {"softplus", Kind::kSoftplus},
                                                       {"silu", Kind::kSilu},
                                                       {"identity", Kind::kIdentity}};
  bool known = false;
  for (const auto& [name, kind] : kinds) {
    if (options_.name() == name) {
      kind_ = kind;
      known = true;
    }
  }
  if (!known) {
    throw std::invalid_argument(absl::StrCat("Activation: unknown activation '", options_.name(), "'; expected one of ",
                                             absl::StrJoin(layer_activation_names(), ", ")));
  }
  check_owner(options_, "elu", options_.alpha().has_value(), "alpha");
  check_owner(options_, "leaky_relu", options_.negative_slope().has_value(), "negative_slope");
  check_owner(options_, "gelu", !options_.approximate().empty(), "approximate");
  check_owner(options_, "softplus", options_.beta().has_value(), "beta");
  check_owner(options_, "softplus", options_.threshold().has_value(), "threshold");
  check_finite(options_.alpha(), "alpha");
  check_finite(options_.negative_slope(), "negative_slope");
  check_finite(options_.beta(), "beta");
  check_finite(options_.threshold(), "threshold");
  if (options_.beta() == 0.0) throw std::invalid_argument("Activation: softplus beta must not be 0");
  const std::string& approximate = options_.approximate();
  if (!approximate.empty() && approximate != "none" && approximate != "tanh") {
    throw std::invalid_argument(
        absl::StrCat("Activation: gelu approximate must be \"none\" or \"tanh\", got \"", approximate, "\""));
  }
}

at::Tensor ActivationImpl::forward(const at::Tensor& x) {
  switch (kind_) {
    case Kind::kTanh: return at::tanh(x);
    case Kind::kRelu: return at::relu(x);
    case Kind::kElu: return at::elu(x, options_.alpha().value_or(1.0));
    case Kind::kGelu: return at::gelu(x, options_.approximate().empty() ? "none" : options_.approximate());
    case Kind::kLeakyRelu: return at::leaky_relu(x, options_.negative_slope().value_or(0.01));
    case Kind::kSigmoid: return at::sigmoid(x);
    case Kind::kSoftplus: return at::softplus(x, options_.beta().value_or(1.0), options_.threshold().value_or(20.0));
    case Kind::kSilu: return at::silu(x);
    case Kind::kIdentity: return x;
  }
  return x;
}

void ActivationImpl::pretty_print(std::ostream& stream) const {
  stream << "tdp::nn::Activation(" << options_.name();
  if (options_.alpha()) stream << ", alpha=" << *options_.alpha();
  if (options_.negative_slope()) stream << ", negative_slope=" << *options_.negative_slope();
  if (!options_.approximate().empty()) stream << ", approximate=" << options_.approximate();
  if (options_.beta()) stream << ", beta=" << *options_.beta();
  if (options_.threshold()) stream << ", threshold=" << *options_.threshold();
  stream << ")";
}

Conv2dImpl::Conv2dImpl(Conv2dOptions options) : options_(std::move(options)) { reset(); }

void Conv2dImpl::reset() {
  const auto& o = options_;
  if (o.in_channels() <= 0 || o.out_channels() <= 0 || o.groups() <= 0) {
    throw std::invalid_argument(absl::StrCat("Conv2d: in_channels, out_channels and groups must be positive, got ",
                                             o.in_channels(), ", ", o.out_channels(), ", ", o.groups()));
  }
  if (o.in_channels() % o.groups() != 0 || o.out_channels() % o.groups() != 0) {
    throw std::invalid_argument(absl::StrCat("Conv2d: groups ", o.groups(), " must divide in_channels ",
                                             o.in_channels(), " and out_channels ", o.out_channels()));
  }
  check_pair("Conv2d", "kernel_size", o.kernel_size(), 1);
  check_pair("Conv2d", "stride", o.stride(), 1);
  check_pair("Conv2d", "padding", o.padding(), 0);
  check_pair("Conv2d", "dilation", o.dilation(), 1);
  weight = register_parameter(
      "weight", at::empty({o.out_channels(), o.in_channels() / o.groups(), o.kernel_size()[0], o.kernel_size()[1]}));
  // torch.nn.Conv2d.reset_parameters: kaiming_uniform(a = sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (o.bias()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(weight.size(1) * weight.size(2) * weight.size(3)));
    bias = register_parameter("bias", at::empty({o.out_channels()}).uniform_(-bound, bound));
  } else {
    bias = at::Tensor();
  }
}

at::Tensor Conv2dImpl::forward(const at::Tensor& input) {
  if (input.dim() < 3) {
    throw std::invalid_argument(
        absl::StrCat("Conv2d: expected an input of [..., C, H, W], got ", input.dim(), " dims"));
  }
  const auto sizes = input.sizes();
  const std::vector<int64_t> batch(sizes.begin(), sizes.end() - 3);
  at::Tensor out =
      at::conv2d(input.reshape({-1, sizes[sizes.size() - 3], sizes[sizes.size() - 2], sizes.back()}), weight, bias,
                 options_.stride(), options_.padding(), options_.dilation(), options_.groups());
  std::vector<int64_t> shape = batch;
  shape.insert(shape.end(), out.sizes().begin() + 1, out.sizes().end());
  return out.reshape(shape);
}

void Conv2dImpl::pretty_print(std::ostream& stream) const {
  const auto& o = options_;
  stream << "tdp::nn::Conv2d(" << o.in_channels() << ", " << o.out_channels() << ", kernel_size=["
         << absl::StrJoin(o.kernel_size(), ", ") << "], stride=[" << absl::StrJoin(o.stride(), ", ") << "], padding=["
         << absl::StrJoin(o.padding(), ", ") << "], dilation=[" << absl::StrJoin(o.dilation(), ", ")
         << "], groups=" << o.groups() << ", bias=" << (o.bias() ? "true" : "false") << ")";
}

FlattenImpl::FlattenImpl(int64_t num_dims) : num_dims_(num_dims) { reset(); }

void FlattenImpl::reset() {
  if (num_dims_ < 1) throw std::invalid_argument(absl::StrCat("Flatten: num_dims must be positive, got ", num_dims_));
}

at::Tensor FlattenImpl::forward(const at::Tensor& input) {
  if (input.dim() < num_dims_) {
    throw std::invalid_argument(
        absl::StrCat("Flatten: cannot join the last ", num_dims_, " dims of an input of ", input.dim(), " dims"));
  }
  return input.flatten(-num_dims_, -1);
}

void FlattenImpl::pretty_print(std::ostream& stream) const {
  stream << "tdp::nn::Flatten(num_dims=" << num_dims_ << ")";
}

SequenceImpl::SequenceImpl() : modules_(register_module("layers", torch::nn::ModuleList())) {}

void SequenceImpl::push_back(Layer layer) {
  if (layer.module == nullptr || !layer.forward) throw std::invalid_argument("Sequence: an empty layer");
  modules_->push_back(layer.module);
  layers_.push_back(std::move(layer));
}

TensorList SequenceImpl::forward(TensorList inputs) {
  if (layers_.empty()) throw std::invalid_argument("Sequence: no layer");
  for (size_t i = 0; i < layers_.size(); ++i) {
    inputs = layers_[i].forward(inputs);
    if (i + 1 < layers_.size() && inputs.size() != 1) {
      throw std::invalid_argument(absl::StrCat("Sequence: layer ", i, " (", layers_[i].module->name(), ") wrote ",
                                               inputs.size(), " tensors; a layer before the last writes one"));
    }
  }
  return inputs;
}

DuelingImpl::DuelingImpl(Layer features, Layer advantage, Layer value)
    : features_(std::move(features)), advantage_(std::move(advantage)), value_(std::move(value)) {
  for (const auto& [name, layer] :
       {std::pair<const char*, Layer*>{"features", &features_}, {"advantage", &advantage_}, {"value", &value_}}) {
    if (layer->module == nullptr || !layer->forward) throw std::invalid_argument(absl::StrCat("Dueling: no ", name));
    register_module(name, layer->module);
  }
}

at::Tensor DuelingImpl::forward(const at::Tensor& input) {
  auto one = [](const Layer& layer, const char* name, at::Tensor x) {
    TensorList in{std::move(x)};
    TensorList out = layer.forward(in);
    if (out.size() != 1) {
      throw std::invalid_argument(absl::StrCat("Dueling: ", name, " wrote ", out.size(), " tensors, expected one"));
    }
    return out[0];
  };
  const at::Tensor features = one(features_, "features", input);
  const at::Tensor advantage = one(advantage_, "advantage", features);
  const at::Tensor value = one(value_, "value", features);
  // TorchRL's order of operations, so that the float results are the same.
  return value + advantage - advantage.mean(-1, /*keepdim=*/true);
}

}  // namespace tdp::nn
