// add_state_independent_normal_scale: reads loc, writes (loc, scale) with a learned scale that
// does not depend on the input (tdp::nn::AddStateIndependentNormalScale).
#include <absl/strings/str_cat.h>

#include "sdk/nn/normal_param_extractor.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  if (!context.arity(site, 1, 2, "an add_state_independent_normal_scale")) return false;
  const auto& scale = site.module.network().add_state_independent_normal_scale();
  if (!scale.scale_mapping().empty() && !context.mapping_known(scale.scale_mapping(), site.kind_path + ".scale_mapping")) {
    return false;
  }
  if (!context.scale_lower_bound(scale.has_scale_lb(), scale.scale_lb(), site.kind_path + ".scale_lb") ||
      !context.finite(scale.init_value(), site.kind_path + ".init_value")) {
    return false;
  }
  for (int i = 0; i < scale.scale_shape_size(); ++i) {
    if (!context.positive(scale.scale_shape(i), absl::StrCat(site.kind_path, ".scale_shape[", i, "]"))) return false;
  }
  double weights = 1;
  for (int64_t size : scale.scale_shape()) weights *= size;
  if (!context.allocatable(weights, site.kind_path)) return false;
  outputs = {site.inputs[0], site.inputs[0]};
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& spec = network.add_state_independent_normal_scale();
  nn::AddStateIndependentNormalScaleOptions scale(
      std::vector<int64_t>(spec.scale_shape().begin(), spec.scale_shape().end()));
  if (!spec.scale_mapping().empty()) scale.scale_mapping(spec.scale_mapping());
  if (spec.has_scale_lb()) scale.scale_lb(spec.scale_lb());
  scale.init_value(spec.init_value());
  return nn::TensorDictModule(nn::AddStateIndependentNormalScale(scale), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* scale = dynamic_cast<const nn::AddStateIndependentNormalScaleImpl*>(&network);
  if (scale == nullptr) return false;
  const auto& o = scale->options();
  auto* s = out->mutable_add_state_independent_normal_scale();
  for (int64_t size : o.scale_shape()) s->add_scale_shape(size);
  s->set_scale_mapping(o.scale_mapping());
  s->set_scale_lb(o.scale_lb());
  s->set_init_value(o.init_value());
  return true;
}

}  // namespace

extern const NetworkKind kAddStateIndependentNormalScale{tdpolicy::Network::kAddStateIndependentNormalScale, validate,
                                                         build, export_network, "AddStateIndependentNormalScale"};

}  // namespace tdp::policy::kinds
