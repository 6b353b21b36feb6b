// Internal to sdk/policy: what sequential.cc and probabilistic_sequential.cc share. Both hold
// `modules` run in order, and `selected_out_keys`.
//
//   const auto& seq = module.sequential();
//   if (!validate_sequence(seq.selected_out_keys(), seq.modules(), path + ".sequential", context)) return false;
//   auto children = build_children(seq.modules(), path + ".sequential", context);
#pragma once

#include <google/protobuf/repeated_field.h>

#include <string>
#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"

namespace tdp::policy::kinds {

// The selected_out_keys parse; at least one module, no two named alike; each module valid, in order.
// `kind_path`: the sequence's field ("module.sequential").
bool validate_sequence(const google::protobuf::RepeatedPtrField<std::string>& selected_out_keys,
                       const google::protobuf::RepeatedPtrField<tdpolicy::Module>& modules,
                       const std::string& kind_path, ValidationContext& context);

// Each module built, named by its name or else its position ("0", "1", ...).
std::vector<std::pair<std::string, nn::TensorDictModuleRef>> build_children(
    const google::protobuf::RepeatedPtrField<tdpolicy::Module>& modules, const std::string& kind_path,
    const BuildContext& context);

}  // namespace tdp::policy::kinds
