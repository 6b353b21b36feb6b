// mapping: an elementwise function from tdp::nn::mappings (tdp::nn::MappingModule).
#include "sdk/nn/networks.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  if (!context.arity(site, 1, 1, "a mapping")) return false;
  if (!context.mapping_known(site.module.network().mapping().name(), site.kind_path + ".name")) return false;
  outputs.push_back(site.inputs[0]);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  return nn::TensorDictModule(nn::MappingModule(network.mapping().name()), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* mapping = dynamic_cast<const nn::MappingModuleImpl*>(&network);
  if (mapping == nullptr) return false;
  out->mutable_mapping()->set_name(mapping->name());
  return true;
}

}  // namespace

extern const NetworkKind kMapping{tdpolicy::Network::kMapping, validate, build, export_network, "MappingModule"};

}  // namespace tdp::policy::kinds
