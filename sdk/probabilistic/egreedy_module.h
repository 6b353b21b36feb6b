// EGreedyModule: epsilon-greedy exploration, TorchRL's EGreedyModule. Under the RANDOM
// interaction type (and outside any interaction-type scope, as TorchRL explores when
// exploration_type() is None) each row's action is replaced, with probability eps, by a random
// action drawn uniformly from its TensorSpec (TensorSpec::rand) (only among the actions an action mask allows, when
// the module reads one); under MODE, MEAN, MEDIAN or DETERMINISTIC the action passes through.
// Draws come from the GeneratorGuard's generator (an Actor's seeded stream), else LibTorch's
// default one. eps is a constant: TorchRL's annealed buffer frozen at its current value.
//
//   tdp::nn::TensorSpec spec = tdp::nn::TensorSpec::one_hot(4);          // TorchRL's OneHot(4)
//   tdp::nn::EGreedyModule explore(tdp::nn::EGreedyModuleOptions(spec).eps(0.1));
//   tdp::nn::TensorDictSequential policy(q_actor, explore);
//   tdp::nn::InteractionTypeGuard random(tdp::nn::InteractionType::kRandom);
//   policy(td);                     // "action": greedy, or a random one-hot in ~10% of the rows
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sdk/nn/tensor_spec.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

struct EGreedyModuleOptions {
  explicit EGreedyModuleOptions(TensorSpec spec) : spec_(std::move(spec)) {}
  TORCH_ARG(TensorSpec, spec);
  TORCH_ARG(double, eps) = 1.0;
  TORCH_ARG(NestedKey, action_key) = NestedKey("action");

 public:
  // Written out: TORCH_ARG's std::optional setter would not take a "key" argument.
  EGreedyModuleOptions& action_mask_key(NestedKey key) {
    action_mask_key_ = std::move(key);
    return *this;
  }
  const std::optional<NestedKey>& action_mask_key() const { return action_mask_key_; }

 private:
  std::optional<NestedKey> action_mask_key_;
};

class EGreedyModuleImpl : public TensorDictModuleBase {
 public:
  explicit EGreedyModuleImpl(EGreedyModuleOptions options);

  const EGreedyModuleOptions& options() const { return options_; }

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  EGreedyModuleOptions options_;
};

TORCH_MODULE(EGreedyModule);

}  // namespace tdp::nn
