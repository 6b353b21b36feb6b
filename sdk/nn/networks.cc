#include "sdk/nn/networks.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <stdexcept>

namespace tdp::nn {
namespace {

// Appends the activation `name` to `mlp` (through MlpImpl::add_layer).
template <typename AddLayer>
void add_activation(const std::string& name, AddLayer add_layer) {
  if (name == "tanh") return add_layer(torch::nn::Tanh());
  if (name == "relu") return add_layer(torch::nn::ReLU());
  if (name == "elu") return add_layer(torch::nn::ELU());
  if (name == "gelu") return add_layer(torch::nn::GELU());
  if (name == "leaky_relu") return add_layer(torch::nn::LeakyReLU());
  if (name == "sigmoid") return add_layer(torch::nn::Sigmoid());
  if (name == "softplus") return add_layer(torch::nn::Softplus());
  if (name == "identity") return add_layer(torch::nn::Identity());
  throw std::invalid_argument(absl::StrCat("Mlp: unknown activation '", name, "'; expected one of ",
                                           absl::StrJoin(activation_names(), ", ")));
}

void check_positive(const char* module, const char* what, int64_t value) {
  if (value <= 0) throw std::invalid_argument(absl::StrCat(module, ": ", what, " must be positive, got ", value));
}

// Cells take 2-D inputs; policies also run them on [T, N, F] or unbatched [F] inputs.
at::Tensor flat(const at::Tensor& t, int64_t features) { return t.reshape({-1, features}); }

}  // namespace

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = {"tanh", "relu", "elu", "gelu", "leaky_relu",
                                                 "sigmoid", "softplus", "identity"};
  return names;
}

MlpImpl::MlpImpl(MlpOptions options) : options_(std::move(options)) { reset(); }

void MlpImpl::reset() {
  check_positive("Mlp", "in_features", options_.in_features());
  check_positive("Mlp", "out_features", options_.out_features());
  for (int64_t size : options_.hidden_sizes()) check_positive("Mlp", "hidden size", size);
  add_activation(options_.activation(), [](auto) {});  // validates the name before any layer exists
  layers_ = torch::nn::Sequential();
  steps_.clear();
  auto add_layer = [this](auto layer) { this->add_layer(std::move(layer)); };
  int64_t width = options_.in_features();
  for (int64_t size : options_.hidden_sizes()) {
    add_layer(torch::nn::Linear(width, size));
    if (options_.layer_norm()) add_layer(torch::nn::LayerNorm(torch::nn::LayerNormOptions({size})));
    add_activation(options_.activation(), add_layer);
    width = size;
  }
  add_layer(torch::nn::Linear(width, options_.out_features()));
  if (options_.activate_last_layer()) add_activation(options_.activation(), add_layer);
  layers_ = register_module("layers", layers_);
}

template <typename Layer>
void MlpImpl::add_layer(Layer layer) {
  layers_->push_back(layer);
  steps_.push_back([layer](const at::Tensor& x) mutable { return layer->forward(x); });
}

at::Tensor MlpImpl::forward(const at::Tensor& input) {
  at::Tensor x = input;
  for (const auto& step : steps_) x = step(x);
  return x;
}

GruCellImpl::GruCellImpl(GruCellOptions options) : options_(options) { reset(); }

void GruCellImpl::reset() {
  check_positive("GruCell", "input_size", options_.input_size());
  check_positive("GruCell", "hidden_size", options_.hidden_size());
  cell_ = register_module("cell", torch::nn::GRUCell(options_.input_size(), options_.hidden_size()));
}

at::Tensor GruCellImpl::forward(const at::Tensor& input, const at::Tensor& hidden) {
  std::vector<int64_t> out_shape(input.sizes().begin(), input.sizes().end() - 1);
  out_shape.push_back(options_.hidden_size());
  at::Tensor h = hidden.defined() ? flat(hidden, options_.hidden_size()) : at::Tensor();
  return cell_->forward(flat(input, options_.input_size()), h).reshape(out_shape);
}

LstmCellImpl::LstmCellImpl(LstmCellOptions options) : options_(options) { reset(); }

void LstmCellImpl::reset() {
  check_positive("LstmCell", "input_size", options_.input_size());
  check_positive("LstmCell", "hidden_size", options_.hidden_size());
  cell_ = register_module("cell", torch::nn::LSTMCell(options_.input_size(), options_.hidden_size()));
}

std::tuple<at::Tensor, at::Tensor> LstmCellImpl::forward(const at::Tensor& input, const at::Tensor& h,
                                                          const at::Tensor& c) {
  std::vector<int64_t> out_shape(input.sizes().begin(), input.sizes().end() - 1);
  out_shape.push_back(options_.hidden_size());
  const int64_t hidden = options_.hidden_size();
  c10::optional<std::tuple<at::Tensor, at::Tensor>> state;
  if (h.defined() || c.defined()) {
    at::Tensor zeros = at::zeros({flat(input, options_.input_size()).size(0), hidden}, input.options());
    state = std::make_tuple(h.defined() ? flat(h, hidden) : zeros, c.defined() ? flat(c, hidden) : zeros);
  }
  auto [h_next, c_next] = cell_->forward(flat(input, options_.input_size()), state);
  return {h_next.reshape(out_shape), c_next.reshape(out_shape)};
}

MappingModuleImpl::MappingModuleImpl(std::string name) : name_(std::move(name)), mapping_(nn::mappings(name_)) {}

OneHotImpl::OneHotImpl(int64_t num_classes) : num_classes_(num_classes) {
  if (num_classes <= 0) {
    throw std::invalid_argument(absl::StrCat("OneHot: num_classes must be positive, got ", num_classes));
  }
}

at::Tensor OneHotImpl::forward(const at::Tensor& index) {
  if (!index.defined()) throw std::invalid_argument("OneHot: the input is undefined");
  if (at::isFloatingType(index.scalar_type()) || at::isComplexType(index.scalar_type())) {
    throw std::invalid_argument(absl::StrCat("OneHot: expects an integer index tensor, got ",
                                             c10::toString(index.scalar_type())));
  }
  // at::one_hot checks the range (a negative or too large index throws).
  return at::one_hot(index.to(at::kLong), num_classes_).to(at::kFloat);
}

at::Tensor CatImpl::forward(const std::vector<at::Tensor>& inputs) {
  if (inputs.empty()) throw std::invalid_argument("Cat: needs at least one input");
  return at::cat(inputs, -1);
}

}  // namespace tdp::nn
