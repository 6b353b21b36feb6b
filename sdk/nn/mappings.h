// Mappings: named elementwise functions from the reals to the positive reals, which turn a
// network output into, e.g., a distribution's scale. A policy spec names its mapping by string
// ("softplus", "biased_softplus_1.0_0.01", ...). Python's tensordict.nn.mappings and
// add_custom_mapping.
//
//   tdp::nn::Mapping scale = tdp::nn::mappings("biased_softplus_1.0");   // 0 -> 1
//   at::Tensor s = scale(net_output);
//   tdp::nn::add_custom_mapping("square", [](const at::Tensor& x) { return x * x; });
//   tdp::nn::mappings("square");                                          // now known
//
// Built in: softplus, exp, relu, expln, abs, none (identity), biased_softplus (bias 1,
// min_val 0.01), biased_softplus_<bias> and biased_softplus_<bias>_<min_val>. A custom mapping
// may replace a built-in name. The registry is safe to use from several threads. An unknown
// name throws std::invalid_argument listing the known names.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace tdp::nn {

using Mapping = std::function<at::Tensor(const at::Tensor&)>;

Mapping mappings(const std::string& name);

// Registers (or replaces) `name`. Throws std::invalid_argument for an empty name or mapping.
void add_custom_mapping(const std::string& name, Mapping mapping);

// The registered names, sorted, with the biased_softplus_<bias>[_<min_val>] patterns.
std::vector<std::string> mapping_names();

// exp(x) for x <= 0, log1p(x) + 1 for x > 0: continuous, smooth at 0, and growing only
// logarithmically ("State-Dependent Exploration for Policy Gradient Methods").
at::Tensor expln(const at::Tensor& x);

}  // namespace tdp::nn
