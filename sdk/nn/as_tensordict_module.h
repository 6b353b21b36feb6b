// as_tensordict_module: turns a function, or a member function bound to an object, into a
// TensorDictModule in one line. The C++ form of Python's @as_tensordict_module decorator.
//
//   auto add_one = tdp::nn::as_tensordict_module(
//       [](const at::Tensor& c) { return c + 1; }, {"c"}, {"d"});
//   add_one(td);                                                  // td["d"] = td["c"] + 1
//   Scaler scaler;                                                // at::Tensor Scaler::apply(at::Tensor)
//   auto scale = tdp::nn::as_tensordict_module(&Scaler::apply, &scaler, {"x"}, {"y"});
//
// The object of a member function must outlive the module (it is held by pointer).
#pragma once

#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module.h"

namespace tdp::nn {

template <typename F>
TensorDictModule as_tensordict_module(F function, std::vector<NestedKey> in_keys,
                                      std::vector<NestedKey> out_keys) {
  return TensorDictModule(std::move(function),
                          TensorDictModuleOptions(std::move(in_keys), std::move(out_keys)));
}

template <typename C, typename R, typename... A>
TensorDictModule as_tensordict_module(R (C::*method)(A...), C* object,
                                      std::vector<NestedKey> in_keys,
                                      std::vector<NestedKey> out_keys) {
  return as_tensordict_module(
      [object, method](A... args) -> R { return (object->*method)(std::forward<A>(args)...); },
      std::move(in_keys), std::move(out_keys));
}

template <typename C, typename R, typename... A>
TensorDictModule as_tensordict_module(R (C::*method)(A...) const, const C* object,
                                      std::vector<NestedKey> in_keys,
                                      std::vector<NestedKey> out_keys) {
  return as_tensordict_module(
      [object, method](A... args) -> R { return (object->*method)(std::forward<A>(args)...); },
      std::move(in_keys), std::move(out_keys));
}

}  // namespace tdp::nn
