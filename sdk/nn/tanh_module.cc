#include "sdk/nn/tanh_module.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <stdexcept>

#include "sdk/nn/safe_tanh_clamp.h"

namespace tdp::nn {

TanhModuleOptions::TanhModuleOptions(std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys)
    : in_keys_(std::move(in_keys)), out_keys_(out_keys.empty() ? in_keys_ : std::move(out_keys)) {}

TanhModuleImpl::TanhModuleImpl(TanhModuleOptions options)
    : TensorDictModuleBase("TanhModule", options.in_keys(), options.out_keys()), options_(std::move(options)) {
  const size_t n = options_.in_keys().size();
  if (n == 0 || options_.out_keys().size() != n) {
    throw std::invalid_argument("TanhModule: in_keys and out_keys should have the same (positive) length, got " +
                                keys_to_string(options_.in_keys()) + " and " + keys_to_string(options_.out_keys()));
  }
  if (options_.bounds().empty()) {
    // TorchRL's defaults: -torch.ones(()) and torch.ones(()).
    options_.bounds(std::vector<TanhBounds>(n, {-at::ones({}), at::ones({})}));
  }
  if (options_.bounds().size() != n) {
    throw std::invalid_argument("TanhModule: " + std::to_string(options_.bounds().size()) + " bounds for " +
                                std::to_string(n) + " out_keys");
  }
  for (size_t i = 0; i < n; ++i) {
    const auto& [low, high] = options_.bounds()[i];
    if (!low.defined() || !high.defined()) {
      throw std::invalid_argument("TanhModule: undefined bounds for " + options_.out_keys()[i].to_string());
    }
    if ((high < low).any().item<bool>()) throw std::invalid_argument("TanhModule: got high < low");
  }
}

TensorDict TanhModuleImpl::forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  TensorDict out = tensordict_out.value_or(tensordict);
  const auto& in_keys = options_.in_keys();
  // Read every input before writing: an out_key may be another pair's in_key.
  std::vector<at::Tensor> features;
  for (const NestedKey& key : in_keys) {
    at::Tensor value = tensordict.get(key, at::Tensor());
    if (!value.defined()) {
      throw KeyError(describe() + ": " + key.to_string() + " is not in the TensorDict, whose keys are " +
                     keys_to_string(tensordict.keys(true)) + ".");
    }
    features.push_back(std::move(value));
  }
  for (size_t i = 0; i < in_keys.size(); ++i) {
    at::Tensor feature = features[i].tanh();
    if (options_.clamp()) feature = safe_tanh_clamp(feature);
    const at::Tensor low = options_.bounds()[i].first.to(feature.device());
    const at::Tensor high = options_.bounds()[i].second.to(feature.device());
    out.set(options_.out_keys()[i], low + (high - low) * (feature + 1) / 2);
  }
  return out;
}

std::vector<std::string> TanhModuleImpl::repr_fields() const {
  return {std::string("clamp=") + (options_.clamp() ? "True" : "False")};
}

}  // namespace tdp::nn
