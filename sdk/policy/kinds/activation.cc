// activation: an elementwise torch.nn activation with its arguments (tdp::nn::Activation).
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>

#include "sdk/nn/layers.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

// An argument given to an activation that does not take it.
bool owned(bool set, const std::string& name, const char* owner, const std::string& path, ValidationContext& context) {
  if (!set || name == owner) return true;
  return context.fail(path, absl::StrCat("an argument of ", owner, ", not of ", name), "leave it unset");
}

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& a = site.module.network().activation();
  if (!context.arity(site, 1, 1, "an activation")) return false;
  const auto& names = nn::layer_activation_names();
  if (std::find(names.begin(), names.end(), a.name()) == names.end()) {
    return context.fail(site.kind_path + ".name", absl::StrCat("unknown activation \"", a.name(), "\""),
                        absl::StrCat("one of ", absl::StrJoin(names, ", ")));
  }
  const std::string& p = site.kind_path;
  if (!owned(a.has_alpha(), a.name(), "elu", p + ".alpha", context) ||
      !owned(a.has_negative_slope(), a.name(), "leaky_relu", p + ".negative_slope", context) ||
      !owned(!a.approximate().empty(), a.name(), "gelu", p + ".approximate", context) ||
      !owned(a.has_beta(), a.name(), "softplus", p + ".beta", context) ||
      !owned(a.has_threshold(), a.name(), "softplus", p + ".threshold", context)) {
    return false;
  }
  if ((a.has_alpha() && !context.finite(a.alpha(), p + ".alpha")) ||
      (a.has_negative_slope() && !context.finite(a.negative_slope(), p + ".negative_slope")) ||
      (a.has_beta() && !context.finite(a.beta(), p + ".beta")) ||
      (a.has_threshold() && !context.finite(a.threshold(), p + ".threshold"))) {
    return false;
  }
  if (a.has_beta() && a.beta() == 0) return context.fail(p + ".beta", "must not be 0 (softplus divides by it)");
  if (!a.approximate().empty() && a.approximate() != "none" && a.approximate() != "tanh") {
    return context.fail(p + ".approximate", absl::StrCat("unknown approximation \"", a.approximate(), "\""),
                        "\"none\" or \"tanh\"");
  }
  outputs.push_back(site.inputs[0]);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& a = network.activation();
  nn::ActivationOptions activation(a.name());
  if (a.has_alpha()) activation.alpha(a.alpha());
  if (a.has_negative_slope()) activation.negative_slope(a.negative_slope());
  activation.approximate(a.approximate());
  if (a.has_beta()) activation.beta(a.beta());
  if (a.has_threshold()) activation.threshold(a.threshold());
  return nn::TensorDictModule(nn::Activation(activation), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* activation = dynamic_cast<const nn::ActivationImpl*>(&network);
  if (activation == nullptr) return false;
  const auto& o = activation->options();
  auto* a = out->mutable_activation();
  a->set_name(o.name());
  if (o.alpha()) a->set_alpha(*o.alpha());
  if (o.negative_slope()) a->set_negative_slope(*o.negative_slope());
  a->set_approximate(o.approximate());
  if (o.beta()) a->set_beta(*o.beta());
  if (o.threshold()) a->set_threshold(*o.threshold());
  return true;
}

}  // namespace

extern const NetworkKind kActivation{tdpolicy::Network::kActivation, validate, build, export_network, "Activation"};

}  // namespace tdp::policy::kinds
