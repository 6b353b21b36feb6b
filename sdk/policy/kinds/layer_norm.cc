// layer_norm: torch::nn::LayerNorm over the last dims.
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <torch/nn/modules/normalization.h>

#include <algorithm>
#include <cmath>

#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& norm = site.module.network().layer_norm();
  const std::string& p = site.kind_path;
  if (!context.arity(site, 1, 1, "a layer_norm")) return false;
  if (norm.normalized_shape().empty()) {
    return context.fail(p + ".normalized_shape", "a layer_norm normalizes at least one dim");
  }
  double elements = 1;
  for (int i = 0; i < norm.normalized_shape_size(); ++i) {
    if (!context.positive(norm.normalized_shape(i), absl::StrCat(p, ".normalized_shape[", i, "]"))) return false;
    elements *= static_cast<double>(norm.normalized_shape(i));
  }
  if (norm.has_eps() && !(std::isfinite(norm.eps()) && norm.eps() >= 0)) {
    return context.fail(p + ".eps", absl::StrCat("must be a finite number >= 0, got ", norm.eps()),
                        "leave it unset for 1e-5");
  }
  if (!context.allocatable(norm.no_affine() ? 0 : 2 * elements, p)) return false;
  const Shape& in = site.inputs[0];
  if (in) {
    const size_t n = static_cast<size_t>(norm.normalized_shape_size());
    if (in->size() < n || !std::equal(norm.normalized_shape().begin(), norm.normalized_shape().end(), in->end() - n)) {
      return context.fail(
          site.path + ".in_keys[0]",
          absl::StrCat("the input has shape ", shape_to_string(*in), " but layer_norm.normalized_shape is [",
                       absl::StrJoin(norm.normalized_shape(), ", "), "]"),
          "the input's last dims must be normalized_shape");
    }
  }
  outputs.push_back(in);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& norm = network.layer_norm();
  torch::nn::LayerNormOptions layer_norm({norm.normalized_shape().begin(), norm.normalized_shape().end()});
  layer_norm.eps(norm.has_eps() ? norm.eps() : 1e-5).elementwise_affine(!norm.no_affine());
  return nn::TensorDictModule(torch::nn::LayerNorm(layer_norm), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* norm = dynamic_cast<const torch::nn::LayerNormImpl*>(&network);
  if (norm == nullptr) return false;
  auto* n = out->mutable_layer_norm();
  for (int64_t size : norm->options.normalized_shape()) n->add_normalized_shape(size);
  n->set_eps(norm->options.eps());
  n->set_no_affine(!norm->options.elementwise_affine());
  return true;
}

}  // namespace

extern const NetworkKind kLayerNorm{tdpolicy::Network::kLayerNorm, validate, build, export_network, "LayerNorm"};

}  // namespace tdp::policy::kinds
