// TensorDictModuleWrapper: a tensordict module that behaves exactly like the module it wraps,
// except for what a subclass overrides; the base for decorators such as exploration noise.
// Python's tensordict.nn.TensorDictModuleWrapper.
//
//   struct AddNoise : tdp::nn::TensorDictModuleWrapperImpl {
//     using TensorDictModuleWrapperImpl::TensorDictModuleWrapperImpl;
//     tdp::TensorDict forward_impl(tdp::TensorDict td, const std::optional<tdp::TensorDict>& out) override {
//       td = TensorDictModuleWrapperImpl::forward_impl(td, out);
//       return td.set("action", td.get("action") + 0.1 * torch::randn_like(td.get("action")));
//     }
//   };
//
// The wrapped module is the child "td_module" (so parameters are shared, not copied); the
// wrapper takes its keys when constructed. select_out_keys() on the wrapper narrows the
// wrapper's output only.
#pragma once

#include <torch/nn/pimpl.h>

#include <memory>
#include <optional>

#include "sdk/nn/tensordict_module_base.h"

namespace tdp::nn {

class TensorDictModuleWrapperImpl : public TensorDictModuleBase {
 public:
  explicit TensorDictModuleWrapperImpl(TensorDictModuleRef td_module);

  const std::shared_ptr<TensorDictModuleBase>& td_module() const { return td_module_; }

 protected:
  // Calls the wrapped module.
  TensorDict forward_impl(TensorDict tensordict,
                          const std::optional<TensorDict>& tensordict_out) override;

 private:
  std::shared_ptr<TensorDictModuleBase> td_module_;
};

TORCH_MODULE(TensorDictModuleWrapper);

}  // namespace tdp::nn
