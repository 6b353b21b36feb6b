// AOTInductor packages: a TensorDictModule around a network that torch.export traced and
// AOTInductor compiled to native code (torch._inductor.aoti_compile_and_package, a .pt2 file), run
// through LibTorch's torch::inductor::AOTIModelPackageLoader. It is how any PyTorch network that no
// other module kind expresses runs in C++: the module's in_keys are the program's positional
// inputs, in order, and its outputs go to the out_keys.
//
//   auto policy = tdp::nn::load_aoti_package("actor.pt2",
//       tdp::nn::TensorDictModuleOptions({"observation"}, {"loc", "scale"}));
//   policy(td);                                  // writes loc and scale for td's batch
//   auto on_gpu = tdp::nn::load_aoti_package("actor_cuda.pt2", options, c10::kCUDA);
//   on_gpu->to(torch::kCUDA);                     // a CUDA package loads when moved to a GPU
//
// A package is native code: load only packages you trust (as you would a shared library). Its
// weights are constants inside the package: the module has no parameters, and changing parameters
// elsewhere never changes what it computes.
//
// Packages written by tdpolicy.export carry metadata (tdpolicy.inputs, tdpolicy.outputs: each
// tensor's dtype and shape after the batch dim, "Float[4];Long[]"). With it, the module checks the
// in_keys and out_keys counts when it is made, and each call's dtypes and shapes: any number of
// leading batch dims are flattened into the program's one dynamic batch dim and restored on the
// outputs, and an empty batch returns empty outputs without calling the program. Without it (a
// package compiled by hand), tensors pass to the program as they are.
//
// A package runs on the device type it was compiled for: a CPU package on CPU, a CUDA one once the
// module is moved to a CUDA device (to(device) loads it there); moving a package to another device
// type, or calling a CUDA package before it is moved, throws std::invalid_argument.
#pragma once

#include <c10/core/DeviceType.h>

#include <string>

#include "sdk/nn/tensordict_module.h"

namespace tdp::nn {

// Wraps the package held in `bytes` (the content of a .pt2 file); `source` names it in errors.
// Throws std::invalid_argument when the bytes are not a package, the package was compiled for
// another device type than `device`, or its metadata disagrees with the options' key counts.
TensorDictModule aoti_package(std::string bytes, const std::string& source, TensorDictModuleOptions options,
                              c10::DeviceType device = c10::kCPU);

// Reads the .pt2 file at `path` and wraps it.
TensorDictModule load_aoti_package(const std::string& path, TensorDictModuleOptions options,
                                   c10::DeviceType device = c10::kCPU);

}  // namespace tdp::nn
