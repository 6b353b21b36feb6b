// linear: one torch::nn::Linear layer.
#include <absl/strings/str_cat.h>
#include <torch/nn/modules/linear.h>

#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& linear = site.module.network().linear();
  if (!context.arity(site, 1, 1, "a linear layer")) return false;
  if (!context.positive(linear.in_features(), site.kind_path + ".in_features") ||
      !context.positive(linear.out_features(), site.kind_path + ".out_features")) {
    return false;
  }
  if (!context.allocatable((double(linear.in_features()) + 1) * linear.out_features(), site.kind_path)) return false;
  if (!context.check_last_dim(site.inputs[0], linear.in_features(), site.path + ".in_keys[0]", "linear.in_features")) {
    return false;
  }
  outputs.push_back(with_last(site.inputs[0], linear.out_features()));
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& l = network.linear();
  return nn::TensorDictModule(
             torch::nn::Linear(torch::nn::LinearOptions(l.in_features(), l.out_features()).bias(!l.no_bias())), options)
      .ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* linear = dynamic_cast<const torch::nn::LinearImpl*>(&network);
  if (linear == nullptr) return false;
  auto* l = out->mutable_linear();
  l->set_in_features(linear->options.in_features());
  l->set_out_features(linear->options.out_features());
  l->set_no_bias(!linear->options.bias());
  return true;
}

}  // namespace

extern const NetworkKind kLinear{tdpolicy::Network::kLinear, validate, build, export_network, "Linear"};

}  // namespace tdp::policy::kinds
