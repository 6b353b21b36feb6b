// from_module and soft_update: a module's parameters and buffers as a TensorDict, and the
// target-network update over two such TensorDicts. Python's `TensorDict.from_module(module)`
// (entries nested by submodule path, e.g. ("0", "weight"); batch_size []; the tensors ARE the
// module's, so writing them in place updates the module) and TorchRL's SoftUpdate rule.
//
//   tdp::TensorDict source = tdp::nn::from_module(*critic);
//   tdp::TensorDict target = tdp::nn::from_module(*target_critic);
//   tdp::nn::soft_update(target, source, /*tau=*/0.005);   // target = (1 - tau) target + tau source
#pragma once

#include <torch/nn/module.h>

#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

// Parameters, then buffers (undefined ones skipped), of `module` and its descendants, keyed by
// their dotted LibTorch names split into nested keys. The entries share storage with the module.
TensorDict from_module(const torch::nn::Module& module);

// target <- target + tau * (source - target), in place and without autograd, for every entry of
// `target` (floating-point entries only; integer buffers such as counters are left as they are).
// Throws std::invalid_argument for tau outside [0, 1], or naming a key of `target` that `source`
// lacks or holds with another shape.
void soft_update(TensorDict& target, const TensorDict& source, double tau);

}  // namespace tdp::nn
