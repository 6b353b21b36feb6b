// Internal to sdk/policy (a `srcs` header: never installed). Constant tensors and TorchRL action
// specs inside a spec: their validation (declared size, dtype, finite values, shapes that
// broadcast onto what they bound), their build (tdpolicy.ActionSpec -> tdp::nn::TensorSpec) and
// export, shared by the tanh kind, the probabilistic kind's tensor kwargs and every module's
// `projections` (TorchRL's safe=True).
//
//   std::optional<at::Tensor> low = constant_tensor(bound.low(), path + ".low", "the low bound", context);
//   if (!low || !broadcasts_onto(*low, input_shape, path + ".low", context)) return false;
//   std::vector<nn::SpecProjection> projections = projections_of(module);   // a validated spec
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "sdk/nn/tensor_spec.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {

// A floating-point constant of the spec at `path`: its shape counted against the limits, its
// bytes parsed, no NaN (and no infinity unless `infinite_ok`). Nothing after context.fail().
std::optional<at::Tensor> constant_tensor(const tdpolicy::TensorProto& proto, const std::string& path,
                                          const std::string& what, ValidationContext& context,
                                          bool infinite_ok = false);
// Whether `tensor` broadcasts onto a per-environment `shape` without adding dims ([act] or
// [n_agents, act] onto [n_agents, act]); true where the shape is unknown.
bool broadcasts_onto(const at::Tensor& tensor, const Shape& shape, const std::string& path, const std::string& what,
                     ValidationContext& context);
// low < high (`strict`) or low <= high everywhere, the two broadcasting together.
bool ordered(const at::Tensor& low, const at::Tensor& high, bool strict, const std::string& path,
             ValidationContext& context);

// A validated spec's constant (from_tensor_proto of a checked proto).
at::Tensor constant(const tdpolicy::TensorProto& proto);

// A tdpolicy.ActionSpec at `path`: a kind set, its n positive or its bounds finite-or-infinite
// constants broadcasting onto its shape with low <= high, a known dtype.
bool validate_action_spec(const tdpolicy::ActionSpec& spec, const std::string& path, ValidationContext& context);

// Module.projections: each key written by the module or earlier, each spec complete.
bool validate_projections(const tdpolicy::Module& module, const std::string& path, ValidationContext& context);
std::vector<nn::SpecProjection> projections_of(const tdpolicy::Module& module);
void add_projections(const std::vector<nn::SpecProjection>& projections, tdpolicy::Module* out);

nn::TensorSpec tensor_spec_of(const tdpolicy::ActionSpec& spec);
tdpolicy::ActionSpec action_spec_of(const nn::TensorSpec& spec);

}  // namespace tdp::policy::kinds
