// Parameters as a TensorDict: a module's parameters and buffers as entries nested by submodule
// path (tensordict's `TensorDict.from_module`), several same-shaped modules stacked
// (`from_modules`), a scope that runs a module with other parameters (`params.to_module(module)`),
// a module that registers a TensorDict's entries as its parameters (`TensorDictParams`), and the
// target-network update (TorchRL's SoftUpdate rule).
//
//   tdp::TensorDict source = tdp::nn::from_module(*critic);
//   tdp::TensorDict target = tdp::nn::from_module(*target_critic);
//   tdp::nn::soft_update(target, source, /*tau=*/0.005);   // target = (1 - tau) target + tau source
//   {
//     tdp::nn::ToModule swapped(*critic, target);           // critic runs with the target's values
//     value = critic->forward(obs);
//   }                                                       // its own values are back
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <vector>

#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

// Parameters, then buffers (undefined ones skipped), of `module` and its descendants, keyed by
// their dotted LibTorch names split into nested keys. The entries share storage with the module.
TensorDict from_module(const torch::nn::Module& module);

// The from_module() of each module, stacked on a new leading dim (batch_size [modules.size()]):
// copies, not views. Throws std::invalid_argument for no modules, or naming the entry that a
// module lacks or holds with another shape.
TensorDict from_modules(const std::vector<std::shared_ptr<torch::nn::Module>>& modules);

// While alive, `module`'s parameters and buffers named in `params` (from_module's keys) hold
// `params`' tensors' data; the destructor restores the module's own, exceptions included. The
// swap replaces tensor data (set_data), so no gradient flows from the module's outputs to
// `params`. Throws std::invalid_argument, before changing anything, naming an entry the module
// lacks or holds with another shape or dtype. Entries the module has and `params` lacks are kept.
class ToModule {
 public:
  ToModule(torch::nn::Module& module, const TensorDict& params);
  // The same swap for tensors already paired with their values (a module's parameters and
  // views of stacked copies, as EnsembleModule's loop does per call without building TensorDicts).
  ToModule(std::vector<at::Tensor> targets, const std::vector<at::Tensor>& values);
  ~ToModule();
  ToModule(const ToModule&) = delete;
  ToModule& operator=(const ToModule&) = delete;

 private:
  void swap_in(std::vector<at::Tensor> targets, const std::vector<at::Tensor>& values);

  std::vector<at::Tensor> targets_;
  std::vector<at::Tensor> originals_;
};

// A module that registers a TensorDict's leaves at their nested keys (("0", "weight") ->
// "0.weight"), so parameters(), buffers(), to(), optimizers and named_parameters() see them;
// data() is the TensorDict, whose tensors are the registered ones. tensordict's
// TensorDictParams: by default every floating-point leaf becomes a parameter (requiring grad) and
// the others buffers; with no_convert, leaves that require grad become parameters and the others
// buffers (a from_module() result keeps its parameters and buffers apart this way).
class TensorDictParamsImpl : public torch::nn::Module {
 public:
  explicit TensorDictParamsImpl(TensorDict params, bool no_convert = false);
  const TensorDict& data() const { return data_; }

 private:
  TensorDict data_;
};
TORCH_MODULE(TensorDictParams);

// target <- target + tau * (source - target), in place and without autograd, for every entry of
// `target` (floating-point entries only; integer buffers such as counters are left as they are).
// Throws std::invalid_argument for tau outside [0, 1], or naming a key of `target` that `source`
// lacks or holds with another shape.
void soft_update(TensorDict& target, const TensorDict& source, double tau);

}  // namespace tdp::nn
