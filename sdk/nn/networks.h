// Networks that policy specs name: an MLP, recurrent cells that read and write their state as
// tensors (so a TensorDictModule can keep it in TensorDict entries), an elementwise mapping,
// and the two parameter-free shapes an autoregressive head needs to read a sampled action
// (OneHot: an index to a float one-hot; Cat: inputs joined on the last dim). They are ordinary LibTorch modules; the spec loader builds them and the exporter
// recognizes them.
//
//   tdp::nn::Mlp mlp(tdp::nn::MlpOptions(17, {64, 64}, 12).activation("tanh"));
//   at::Tensor out = mlp(at::randn({256, 17}));                  // [256, 12]
//   tdp::nn::GruCell gru(tdp::nn::GruCellOptions(4, 8));
//   at::Tensor h = gru(x, at::Tensor());                          // an undefined state starts at 0
//   tdp::nn::TensorDictModule rnn(gru, tdp::nn::TensorDictModuleOptions({"obs", "hidden"}, {"hidden"}));
//   at::Tensor x = tdp::nn::Cat()->forward({obs, tdp::nn::OneHot(2)(action_type)});   // [B, 4 + 2]
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "sdk/nn/mappings.h"

namespace tdp::nn {

// The activation names an Mlp accepts, for validation and error messages.
const std::vector<std::string>& activation_names();

struct MlpOptions {
  MlpOptions(int64_t in_features, std::vector<int64_t> hidden_sizes, int64_t out_features)
      : in_features_(in_features), hidden_sizes_(std::move(hidden_sizes)), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(std::vector<int64_t>, hidden_sizes);
  TORCH_ARG(int64_t, out_features);
  // One of activation_names(); applied after every hidden Linear (and the last, if asked).
  TORCH_ARG(std::string, activation) = "tanh";
  // A LayerNorm after each hidden Linear, before its activation.
  TORCH_ARG(bool, layer_norm) = false;
  TORCH_ARG(bool, activate_last_layer) = false;
};

class MlpImpl : public torch::nn::Cloneable<MlpImpl> {
 public:
  // Throws std::invalid_argument for a non-positive size or an unknown activation.
  explicit MlpImpl(MlpOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& input);
  const MlpOptions& options() const { return options_; }

 private:
  template <typename Layer>
  void add_layer(Layer layer);

  MlpOptions options_;
  // The layers, registered (parameter names, printing, cloning) as a Sequential "layers".
  torch::nn::Sequential layers_{nullptr};
  // The same layers' forwards, called in order. LibTorch 1.13's Sequential::forward goes
  // through AnyModule, which builds a demangled error-message string on every layer call:
  // a few microseconds per MLP call at batch 1, more than some of its matmuls.
  std::vector<std::function<at::Tensor(const at::Tensor&)>> steps_;
};
TORCH_MODULE(Mlp);

struct GruCellOptions {
  GruCellOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
};

// torch::nn::GRUCell over any number of leading batch dims; an undefined hidden state is zeros.
class GruCellImpl : public torch::nn::Cloneable<GruCellImpl> {
 public:
  explicit GruCellImpl(GruCellOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& input, const at::Tensor& hidden);
  const GruCellOptions& options() const { return options_; }

 private:
  GruCellOptions options_;
  torch::nn::GRUCell cell_{nullptr};
};
TORCH_MODULE(GruCell);

using LstmCellOptions = GruCellOptions;

// torch::nn::LSTMCell reading (input, h, c) and returning (h, c); undefined states are zeros.
class LstmCellImpl : public torch::nn::Cloneable<LstmCellImpl> {
 public:
  explicit LstmCellImpl(LstmCellOptions options);
  void reset() override;
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& input, const at::Tensor& h, const at::Tensor& c);
  const LstmCellOptions& options() const { return options_; }

 private:
  LstmCellOptions options_;
  torch::nn::LSTMCell cell_{nullptr};
};
TORCH_MODULE(LstmCell);

// One of tdp::nn::mappings() as a module, remembering its name so a spec can name it again.
class MappingModuleImpl : public torch::nn::Cloneable<MappingModuleImpl> {
 public:
  // Throws std::invalid_argument for an unknown name (listing the known ones).
  explicit MappingModuleImpl(std::string name);
  void reset() override {}
  at::Tensor forward(const at::Tensor& input) { return mapping_(input); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  nn::Mapping mapping_;
};
TORCH_MODULE(MappingModule);

// torch.nn.functional.one_hot(index, num_classes) as float32: an integer tensor [...] becomes
// [..., num_classes], so a network can read a sampled discrete action. Throws
// std::invalid_argument for num_classes <= 0 and, on forward, for a floating or complex input
// or an index outside [0, num_classes) (torch's one_hot rejects both too).
class OneHotImpl : public torch::nn::Cloneable<OneHotImpl> {
 public:
  explicit OneHotImpl(int64_t num_classes);
  void reset() override {}
  at::Tensor forward(const at::Tensor& index);
  int64_t num_classes() const { return num_classes_; }

 private:
  int64_t num_classes_;
};
TORCH_MODULE(OneHot);

// torch.cat(inputs, dim=-1): joins its inputs on the last dim (same leading dims; dtypes
// promoted as torch.cat does). A TensorDictModule wraps it through a function taking the
// TensorList of its in_keys (the spec's `cat` network does).
class CatImpl : public torch::nn::Cloneable<CatImpl> {
 public:
  CatImpl() = default;
  void reset() override {}
  // Throws std::invalid_argument for no input.
  at::Tensor forward(const std::vector<at::Tensor>& inputs);
};
TORCH_MODULE(Cat);

}  // namespace tdp::nn
