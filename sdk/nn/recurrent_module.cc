#include "sdk/nn/recurrent_module.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>

#include <stdexcept>

namespace tdp::nn {
namespace {

std::vector<int64_t> with_tail(c10::IntArrayRef batch, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> shape(batch.begin(), batch.end());
  shape.insert(shape.end(), tail);
  return shape;
}

}  // namespace

RecurrentModuleImpl::RecurrentModuleImpl(std::string name, RecurrentModuleOptions options, int states)
    : TensorDictModuleBase(name, options.in_keys(), options.out_keys()), options_(std::move(options)), states_(states) {
  const RecurrentModuleOptions& o = options_;
  const std::pair<const char*, int64_t> sizes[] = {
      {"input_size", o.input_size()}, {"hidden_size", o.hidden_size()}, {"num_layers", o.num_layers()}};
  for (const auto& [field, value] : sizes) {
    if (value < 1) throw std::invalid_argument(absl::StrCat(name, ": ", field, " must be at least 1, got ", value));
  }
  // [input, states..., is_init] in, [output, next states...] out.
  if (o.in_keys().size() != static_cast<size_t>(states + 2) || o.out_keys().size() != static_cast<size_t>(states + 1)) {
    throw std::invalid_argument(absl::StrCat(name, ": expected ", states + 2, " in_keys (input, ",
                                             states == 2 ? "h, c" : "h", ", is_init) and ", states + 1,
                                             " out_keys (output, ", states == 2 ? "next h, next c" : "next h",
                                             "), got ", o.in_keys().size(), " and ", o.out_keys().size()));
  }
}

TensorDict RecurrentModuleImpl::forward_impl(TensorDict td, const std::optional<TensorDict>& tensordict_out) {
  const std::vector<NestedKey>& in = options_.in_keys();
  const std::vector<NestedKey>& out = options_.out_keys();
  const int64_t layers = options_.num_layers();
  const int64_t hidden = options_.hidden_size();
  const at::Tensor input = td.get(in[0]);
  if (input.dim() < 1 || input.size(-1) != options_.input_size()) {
    throw std::invalid_argument(absl::StrCat(type_name(), ": \"", in[0].to_string(), "\" has shape ",
                                             c10::str(input.sizes()), ", expected [..., ", options_.input_size(), "]"));
  }
  const c10::IntArrayRef batch = input.sizes().slice(0, input.dim() - 1);
  const int64_t rows = c10::multiply_integers(batch);
  std::vector<at::Tensor> states;
  int given = 0;
  for (int s = 0; s < states_; ++s) {
    states.push_back(td.get(in[1 + s], at::Tensor()));
    given += states.back().defined() ? 1 : 0;
  }
  if (given != 0 && given != states_) {
    throw std::invalid_argument(absl::StrCat(type_name(), ": reads \"", in[1].to_string(), "\" and \"",
                                             in[2].to_string(), "\": give both states or neither (zeros)"));
  }
  const at::Tensor is_init = td.get(in.back(), at::Tensor());
  for (at::Tensor& state : states) {
    if (!state.defined()) {
      state = at::zeros({layers, rows, hidden}, input.options());
      continue;
    }
    if (state.numel() != rows * layers * hidden) {
      throw std::invalid_argument(absl::StrCat(type_name(), ": a state of shape ", c10::str(state.sizes()),
                                               " for an input of shape ", c10::str(input.sizes()), ", expected ",
                                               c10::str(with_tail(batch, {layers, hidden}))));
    }
    at::Tensor per_row = state.reshape({rows, layers, hidden});
    // TorchRL zeroes the given state of the rows that start a trajectory.
    if (is_init.defined()) per_row = per_row.masked_fill(is_init.reshape({rows, 1, 1}).to(at::kBool), 0);
    state = per_row.transpose(0, 1).contiguous();
  }
  std::vector<at::Tensor> next = step(input.reshape({rows, 1, options_.input_size()}), states);
  TensorDict result = tensordict_out ? *tensordict_out : td;
  result.set(out[0], next[0].reshape(with_tail(batch, {hidden})));
  for (int s = 0; s < states_; ++s) {
    result.set(out[1 + s], next[1 + s].transpose(0, 1).reshape(with_tail(batch, {layers, hidden})));
  }
  return result;
}

std::vector<std::string> RecurrentModuleImpl::repr_fields() const {
  return {absl::StrCat("input_size=", options_.input_size(), ", hidden_size=", options_.hidden_size(),
                       ", num_layers=", options_.num_layers(), options_.bias() ? "" : ", bias=False")};
}

LSTMModuleImpl::LSTMModuleImpl(RecurrentModuleOptions options)
    : RecurrentModuleImpl("LSTMModule", std::move(options), /*states=*/2) {
  const RecurrentModuleOptions& o = options_;
  lstm_ = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(o.input_size(), o.hidden_size())
                                                      .num_layers(o.num_layers())
                                                      .bias(o.bias())
                                                      .batch_first(true)));
}

std::vector<at::Tensor> LSTMModuleImpl::step(const at::Tensor& input, const std::vector<at::Tensor>& states) {
  auto [output, next] = lstm_->forward(input, std::make_tuple(states[0], states[1]));
  return {output, std::get<0>(next), std::get<1>(next)};
}

GRUModuleImpl::GRUModuleImpl(RecurrentModuleOptions options)
    : RecurrentModuleImpl("GRUModule", std::move(options), /*states=*/1) {
  const RecurrentModuleOptions& o = options_;
  gru_ = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(o.input_size(), o.hidden_size())
                                                   .num_layers(o.num_layers())
                                                   .bias(o.bias())
                                                   .batch_first(true)));
}

std::vector<at::Tensor> GRUModuleImpl::step(const at::Tensor& input, const std::vector<at::Tensor>& states) {
  auto [output, next] = gru_->forward(input, states[0]);
  return {output, next};
}

}  // namespace tdp::nn
