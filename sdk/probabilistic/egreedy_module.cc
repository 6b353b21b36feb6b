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

// An index in [0, n) per entry of `shape`: uniform (torch.randint), or among the allowed
// entries of `mask` [*shape, n] (torch.multinomial over the mask as weights), as TorchRL's
// Categorical.rand and OneHot.rand draw.
at::Tensor draw_index(int64_t n, c10::IntArrayRef shape, const at::Tensor& mask,
                      const std::optional<at::Generator>& generator, const at::TensorOptions& options) {
  if (!mask.defined()) return at::randint(n, shape, generator, options.dtype(at::kLong));
  std::vector<int64_t> full(shape.begin(), shape.end());
  full.push_back(n);
  const at::Tensor expanded = mask.expand(full);
  const at::Tensor flat = expanded.dim() > 2 ? expanded.flatten(0, -2) : expanded;
  return at::multinomial(flat.to(at::kFloat), 1, /*replacement=*/false, generator).reshape(shape);
}

}  // namespace

at::Tensor ActionSpec::rand(const at::Tensor& action, const at::Tensor& mask,
                            const std::optional<at::Generator>& generator) const {
  switch (kind) {
    case Kind::kCategorical:
      return draw_index(n, action.sizes(), mask, generator, action.options()).to(dtype);
    case Kind::kOneHot:
      return at::one_hot(draw_index(n, action.sizes().slice(0, action.dim() - 1), mask, generator, action.options()), n)
          .to(dtype);
    case Kind::kBounded: {
      // TorchRL's Bounded.rand for floating dtypes: low + (high - low) * U[0, 1), then values
      // rounded past a bound put back on it.
      const at::Tensor a = low.to(action.device(), dtype);
      const at::Tensor b = high.to(action.device(), dtype);
      at::Tensor out = at::empty(action.sizes(), action.options().dtype(dtype)).uniform_(0, 1, generator) * (b - a) + a;
      out = at::where(out > b, b.expand_as(out), out);
      return at::where(out < a, a.expand_as(out), out);
    }
  }
  throw std::logic_error("ActionSpec: unknown kind");
}

EGreedyModuleImpl::EGreedyModuleImpl(EGreedyModuleOptions options)
    : TensorDictModuleBase("EGreedyModule", in_keys_of(options), {options.action_key()}), options_(std::move(options)) {
  const ActionSpec& spec = options_.spec();
  if (spec.kind != ActionSpec::Kind::kBounded && spec.n < 1) {
    throw std::invalid_argument(absl::StrCat("EGreedyModule: the action spec has ", spec.n, " actions"));
  }
  if (spec.kind == ActionSpec::Kind::kBounded) {
    if (!spec.low.defined() || !spec.high.defined()) {
      throw std::invalid_argument("EGreedyModule: a bounded action spec needs low and high");
    }
    if (!at::isFloatingType(spec.dtype)) {
      throw std::invalid_argument(absl::StrCat("EGreedyModule: a bounded action spec of dtype ",
                                               c10::toString(spec.dtype), " (expected a floating-point dtype)"));
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
