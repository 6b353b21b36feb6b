#include "sdk/probabilistic/egreedy_module.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>

#include <stdexcept>

#include "sdk/probabilistic/generator_scope.h"
#include "sdk/probabilistic/interaction_type.h"

namespace tdp::nn {
namespace {

std::vector<NestedKey> in_keys_of(const EGreedyModuleOptions& options) {
  std::vector<NestedKey> keys{options.action_key()};
  if (options.action_mask_key()) keys.push_back(*options.action_mask_key());
  return keys;
}

}  // namespace

EGreedyModuleImpl::EGreedyModuleImpl(EGreedyModuleOptions options)
    : TensorDictModuleBase("EGreedyModule", in_keys_of(options), {options.action_key()}), options_(std::move(options)) {
  const TensorSpec& spec = options_.spec();
  if (spec.kind() != TensorSpec::Kind::kBounded && spec.n() < 1) {
    throw std::invalid_argument(absl::StrCat("EGreedyModule: the action spec has ", spec.n(), " actions"));
  }
  if (spec.kind() == TensorSpec::Kind::kBounded) {
    if (!at::isFloatingType(spec.dtype())) {
      throw std::invalid_argument(absl::StrCat("EGreedyModule: a bounded action spec of dtype ",
                                               c10::toString(spec.dtype()), " (expected a floating-point dtype)"));
    }
    if (options_.action_mask_key()) {
      throw std::invalid_argument("EGreedyModule: an action mask needs a one_hot or categorical action spec");
    }
  }
}

TensorDict EGreedyModuleImpl::forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  TensorDict out = tensordict_out ? *tensordict_out : tensordict;
  const std::optional<InteractionType> type = interaction_type();
  if (type.has_value() && *type != InteractionType::kRandom) {
    if (tensordict_out) out.set(options_.action_key(), tensordict.get(options_.action_key()));
    return out;
  }
  const at::Tensor action = tensordict.get(options_.action_key());
  at::Tensor mask;
  if (const auto& mask_key = options_.action_mask_key()) {
    mask = tensordict.get(*mask_key, at::Tensor());
    if (!mask.defined())
      throw KeyError(absl::StrCat("EGreedyModule: action mask key ", mask_key->to_string(), " not found"));
  }
  const std::optional<at::Generator> generator = scoped_generator();
  // One draw per row of the TensorDict, compared in float32 with eps (TorchRL's float32 buffer).
  at::Tensor explore = at::rand(tensordict.batch_size(), generator, action.options().dtype(at::kFloat)) <
                       static_cast<float>(options_.eps());
  while (explore.dim() < action.dim()) explore = explore.unsqueeze(-1);
  const at::Tensor random = options_.spec().rand(action, mask, generator);
  out.set(options_.action_key(), at::where(explore.expand_as(action), random, action));
  return out;
}

std::vector<std::string> EGreedyModuleImpl::repr_fields() const { return {absl::StrCat("eps=", options_.eps())}; }

}  // namespace tdp::nn
