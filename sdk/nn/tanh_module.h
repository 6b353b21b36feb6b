// TanhModule: maps each in_key's value onto a bounded box, low + (high - low) * (tanh(x) + 1) / 2,
// and writes it at the matching out_key: TorchRL's torchrl.modules.TanhModule, the last step of
// TD3's and DDPG's deterministic actors.
//
//   tdp::nn::TanhModule squash(tdp::nn::TanhModuleOptions({"param"}, {"action"})
//                                  .bounds({{torch::full({6}, -2.0), torch::full({6}, 2.0)}}));
//   tdp::TensorDict out = squash(td);   // "action" = -2 + 4 * (tanh(param) + 1) / 2
//
// As in TorchRL: without bounds a key is mapped onto [-1, 1] (low -1, high 1, still through the
// affine map); with clamp, tanh is first clamped into [-1 + eps, 1 - eps], eps the resolution of
// the value's dtype (torch.finfo(dtype).resolution); the bounds keep their own dtype, so the
// result's dtype is the promotion of the value's and the bounds'.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"

namespace tdp::nn {

// {low, high}.
using TanhBounds = std::pair<at::Tensor, at::Tensor>;

struct TanhModuleOptions {
  // out_keys default to in_keys.
  TanhModuleOptions(std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys = {});

  TORCH_ARG(std::vector<NestedKey>, in_keys);
  TORCH_ARG(std::vector<NestedKey>, out_keys);
  // {low, high} per out_key, each broadcasting to its value; empty: -1 and 1 for every key.
  TORCH_ARG(std::vector<TanhBounds>, bounds);
  TORCH_ARG(bool, clamp) = false;
};

class TanhModuleImpl : public TensorDictModuleBase {
 public:
  // Throws std::invalid_argument when in_keys and out_keys differ in length, bounds are neither
  // empty nor one per key, or some high < low.
  explicit TanhModuleImpl(TanhModuleOptions options);

  const TanhModuleOptions& options() const { return options_; }

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  TanhModuleOptions options_;
};

TORCH_MODULE(TanhModule);

}  // namespace tdp::nn
