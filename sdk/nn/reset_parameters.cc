// reset_parameters_recursive() lives apart from tensordict_module_base.cc because it needs the
// headers of every LibTorch layer it knows how to re-initialize.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/functional/instancenorm.h>  // instancenorm.h needs it first
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/rnn.h>

#include "sdk/log/log.h"
#include "sdk/nn/tensordict_module_base.h"

namespace tdp::nn {
namespace {

template <typename... Impl>
bool reset_known(torch::nn::Module& module) {
  // LibTorch's reset_parameters() are non-virtual members of each layer, hence the casts.
  bool done = false;
  (void)std::initializer_list<int>{([&] {
    if (done) return 0;
    if (auto* layer = dynamic_cast<Impl*>(&module)) {
      layer->reset_parameters();
      done = true;
    }
    return 0;
  }())...};
  return done;
}

bool reset_one(torch::nn::Module& module) {
  if (auto* resettable = dynamic_cast<ParameterResettable*>(&module)) {
    resettable->reset_parameters();
    return true;
  }
  using namespace torch::nn;  // NOLINT: the list below reads better unqualified
  return reset_known<LinearImpl, BilinearImpl, Conv1dImpl, Conv2dImpl, Conv3dImpl,
                     ConvTranspose1dImpl, ConvTranspose2dImpl, ConvTranspose3dImpl,
                     BatchNorm1dImpl, BatchNorm2dImpl, BatchNorm3dImpl, InstanceNorm1dImpl,
                     InstanceNorm2dImpl, InstanceNorm3dImpl, LayerNormImpl, GroupNormImpl,
                     EmbeddingImpl, EmbeddingBagImpl, RNNImpl, LSTMImpl, GRUImpl, RNNCellImpl,
                     LSTMCellImpl, GRUCellImpl>(module);
}

// Depth first, like tensordict's _reset_parameters; a child is reset after its own children.
// A ParameterResettable module re-initializes its own subtree (an EnsembleModule resets its
// copies, not the template they run through), so the walk does not enter it.
bool reset_children(torch::nn::Module& module) {
  bool any = false;
  for (const auto& child : module.children()) {
    if (dynamic_cast<ParameterResettable*>(child.get()) == nullptr) any |= reset_children(*child);
    any |= reset_one(*child);
  }
  return any;
}

}  // namespace

bool TensorDictModuleBase::reset_parameters_recursive() {
  const bool any = dynamic_cast<ParameterResettable*>(this) != nullptr ? reset_one(*this) : reset_children(*this);
  if (!any) {
    logger()->warn(
        "{}: reset_parameters_recursive was called without the parameters argument and did "
        "not find any parameters to reset",
        describe());
  }
  return any;
}

}  // namespace tdp::nn
