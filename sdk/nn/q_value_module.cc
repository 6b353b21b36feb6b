#include "sdk/nn/q_value_module.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>

#include <limits>
#include <stdexcept>
#include <utility>

namespace tdp::nn {
namespace {

std::vector<NestedKey> default_out_keys(const QValueModuleOptions& options) {
  if (!options.out_keys().empty()) return options.out_keys();
  if (options.support().defined()) return {NestedKey("action"), options.action_value_key()};
  return {NestedKey("action"), options.action_value_key(), NestedKey("chosen_action_value")};
}

std::vector<NestedKey> in_keys_of(const QValueModuleOptions& options) {
  std::vector<NestedKey> keys{options.action_value_key()};
  if (options.action_mask_key()) keys.push_back(*options.action_mask_key());
  return keys;
}

// The lowest finite value of `values`' dtype: torch.finfo(dtype).min.
at::Scalar lowest(const at::Tensor& values) {
  switch (values.scalar_type()) {
    case at::kDouble:
      return std::numeric_limits<double>::lowest();
    case at::kFloat:
      return std::numeric_limits<float>::lowest();
    case at::kHalf:
      return std::numeric_limits<c10::Half>::lowest();
    case at::kBFloat16:
      return std::numeric_limits<c10::BFloat16>::lowest();
    default:
      throw std::invalid_argument(absl::StrCat("QValueModule: action values of dtype ",
                                               c10::toString(values.scalar_type()),
                                               " cannot be masked (expected a floating-point dtype)"));
  }
}

// TorchRL's QValueModule._one_hot: every maximal action set, as int64.
at::Tensor one_hot_argmax(const at::Tensor& values) {
  return (values == std::get<0>(values.max(-1, /*keepdim=*/true))).to(at::kLong);
}

}  // namespace

ActionSpace action_space_from_str(const std::string& name) {
  if (name == "one_hot" || name == "one-hot") return ActionSpace::kOneHot;
  if (name == "categorical") return ActionSpace::kCategorical;
  throw std::invalid_argument(absl::StrCat("unknown action space \"", name, "\" (expected one_hot or categorical)"));
}

std::string to_string(ActionSpace space) { return space == ActionSpace::kOneHot ? "one_hot" : "categorical"; }

QValueModuleImpl::QValueModuleImpl(QValueModuleOptions options)
    : TensorDictModuleBase(options.support().defined() ? "DistributionalQValueModule" : "QValueModule",
                           in_keys_of(options), default_out_keys(options)),
      options_(std::move(options)) {
  const size_t expected = distributional() ? 2 : 3;
  if (out_keys().size() != expected) {
    throw std::invalid_argument(absl::StrCat(type_name(), ": expected ", expected, " out_keys (action, action_value",
                                             distributional() ? "" : ", chosen_action_value", "), got ",
                                             out_keys().size()));
  }
  if (out_keys()[1] != options_.action_value_key()) {
    throw std::invalid_argument(absl::StrCat(type_name(), ": the second out_key must be the action-value key ",
                                             options_.action_value_key().to_string(), ", got ",
                                             out_keys()[1].to_string()));
  }
  if (distributional() && options_.support().dim() != 1) {
    throw std::invalid_argument(absl::StrCat(type_name(), ": the support must be one-dimensional [n_atoms], got ",
                                             shape_to_string(options_.support().sizes())));
  }
  options_.out_keys(out_keys());
}

TensorDict QValueModuleImpl::forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  at::Tensor values = tensordict.get(options_.action_value_key(), at::Tensor());
  if (!values.defined()) {
    throw KeyError(
        absl::StrCat(type_name(), ": action value key ", options_.action_value_key().to_string(), " not found"));
  }
  if (distributional()) {
    if (values.dim() < 2 || values.size(-2) != options_.support().size(0)) {
      throw std::invalid_argument(
          absl::StrCat(type_name(), ": action values of shape ", shape_to_string(values.sizes()), " for a support of ",
                       options_.support().size(0), " atoms (expected [..., n_atoms, n_actions])"));
    }
    values = values.log_softmax(-2);
  }
  if (const auto& mask_key = options_.action_mask_key()) {
    const at::Tensor mask = tensordict.get(*mask_key, at::Tensor());
    if (!mask.defined()) {
      throw KeyError(absl::StrCat(type_name(), ": action mask key ", mask_key->to_string(), " not found"));
    }
    values = at::where(mask, values, lowest(values));
  }
  // Distributional: the expected value of each action under its atoms' probabilities.
  const at::Tensor q =
      distributional() ? (values.exp() * options_.support().to(values.device()).unsqueeze(-1)).sum(-2) : values;
  at::Tensor action;
  if (options_.action_space() == ActionSpace::kOneHot) {
    action = one_hot_argmax(q);
  } else {
    action = q.argmax(-1);
  }
  TensorDict out = tensordict_out ? *tensordict_out : tensordict;
  out.set(out_keys()[0], action);
  out.set(out_keys()[1], values);
  if (!distributional()) {
    out.set(out_keys()[2], options_.action_space() == ActionSpace::kOneHot ? (action * values).sum(-1, /*keepdim=*/true)
                                                                           : values.gather(-1, action.unsqueeze(-1)));
  }
  return out;
}

std::vector<std::string> QValueModuleImpl::repr_fields() const {
  return {absl::StrCat("action_space=", nn::to_string(options_.action_space()))};
}

}  // namespace tdp::nn
