// one_hot: an integer tensor [...] becomes float32 [..., num_classes] (tdp::nn::OneHot).
#include "sdk/nn/networks.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  if (!context.arity(site, 1, 1, "a one_hot")) return false;
  const int64_t classes = site.module.network().one_hot().num_classes();
  if (!context.positive(classes, site.kind_path + ".num_classes")) return false;
  // Each input element becomes num_classes floats: bounded like a layer's weights.
  if (!context.allocatable(static_cast<double>(classes), site.kind_path)) return false;
  Shape out = site.inputs[0];
  if (out) out->push_back(classes);
  outputs.push_back(out);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  return nn::TensorDictModule(nn::OneHot(network.one_hot().num_classes()), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* one_hot = dynamic_cast<const nn::OneHotImpl*>(&network);
  if (one_hot == nullptr) return false;
  out->mutable_one_hot()->set_num_classes(one_hot->num_classes());
  return true;
}

}  // namespace

extern const NetworkKind kOneHot{tdpolicy::Network::kOneHot, validate, build, export_network, "OneHot"};

}  // namespace tdp::policy::kinds
