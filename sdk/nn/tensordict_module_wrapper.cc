#include "sdk/nn/tensordict_module_wrapper.h"

#include <stdexcept>

namespace tdp::nn {

TensorDictModuleWrapperImpl::TensorDictModuleWrapperImpl(TensorDictModuleRef td_module)
    : TensorDictModuleBase("TensorDictModuleWrapper"), td_module_(td_module.ptr()) {
  if (td_module_ == nullptr) {
    throw std::invalid_argument("TensorDictModuleWrapper: the module to wrap is null.");
  }
  register_module("td_module", td_module_);
  set_in_keys(td_module_->in_keys());
  set_out_keys(td_module_->out_keys());
}

TensorDict TensorDictModuleWrapperImpl::forward_impl(
    TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  return td_module_->forward(tensordict, tensordict_out);
}

}  // namespace tdp::nn
