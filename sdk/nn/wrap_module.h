// WrapModule: a tensordict module made from a function that takes and returns a whole
// TensorDict, for steps that need every entry (reshaping the batch, renaming keys, ...).
// Python's tensordict.nn.WrapModule.
//
//   tdp::nn::WrapModule flatten([](tdp::TensorDict td) { return td.reshape({-1}); });
//   tdp::nn::TensorDictSequential seq({scale, flatten});   // flatten after the other module
//   tdp::nn::WrapModule reward(
//       [](tdp::TensorDict td) { return td.set("reward", -td.get("cost")); },
//       tdp::nn::WrapModuleOptions().in_keys({"cost"}).out_keys({"reward"}));
//
// in_keys and out_keys are not checked; they tell a TensorDictSequential what the function
// reads and writes. With inplace, a function that returns another TensorDict has its result
// written into the input (update), and the input is returned.
#pragma once

#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <optional>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"

namespace tdp::nn {

using TensorDictFunction = std::function<TensorDict(TensorDict)>;

struct WrapModuleOptions {
  TORCH_ARG(bool, inplace) = false;
  TORCH_ARG(std::vector<NestedKey>, in_keys);
  TORCH_ARG(std::vector<NestedKey>, out_keys);
};

class WrapModuleImpl : public TensorDictModuleBase {
 public:
  explicit WrapModuleImpl(TensorDictFunction function, WrapModuleOptions options = {});

  const WrapModuleOptions& options() const { return options_; }

 protected:
  TensorDict forward_impl(TensorDict tensordict,
                          const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  TensorDictFunction function_;
  WrapModuleOptions options_;
};

TORCH_MODULE(WrapModule);

}  // namespace tdp::nn
