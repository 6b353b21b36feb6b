// Scripted modules: a TensorDictModule around a method of a TorchScript module, so that a
// network trained in Python (torch.jit.script / torch.jit.save) runs in C++ with the same keys.
// TorchScript's headers stay in this target's .cc; link //sdk/nn:scripted_module to use it.
//
//   auto actor = tdp::nn::load_scripted_module("actor.pt",
//       tdp::nn::TensorDictModuleOptions({"observation"}, {"loc", "scale"}));
//   actor(td);                                          // calls actor.pt's forward
//   auto value = tdp::nn::scripted_module(jit_module,   // an already loaded torch::jit::Module
//       tdp::nn::TensorDictModuleOptions().in_keys_map({{"obs", "observation"}}).out_keys({"value"}),
//       "value");                                       // method "value", argument by name
//
// The TorchScript module's parameters and buffers are mirrored (the same tensors) into a child
// torch::nn::Module named "module", with the same names ("module.linear.weight"), so that
// parameters(), to(), train()/eval() and torch::save work as for LibTorch modules.
// Inputs: in_keys passes the tensors positionally; in_keys_map passes them as keyword
// arguments (TorchScript checks the names). A missing non-strict input is passed as None.
// Outputs: a Tensor, a tuple or list of Tensors, a Dict[str, Tensor] (read at out_keys) or None.
#pragma once

#include <c10/core/Device.h>

#include <optional>
#include <string>

#include "sdk/nn/tensordict_module.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace tdp::nn {

// Wraps `method` of `module` (shared, not copied: TorchScript modules are handles).
// Throws std::invalid_argument when the module has no such method.
TensorDictModule scripted_module(const torch::jit::Module& module,
                                 TensorDictModuleOptions options,
                                 const std::string& method = "forward");

// Loads a file written by torch.jit.save (onto `device`, if given) and wraps `method`.
TensorDictModule load_scripted_module(const std::string& path, TensorDictModuleOptions options,
                                      const std::string& method = "forward",
                                      std::optional<c10::Device> device = std::nullopt);

}  // namespace tdp::nn
