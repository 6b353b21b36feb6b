// keys(in, out): TensorDictModuleOptions with just in_keys and out_keys, the options most module
// tests build.
//
//   TensorDictModule module(torch::nn::Linear(3, 4), keys({"x"}, {"y"}));
#pragma once

#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module.h"
#include "sdk/tensordict/nested_key.h"

namespace tdp::test_util {

inline nn::TensorDictModuleOptions keys(std::vector<NestedKey> in, std::vector<NestedKey> out) {
  return nn::TensorDictModuleOptions(std::move(in), std::move(out));
}

}  // namespace tdp::test_util
