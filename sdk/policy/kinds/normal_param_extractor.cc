// normal_param_extractor: splits the last dim into (loc, scale), the scale through a mapping and
// bounded below (tdp::nn::NormalParamExtractor).
#include <absl/strings/str_cat.h>

#include "sdk/nn/normal_param_extractor.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  if (!context.arity(site, 1, 2, "a normal_param_extractor")) return false;
  const auto& extractor = site.module.network().normal_param_extractor();
  if (!extractor.scale_mapping().empty() &&
      !context.mapping_known(extractor.scale_mapping(), site.kind_path + ".scale_mapping")) {
    return false;
  }
  if (!context.scale_lower_bound(extractor.has_scale_lb(), extractor.scale_lb(), site.kind_path + ".scale_lb")) {
    return false;
  }
  Shape half = site.inputs[0];
  if (half && !half->empty()) {
    if (half->back() % 2 != 0) {
      return context.fail(site.path + ".in_keys[0]",
                          absl::StrCat("the input has shape ", shape_to_string(*half),
                                       ", whose last dim must be even to split into loc and scale"));
    }
    half->back() /= 2;
  }
  outputs = {half, half};
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& spec = network.normal_param_extractor();
  nn::NormalParamExtractorOptions extractor;
  if (!spec.scale_mapping().empty()) extractor.scale_mapping(spec.scale_mapping());
  if (spec.has_scale_lb()) extractor.scale_lb(spec.scale_lb());
  return nn::TensorDictModule(nn::NormalParamExtractor(extractor), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* extractor = dynamic_cast<const nn::NormalParamExtractorImpl*>(&network);
  if (extractor == nullptr) return false;
  auto* e = out->mutable_normal_param_extractor();
  e->set_scale_mapping(extractor->options().scale_mapping());
  e->set_scale_lb(extractor->options().scale_lb());
  return true;
}

}  // namespace

extern const NetworkKind kNormalParamExtractor{tdpolicy::Network::kNormalParamExtractor, validate, build,
                                               export_network, "NormalParamExtractor"};

}  // namespace tdp::policy::kinds
