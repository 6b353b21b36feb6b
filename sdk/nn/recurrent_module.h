// LSTMModule and GRUModule: a multi-layer torch::nn::LSTM / GRU stepping once
// per call, with TorchRL's key convention (torchrl.modules.LSTMModule /
// GRUModule outside recurrent mode, the form a policy acts in). It reads
// [input, state_h, (state_c,) is_init] and writes [output, next state_h, (next
// state_c)]; TorchRL's default keys are in  [<in_key>, "recurrent_state_h",
// "recurrent_state_c", "is_init"] and out [<out_key>, ("next",
// "recurrent_state_h"), ("next", "recurrent_state_c")], so that step_mdp
// carries the next state to the next step's input.
//
//   tdp::nn::LSTMModule lstm(tdp::nn::RecurrentModuleOptions(8, 32)
//                                .num_layers(2)
//                                .in_keys({"embed", "recurrent_state_h",
//                                "recurrent_state_c", "is_init"})
//                                .out_keys({"intermediate", {"next",
//                                "recurrent_state_h"}, {"next",
//                                "recurrent_state_c"}}));
//   tdp::TensorDict out = lstm(td);                         // td: "embed" [B,
//   8], "is_init" [B, 1] at::Tensor h = out.get({"next", "recurrent_state_h"});
//   // [B, 2, 32]: [..., num_layers, hidden_size]
//
// Per call: the input is [*batch, input_size]; the states are [*batch,
// num_layers, hidden_size] (a missing state is zeros, as TorchRL's; an LSTM
// given one of h and c but not the other is an error, as there); rows whose
// is_init is true start from zeros (a missing is_init is false: no row starts
// over); the output is the last layer's [*batch, hidden_size]. The network is
// registered as "lstm" / "gru" with torch's parameter names (lstm.weight_ih_l0,
// lstm.bias_hh_l1, ...), the names TorchRL's modules give theirs.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

struct RecurrentModuleOptions {
  RecurrentModuleOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(int64_t, num_layers) = 1;
  TORCH_ARG(bool, bias) = true;
  // LSTM: [input, h, c, is_init]; GRU: [input, h, is_init].
  TORCH_ARG(std::vector<NestedKey>, in_keys);
  // LSTM: [output, next h, next c]; GRU: [output, next h].
  TORCH_ARG(std::vector<NestedKey>, out_keys);
};

// What LSTMModule and GRUModule share: the keys, the reshaping and the is_init
// reset.
class RecurrentModuleImpl : public TensorDictModuleBase {
 public:
  const RecurrentModuleOptions& options() const { return options_; }
  // The number of state entries: 2 for an LSTM (h, c), 1 for a GRU.
  int states() const { return states_; }
  // The torch network ("lstm" or "gru"): the weights a fused plan reads.
  virtual const torch::nn::Module& network() const = 0;

 protected:
  // Throws std::invalid_argument for sizes below 1 or key counts other than the
  // kind's.
  RecurrentModuleImpl(std::string name, RecurrentModuleOptions options, int states);
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;
  // One step of the network: input [N, 1, input_size], states [num_layers, N,
  // hidden_size] each; returns the output [N, 1, hidden_size] then the next
  // states.
  virtual std::vector<at::Tensor> step(const at::Tensor& input, const std::vector<at::Tensor>& states) = 0;

  RecurrentModuleOptions options_;

 private:
  int states_;
};

class LSTMModuleImpl : public RecurrentModuleImpl {
 public:
  explicit LSTMModuleImpl(RecurrentModuleOptions options);
  const torch::nn::Module& network() const override { return *lstm_; }

 protected:
  std::vector<at::Tensor> step(const at::Tensor& input, const std::vector<at::Tensor>& states) override;

 private:
  torch::nn::LSTM lstm_{nullptr};
};
TORCH_MODULE(LSTMModule);

class GRUModuleImpl : public RecurrentModuleImpl {
 public:
  explicit GRUModuleImpl(RecurrentModuleOptions options);
  const torch::nn::Module& network() const override { return *gru_; }

 protected:
  std::vector<at::Tensor> step(const at::Tensor& input, const std::vector<at::Tensor>& states) override;

 private:
  torch::nn::GRU gru_{nullptr};
};
TORCH_MODULE(GRUModule);

}  // namespace tdp::nn
