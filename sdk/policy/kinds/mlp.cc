// mlp: Linear layers with an activation between them (tdp::nn::Mlp).
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>

#include "sdk/nn/networks.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& mlp = site.module.network().mlp();
  if (!context.arity(site, 1, 1, "an mlp")) return false;
  if (!context.positive(mlp.in_features(), site.kind_path + ".in_features") ||
      !context.positive(mlp.out_features(), site.kind_path + ".out_features")) {
    return false;
  }
  for (int i = 0; i < mlp.hidden_sizes_size(); ++i) {
    if (!context.positive(mlp.hidden_sizes(i), absl::StrCat(site.kind_path, ".hidden_sizes[", i, "]"))) return false;
  }
  double weights = 0;
  double width = mlp.in_features();
  for (int64_t size : mlp.hidden_sizes()) {
    weights += (width + 1) * size;
    width = size;
  }
  if (!context.allocatable(weights + (width + 1) * mlp.out_features(), site.kind_path)) return false;
  double widest = std::max<double>(mlp.in_features(), mlp.out_features());
  for (int64_t size : mlp.hidden_sizes()) widest = std::max<double>(widest, size);
  if (!context.fits_one_tensor(std::vector<int64_t>{static_cast<int64_t>(widest)}, site.kind_path,
                               "its widest layer")) {
    return false;
  }
  const std::string activation = mlp.activation().empty() ? "tanh" : mlp.activation();
  const auto& names = nn::activation_names();
  if (std::find(names.begin(), names.end(), activation) == names.end()) {
    return context.fail(site.kind_path + ".activation", absl::StrCat("unknown activation \"", activation, "\""),
                        absl::StrCat("one of ", absl::StrJoin(names, ", ")));
  }
  if (!context.check_last_dim(site.inputs[0], mlp.in_features(), site.path + ".in_keys[0]", "mlp.in_features")) {
    return false;
  }
  outputs.push_back(with_last(site.inputs[0], mlp.out_features()));
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& m = network.mlp();
  nn::MlpOptions mlp(m.in_features(), std::vector<int64_t>(m.hidden_sizes().begin(), m.hidden_sizes().end()),
                     m.out_features());
  mlp.activation(m.activation().empty() ? "tanh" : m.activation())
      .layer_norm(m.layer_norm())
      .activate_last_layer(m.activate_last_layer());
  return nn::TensorDictModule(nn::Mlp(mlp), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* mlp = dynamic_cast<const nn::MlpImpl*>(&network);
  if (mlp == nullptr) return false;
  const auto& o = mlp->options();
  auto* m = out->mutable_mlp();
  m->set_in_features(o.in_features());
  for (int64_t size : o.hidden_sizes()) m->add_hidden_sizes(size);
  m->set_out_features(o.out_features());
  m->set_activation(o.activation());
  m->set_layer_norm(o.layer_norm());
  m->set_activate_last_layer(o.activate_last_layer());
  return true;
}

}  // namespace

extern const NetworkKind kMlp{tdpolicy::Network::kMlp, validate, build, export_network, "Mlp"};

}  // namespace tdp::policy::kinds
