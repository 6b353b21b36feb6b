// dueling: value + advantage - mean(advantage) over shared features (tdp::nn::Dueling; TorchRL's
// DuelingCnnDQNet and DuelingMlpDQNet). Each of features, advantage and value is any network kind.
#include <absl/strings/str_cat.h>

#include <algorithm>

#include "sdk/nn/layers.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/layers.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& dueling = site.module.network().dueling();
  const std::string& p = site.kind_path;
  if (!context.arity(site, 1, 1, "a dueling network")) return false;
  std::vector<Shape> features, advantage, value;
  if (!validate_layer(dueling.features(), site.inputs, 1, p + ".features", context, features) ||
      !validate_layer(dueling.advantage(), features, 1, p + ".advantage", context, advantage) ||
      !validate_layer(dueling.value(), features, 1, p + ".value", context, value)) {
    return false;
  }
  const Shape& a = advantage[0];
  const Shape& v = value[0];
  if (a && v) {
    const bool same_leading = a->size() == v->size() && !a->empty() && std::equal(a->begin(), a->end() - 1, v->begin());
    if (!same_leading || (v->back() != 1 && v->back() != a->back())) {
      return context.fail(p + ".value",
                          absl::StrCat("the value has shape ", shape_to_string(*v), " and the advantage ",
                                       shape_to_string(*a), "; the value's last dim must be 1 or the advantage's"));
    }
  }
  outputs.push_back(a);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options,
                const BuildContext& context) {
  const auto& d = network.dueling();
  return nn::TensorDictModule(
             nn::Dueling(build_layer(d.features(), 1, 1, context), build_layer(d.advantage(), 1, 1, context),
                         build_layer(d.value(), 1, 1, context)),
             options)
      .ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* dueling = dynamic_cast<const nn::DuelingImpl*>(&network);
  if (dueling == nullptr) return false;
  tdpolicy::Dueling spec;
  if (!export_layer(*dueling->features().module, spec.mutable_features()) ||
      !export_layer(*dueling->advantage().module, spec.mutable_advantage()) ||
      !export_layer(*dueling->value().module, spec.mutable_value())) {
    return false;
  }
  *out->mutable_dueling() = std::move(spec);
  return true;
}

}  // namespace

extern const NetworkKind kDueling{tdpolicy::Network::kDueling, validate, build, export_network, "Dueling"};

}  // namespace tdp::policy::kinds
