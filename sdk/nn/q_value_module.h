// QValueModule: turns action values into the greedy action, TorchRL's QValueModule (and, with a
// support, DistributionalQValueModule). It reads the action values [..., n_actions] (and
// optionally a boolean action mask of the same shape), and writes the action (a one-hot int64
// vector, or an int64 index for the categorical action space), the action values (masked-out
// actions set to the dtype's lowest value, as TorchRL writes them back) and the chosen action's
// value [..., 1].
//
//   tdp::nn::QValueModule greedy(tdp::nn::QValueModuleOptions().action_space(tdp::nn::ActionSpace::kCategorical));
//   td.set("action_value", q);                      // [B, 4]
//   greedy(td);                                     // "action" [B] int64, "chosen_action_value" [B, 1]
//
// Distributional (a support of n_atoms values): the action values are logits
// [..., n_atoms, n_actions]; the module writes their log-softmax over the atoms (what TorchRL's
// DistributionalQValueActor writes: its DistributionalDQNnet's log-softmax, then its module),
// takes each action's Q-value as the support-weighted sum of the atoms' probabilities, and writes
// the action and the log-softmax values only (out_keys [action, action_value]), as TorchRL does.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

// How the greedy action is written: TorchRL's "one_hot" (int64, every maximal action set when
// tied) or "categorical" (the int64 argmax).
enum class ActionSpace { kOneHot, kCategorical };
// "one_hot" or "categorical" (TorchRL's names; "one-hot" too). Throws std::invalid_argument for
// any other name, naming the supported ones.
ActionSpace action_space_from_str(const std::string& name);
std::string to_string(ActionSpace space);

struct QValueModuleOptions {
  TORCH_ARG(ActionSpace, action_space) = ActionSpace::kOneHot;
  TORCH_ARG(NestedKey, action_value_key) = NestedKey("action_value");
  // [action, action_value, chosen_action_value] (distributional: [action, action_value]);
  // empty: TorchRL's defaults with action_value_key in the middle.
  TORCH_ARG(std::vector<NestedKey>, out_keys);
  // Distributional: the atoms' values [n_atoms]. Undefined: plain Q-values.
  TORCH_ARG(at::Tensor, support);

 public:
  // A boolean mask [..., n_actions] (true: allowed); none by default. Written out: TORCH_ARG's
  // std::optional setter would not take a "key" argument.
  QValueModuleOptions& action_mask_key(NestedKey key) {
    action_mask_key_ = std::move(key);
    return *this;
  }
  const std::optional<NestedKey>& action_mask_key() const { return action_mask_key_; }

 private:
  std::optional<NestedKey> action_mask_key_;
};

class QValueModuleImpl : public TensorDictModuleBase {
 public:
  explicit QValueModuleImpl(QValueModuleOptions options = {});

  const QValueModuleOptions& options() const { return options_; }
  bool distributional() const { return options_.support().defined(); }

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  QValueModuleOptions options_;
};

TORCH_MODULE(QValueModule);

}  // namespace tdp::nn
