// The tensor-level forms behind a TensorDictModule: every callable it wraps takes its inputs as
// a TensorList (in in_keys order) or as TensorKwargs (by argument name) and is reduced to one
// TensorFunction from the inputs to the outputs in out_keys order.
//
//   tdp::nn::TensorFunction add = [](tdp::nn::TensorList& in) {
//     return tdp::nn::TensorList{in[0] + in[1]};
//   };
//   tdp::nn::TensorList inputs{at::ones({2}), at::ones({2})};
//   tdp::nn::TensorList outputs = add(inputs);                    // {[2, 2]}
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tdp::nn {

using TensorList = std::vector<at::Tensor>;
// Tensors by argument name, for callables that take their inputs by name.
using TensorKwargs = std::unordered_map<std::string, at::Tensor>;
// The form every wrapped callable is reduced to: the inputs in in_keys order (undefined for a
// missing non-strict input) to the outputs in out_keys_source() order.
using TensorFunction = std::function<TensorList(TensorList& inputs)>;
// The form of a callable that takes its inputs by name: arguments by name to the outputs in
// out_keys_source() order.
using KwargsFunction = std::function<TensorList(const TensorKwargs& arguments)>;

}  // namespace tdp::nn
