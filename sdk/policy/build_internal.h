// Internal to sdk/spec: the builders for the probabilistic module kinds, kept apart from the
// generic tree walk in build.cc.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_module_base.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::policy::internal {

// Keys of a validated spec ("_" kept as is).
std::vector<NestedKey> keys_of(const google::protobuf::RepeatedPtrField<std::string>& texts);

std::shared_ptr<nn::TensorDictModuleBase> build_distribution_network(const tdpolicy::Network& network,
                                                                     const nn::TensorDictModuleOptions& options);
std::shared_ptr<nn::TensorDictModuleBase> build_probabilistic(const tdpolicy::ProbabilisticModule& spec);
std::shared_ptr<nn::TensorDictModuleBase> build_probabilistic_sequential(
    const tdpolicy::ProbabilisticSequential& spec,
    std::vector<std::pair<std::string, nn::TensorDictModuleRef>> children);

}  // namespace tdp::policy::internal
