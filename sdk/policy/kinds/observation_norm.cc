// observation_norm: TorchRL's ObservationNorm, and VecNorm's statistics frozen at export
// (tdp::nn::ObservationNorm, buffers "loc" and "scale").
#include <absl/strings/str_cat.h>

#include "sdk/nn/transforms.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& norm = site.module.network().observation_norm();
  if (!context.arity(site, 1, 1, "an observation_norm")) return false;
  double elements = 1;
  for (int i = 0; i < norm.shape_size(); ++i) {
    if (norm.shape(i) < 0) {
      return context.fail(absl::StrCat(site.kind_path, ".shape[", i, "]"),
                          absl::StrCat("a size must not be negative, got ", norm.shape(i)));
    }
    elements *= static_cast<double>(norm.shape(i));
  }
  if (!context.allocatable(2 * elements, site.kind_path)) return false;
  if (norm.has_clip()) {
    if (!context.finite(norm.clip(), site.kind_path + ".clip")) return false;
    if (norm.clip() <= 0)
      return context.fail(site.kind_path + ".clip", absl::StrCat("must be positive, got ", norm.clip()));
  }
  // loc and scale broadcast to the input: their trailing sizes are 1 or the input's.
  const Shape& in = site.inputs[0];
  const std::vector<int64_t> shape(norm.shape().begin(), norm.shape().end());
  if (in) {
    const size_t n = static_cast<size_t>(norm.shape_size());
    bool fits = n <= in->size();
    for (size_t i = 0; fits && i < n; ++i) {
      const int64_t size = norm.shape(static_cast<int>(n - 1 - i));
      fits = size == 1 || size == (*in)[in->size() - 1 - i];
    }
    if (!fits) {
      return context.fail(site.kind_path + ".shape",
                          absl::StrCat("loc and scale of shape ", shape_to_string(shape),
                                       " do not broadcast to the input's per-environment shape ", shape_to_string(*in),
                                       " (in_keys[0])"));
    }
  }
  outputs.push_back(in);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& n = network.observation_norm();
  nn::ObservationNormOptions norm(std::vector<int64_t>(n.shape().begin(), n.shape().end()));
  norm.standard_normal(n.standard_normal());
  if (n.has_clip()) norm.clip(n.clip());
  return nn::TensorDictModule(nn::ObservationNorm(norm), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* norm = dynamic_cast<const nn::ObservationNormImpl*>(&network);
  if (norm == nullptr) return false;
  const auto& o = norm->options();
  auto* n = out->mutable_observation_norm();
  for (int64_t size : o.shape()) n->add_shape(size);
  n->set_standard_normal(o.standard_normal());
  if (o.clip()) n->set_clip(*o.clip());
  return true;
}

}  // namespace

extern const NetworkKind kObservationNorm{tdpolicy::Network::kObservationNorm, validate, build, export_network,
                                          "ObservationNorm"};

}  // namespace tdp::policy::kinds
