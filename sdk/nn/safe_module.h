// SafeModule: a tensordict module whose outputs are projected onto their TensorSpecs after it
// runs, TorchRL's safe=True (torchrl.modules.SafeModule and the Actor built on it): a value that
// is not in its spec as a whole is projected (TensorSpec::project), one that is stays as is.
// The wrapped module is the child "module".
//
//   tdp::nn::SafeModule actor(policy_net, {{"action", tdp::nn::TensorSpec::bounded(low, high, {6})}});
//   tdp::TensorDict out = actor(td);   // policy_net's outputs, "action" clamped into [low, high]
//
// A ProbabilisticTensorDictModule projects its samples itself (its `projections` option), so
// that it stays a probabilistic module inside a ProbabilisticTensorDictSequential.
#pragma once

#include <torch/nn/pimpl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sdk/nn/tensor_spec.h"
#include "sdk/nn/tensordict_module_base.h"

namespace tdp::nn {

class SafeModuleImpl : public TensorDictModuleBase {
 public:
  // Throws std::invalid_argument when `module` is null, `projections` is empty or a projected
  // key is not one of the module's out_keys.
  SafeModuleImpl(TensorDictModuleRef module, std::vector<SpecProjection> projections);

  const std::shared_ptr<TensorDictModuleBase>& module() const { return module_; }
  const std::vector<SpecProjection>& projections() const { return projections_; }

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  std::shared_ptr<TensorDictModuleBase> module_;
  std::vector<SpecProjection> projections_;
};

TORCH_MODULE(SafeModule);

}  // namespace tdp::nn
