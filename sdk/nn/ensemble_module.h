// EnsembleModule: `num_copies` independently initialized copies of a tensordict module, run as
// one module, tensordict's EnsembleModule. Outputs and the batch size gain a leading
// `num_copies` dim: an ensemble of critics gives every critic's value in one call.
//
//   tdp::nn::EnsembleModule critics(critic, tdp::nn::EnsembleModuleOptions(10));
//   tdp::TensorDict out = critics(td);            // td: batch [B]; out: batch [10, B]
//   at::Tensor values = out.get("state_value");   // [10, B, 1]
//
// expand_input (default true): every copy reads the same input, as tensordict's vmap with
// in_dims (None, 0); false: the input already has the leading [num_copies] dim (the output of
// an earlier ensemble) and copy i reads slice i.
//
// The copies' parameters and buffers are stacked on a leading [num_copies] dim and registered
// under the child "params" (a TensorDictParams), at the wrapped module's own names
// ("params.module.layers.0.weight"), so parameters(), to(), optimizers and specs see them; the wrapped module stays registered as
// "module" (as in tensordict) and serves as the template each copy runs through. params()
// returns them as a TensorDict nested by submodule path. reset_parameters() (and so a parent's
// reset_parameters_recursive()) re-initializes every copy independently.
//
// Two ways to run the copies, same numbers (tested):
// - batched: when the module is built of Linear and Mlp modules (in TensorDictModules, possibly
//   in TensorDictSequentials) and modules without parameters or buffers, each Linear runs all
//   copies at once as one batched matmul (baddbmm) over the stacked weights; differentiable.
// - loop: any other module runs once per copy, with the copy's parameters swapped into the
//   template for the call (ToModule, tensordict's to_module). The swap replaces tensor data, so no gradient
//   reaches the stacked parameters: the loop path refuses to run with grad mode on while they
//   require grad (use the batched path, or torch::NoGradGuard / c10::InferenceMode).
// options().path() chooses: kAuto takes the batched path when the module allows it and
// num_copies x rows is at most batched_max_elements (beyond it batched math loses on the CPU,
// tests/benchmarks/ensemble_benchmark.cc), kBatched requires it, kLoop never takes it.
//
// Thread safety: the loop path swaps parameters into the shared template, so loop calls on one
// ensemble are serialized; batched calls run concurrently.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/nn/tensordict_params.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

enum class EnsemblePath { kAuto, kBatched, kLoop };

struct EnsembleModuleOptions {
  explicit EnsembleModuleOptions(int64_t num_copies) : num_copies_(num_copies) {}
  TORCH_ARG(int64_t, num_copies);
  TORCH_ARG(bool, expand_input) = true;
  TORCH_ARG(EnsemblePath, path) = EnsemblePath::kAuto;
  // Under kAuto, the largest num_copies x rows the batched path takes.
  TORCH_ARG(int64_t, batched_max_elements) = 2048;
};

class EnsembleModuleImpl : public TensorDictModuleBase, public ParameterResettable {
 public:
  // Throws std::invalid_argument for num_copies < 1, a null module, or kBatched on a module the
  // batched path cannot run (naming the submodule and why).
  EnsembleModuleImpl(TensorDictModuleRef module, EnsembleModuleOptions options);

  // Re-initializes every copy independently (the template's layers' own initialization).
  void reset_parameters() override;

  // The stacked parameters and buffers (batch_size [num_copies]), nested by the wrapped module's
  // submodule path; the tensors are the registered ones (writing them in place changes the
  // ensemble); params()[i] are copy i's, as from_module(*module()) names them.
  TensorDict params() const;
  // Empty when the batched path can run this module; else why not.
  const std::string& unbatchable_reason() const { return unbatchable_reason_; }
  // Whether a call with this many rows per copy takes the batched path.
  bool uses_batched(int64_t rows) const;
  const EnsembleModuleOptions& options() const { return options_; }
  const std::shared_ptr<TensorDictModuleBase>& module() const { return module_; }

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  struct Step;  // one step of the batched plan

  void stack_copies();
  std::string plan_batched();
  TensorDict forward_batched(const TensorDict& input) const;
  TensorDict forward_loop(const TensorDict& input);
  // The stacked tensor that holds every copy of the template's `tensor` (a parameter or buffer).
  const at::Tensor& stacked(const at::Tensor& tensor) const;

  std::shared_ptr<TensorDictModuleBase> module_;
  EnsembleModuleOptions options_;
  TensorDictParams params_{nullptr};
  // The template's parameters and buffers, and their stacked counterparts, in the same order.
  std::vector<at::Tensor> template_tensors_;
  std::vector<at::Tensor> stacked_tensors_;
  std::vector<NestedKey> names_;
  std::vector<std::shared_ptr<Step>> steps_;
  std::string unbatchable_reason_;
  std::mutex loop_mutex_;
};

TORCH_MODULE(EnsembleModule);

}  // namespace tdp::nn
