#include "sdk/nn/multi_agent_mlp.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "sdk/nn/networks.h"

namespace tdp::nn {
namespace {

// torch::nn's default activation modules, as functions.
at::Tensor activate(const std::string& name, const at::Tensor& x) {
  if (name == "tanh") return at::tanh(x);
  if (name == "relu") return at::relu(x);
  if (name == "elu") return at::elu(x);
  if (name == "gelu") return at::gelu(x);
  if (name == "leaky_relu") return at::leaky_relu(x, 0.01);
  if (name == "sigmoid") return at::sigmoid(x);
  if (name == "softplus") return at::softplus(x, 1.0, 20.0);
  return x;  // identity
}

void check_positive(const char* what, int64_t value) {
  if (value <= 0) throw std::invalid_argument(absl::StrCat("MultiAgentMlp: ", what, " must be positive, got ", value));
}

}  // namespace

MultiAgentMlpImpl::MultiAgentMlpImpl(MultiAgentMlpOptions options) : options_(std::move(options)) { reset(); }

int64_t MultiAgentMlpImpl::agent_in_features() const {
  return options_.n_agent_inputs() * (options_.centralized() ? options_.n_agents() : 1);
}

void MultiAgentMlpImpl::reset() {
  check_positive("n_agents", options_.n_agents());
  check_positive("n_agent_inputs", options_.n_agent_inputs());
  check_positive("n_agent_outputs", options_.n_agent_outputs());
  for (int64_t size : options_.hidden_sizes()) check_positive("hidden size", size);
  const auto& names = activation_names();
  if (std::find(names.begin(), names.end(), options_.activation()) == names.end()) {
    throw std::invalid_argument(absl::StrCat("MultiAgentMlp: unknown activation '", options_.activation(),
                                             "'; expected one of ", absl::StrJoin(names, ", ")));
  }
  // "params" holds one child per Linear, named by its index in TorchRL's MLP (an activation
  // follows each hidden Linear), so that the names are the Python module's.
  auto params = std::make_shared<torch::nn::Module>("params");
  linears_.clear();
  std::vector<int64_t> widths = {agent_in_features()};
  widths.insert(widths.end(), options_.hidden_sizes().begin(), options_.hidden_sizes().end());
  widths.push_back(options_.n_agent_outputs());
  std::vector<int64_t> copies;
  if (!options_.share_params()) copies.push_back(options_.n_agents());
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const int64_t in = widths[i], out = widths[i + 1];
    auto layer = std::make_shared<torch::nn::Module>("Linear");
    std::vector<int64_t> weight_shape = copies, bias_shape = copies;
    weight_shape.insert(weight_shape.end(), {out, in});
    bias_shape.push_back(out);
    // torch.nn.Linear's initialization, each agent's independently.
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    at::Tensor weight = layer->register_parameter("weight", at::empty(weight_shape).uniform_(-bound, bound));
    at::Tensor bias = layer->register_parameter("bias", at::empty(bias_shape).uniform_(-bound, bound));
    params->register_module(std::to_string(2 * i), layer);
    linears_.emplace_back(weight, bias);
  }
  register_module("params", params);
}

at::Tensor MultiAgentMlpImpl::forward(const std::vector<at::Tensor>& inputs) {
  if (inputs.empty()) throw std::invalid_argument("MultiAgentMlp: needs at least one input");
  at::Tensor x = inputs.size() > 1 ? at::cat(inputs, -1) : inputs[0];
  const int64_t agents = options_.n_agents();
  if (x.dim() < 2 || x.size(-2) != agents || x.size(-1) != options_.n_agent_inputs()) {
    throw std::invalid_argument(absl::StrCat("MultiAgentMlp: expects inputs [..., n_agents=", agents,
                                             ", n_agent_inputs=", options_.n_agent_inputs(), "], got [",
                                             absl::StrJoin(x.sizes(), ", "), "]"));
  }
  if (options_.centralized()) {
    x = x.flatten(-2, -1);
    if (!options_.share_params()) {
      // Every agent's network reads all agents' inputs: the agent dim comes back, repeated.
      std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
      shape.insert(shape.end() - 1, agents);
      x = x.unsqueeze(-2).expand(shape);
    }
  }
  const size_t n = linears_.size();
  for (size_t i = 0; i < n; ++i) {
    const auto& [weight, bias] = linears_[i];
    if (options_.share_params()) {
      x = at::linear(x, weight, bias);
    } else {
      // [..., A, 1, in] @ [A, in, out] -> [..., A, 1, out]: each agent's row through its weights.
      x = at::matmul(x.unsqueeze(-2), weight.transpose(-1, -2)).squeeze(-2) + bias;
    }
    if (i + 1 < n || options_.activate_last_layer()) x = activate(options_.activation(), x);
  }
  if (options_.centralized() && options_.share_params()) {
    // One output for all: repeated per agent, as TorchRL's expand does.
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.insert(shape.end() - 1, agents);
    x = x.unsqueeze(-2).expand(shape);
  }
  return x;
}

}  // namespace tdp::nn
