// dispatch: calls a tensordict module with tensors instead of a TensorDict, and returns the
// tensors it wrote. Python's tensordict.nn.dispatch, which lets `module(a=x)` stand for
// `module(TensorDict(a=x))["b"]`.
//
//   tdp::nn::TensorDictModule mod(torch::nn::Linear(1, 1),
//       tdp::nn::TensorDictModuleOptions({{"a", "c"}}, {"b"}));   // reads ('a', 'c')
//   at::Tensor b = tdp::nn::dispatch(mod, {}, {{"a_c", x}})[0];   // nested key by name "a_c"
//   at::Tensor b2 = tdp::nn::dispatch(mod, {x})[0];               // or by position
//   auto outs = tdp::nn::dispatch(mod, {x}, {}, tdp::nn::DispatchOptions().separator("."));
//
// Positional tensors fill the source keys (the module's in_keys by default) in order; the
// remaining source keys are taken from the named tensors, whose names are the keys' parts
// joined by `separator`. The result holds the tensors at the dest keys (the module's
// out_keys() by default, so a select_out_keys() selection applies), in order.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/nn/wrap_module.h"

namespace tdp::nn {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct DispatchOptions {
  // Joins the parts of a nested key into an argument name: ('a', 'c') -> "a_c".
  TORCH_ARG(std::string, separator) = "_";
  // Keys the tensors go to; default: the module's in_keys(). Required for a plain function.
  TORCH_ARG(std::optional<std::vector<NestedKey>>, source);
  // Keys read back from the result; default: the module's out_keys(). Required for a function.
  TORCH_ARG(std::optional<std::vector<NestedKey>>, dest);
  // false: the TensorDict built from the tensors has batch_size [] (what TensorDictModule
  // uses); true: the longest leading shape that all tensors share.
  TORCH_ARG(bool, auto_batch_size) = false;
};

std::vector<at::Tensor> dispatch(TensorDictModuleBase& module, std::vector<at::Tensor> args,
                                 NamedTensors kwargs = {}, DispatchOptions options = {});

template <typename M>
std::vector<at::Tensor> dispatch(const torch::nn::ModuleHolder<M>& module,
                                 std::vector<at::Tensor> args, NamedTensors kwargs = {},
                                 DispatchOptions options = {}) {
  return dispatch(static_cast<TensorDictModuleBase&>(*module.ptr()), std::move(args),
                  std::move(kwargs), std::move(options));
}

// A function of a TensorDict; options.source() and options.dest() must be set.
std::vector<at::Tensor> dispatch(const TensorDictFunction& function, std::vector<at::Tensor> args,
                                 NamedTensors kwargs, DispatchOptions options);

}  // namespace tdp::nn
