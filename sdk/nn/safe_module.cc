#include "sdk/nn/safe_module.h"

#include <algorithm>
#include <stdexcept>

namespace tdp::nn {

SafeModuleImpl::SafeModuleImpl(TensorDictModuleRef module, std::vector<SpecProjection> projections)
    : TensorDictModuleBase("SafeModule"), module_(module.ptr()), projections_(std::move(projections)) {
  if (module_ == nullptr) throw std::invalid_argument("SafeModule: the module is null.");
  if (projections_.empty()) throw std::invalid_argument("SafeModule: no projections (safe=True needs a spec).");
  const auto& written = module_->out_keys_source();
  for (const SpecProjection& projection : projections_) {
    if (std::find(written.begin(), written.end(), projection.key) == written.end()) {
      throw std::invalid_argument("SafeModule: the spec's key " + projection.key.to_string() +
                                  " is not an out_key of " + module_->type_name() + ", whose out_keys are " +
                                  keys_to_string(written));
    }
  }
  register_module("module", module_);
  set_in_keys(module_->in_keys());
  set_out_keys(module_->out_keys());
}

TensorDict SafeModuleImpl::forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  TensorDict out = module_->forward(tensordict, tensordict_out);
  project_entries(projections_, out);
  return out;
}

std::vector<std::string> SafeModuleImpl::repr_fields() const {
  std::vector<std::string> fields;
  for (const SpecProjection& projection : projections_) {
    fields.push_back("spec[" + projection.key.to_string() + "]=" + projection.spec.to_string());
  }
  return fields;
}

}  // namespace tdp::nn
