// multi_agent_mlp: TorchRL's MultiAgentMLP (tdp::nn::MultiAgentMlp), reading any number of keys
// joined on the last dim ([..., n_agents, n_agent_inputs] in all) and writing
// [..., n_agents, n_agent_outputs].
#include "sdk/nn/multi_agent_mlp.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>

#include "sdk/nn/networks.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& m = site.module.network().multi_agent_mlp();
  const std::string& kind_path = site.kind_path;
  if (site.module.in_keys_size() < 1) {
    return context.fail(site.path + ".in_keys", "a multi_agent_mlp reads at least one key, got 0");
  }
  if (site.module.out_keys_size() != 1) {
    return context.fail(site.path + ".out_keys",
                        absl::StrCat("a multi_agent_mlp writes 1 key(s), got ", site.module.out_keys_size()));
  }
  if (!context.positive(m.n_agents(), kind_path + ".n_agents") ||
      !context.positive(m.n_agent_inputs(), kind_path + ".n_agent_inputs") ||
      !context.positive(m.n_agent_outputs(), kind_path + ".n_agent_outputs")) {
    return false;
  }
  const auto& mlp = m.mlp();
  const int64_t in_features = m.n_agent_inputs() * (m.centralized() ? m.n_agents() : 1);
  if (mlp.in_features() != in_features) {
    return context.fail(
        kind_path + ".mlp.in_features",
        absl::StrCat("is ", mlp.in_features(), " but each agent's network reads ", in_features,
                     m.centralized() ? " (n_agents * n_agent_inputs, centralized)" : " (n_agent_inputs)"));
  }
  if (mlp.out_features() != m.n_agent_outputs()) {
    return context.fail(kind_path + ".mlp.out_features",
                        absl::StrCat("is ", mlp.out_features(), " but n_agent_outputs is ", m.n_agent_outputs()));
  }
  if (mlp.layer_norm()) {
    return context.fail(kind_path + ".mlp.layer_norm", "a multi_agent_mlp's agent networks have no LayerNorm");
  }
  for (int i = 0; i < mlp.hidden_sizes_size(); ++i) {
    if (!context.positive(mlp.hidden_sizes(i), absl::StrCat(kind_path, ".mlp.hidden_sizes[", i, "]"))) return false;
  }
  const std::string activation = mlp.activation().empty() ? "tanh" : mlp.activation();
  const auto& names = nn::activation_names();
  if (std::find(names.begin(), names.end(), activation) == names.end()) {
    return context.fail(kind_path + ".mlp.activation", absl::StrCat("unknown activation \"", activation, "\""),
                        absl::StrCat("one of ", absl::StrJoin(names, ", ")));
  }
  double weights = 0, width = static_cast<double>(in_features), widest = width;
  for (int64_t size : mlp.hidden_sizes()) {
    weights += (width + 1) * size;
    width = size;
    widest = std::max<double>(widest, size);
  }
  weights += (width + 1) * m.n_agent_outputs();
  const double copies = m.share_params() ? 1 : static_cast<double>(m.n_agents());
  if (!context.allocatable(weights * copies, kind_path)) return false;
  if (!context.fits_one_tensor(std::vector<int64_t>{m.n_agents(), static_cast<int64_t>(widest)}, kind_path,
                               "its widest layer over all agents")) {
    return false;
  }
  // The inputs join on the last dim into [..., n_agents, n_agent_inputs].
  Shape out;
  int64_t joined = 0;
  bool known = true;
  for (size_t i = 0; i < site.inputs.size(); ++i) {
    const Shape& in = site.inputs[i];
    const std::string where = absl::StrCat(site.path, ".in_keys[", i, "]");
    if (!in) {
      known = false;
      continue;
    }
    if (in->size() < 2 || (*in)[in->size() - 2] != m.n_agents()) {
      return context.fail(where, absl::StrCat("a multi_agent_mlp reads [..., n_agents=", m.n_agents(),
                                              ", features], got shape ", shape_to_string(*in)));
    }
    joined += in->back();
    if (!out) out = in;
  }
  if (known && joined != m.n_agent_inputs()) {
    return context.fail(site.path + ".in_keys", absl::StrCat("the inputs' last dims add up to ", joined,
                                                             " but n_agent_inputs is ", m.n_agent_inputs()));
  }
  outputs.push_back(out ? with_last(out, m.n_agent_outputs())
                        : Shape(std::vector<int64_t>{m.n_agents(), m.n_agent_outputs()}));
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& m = network.multi_agent_mlp();
  nn::MultiAgentMlpOptions o(m.n_agents(), m.n_agent_inputs(), m.n_agent_outputs(),
                             std::vector<int64_t>(m.mlp().hidden_sizes().begin(), m.mlp().hidden_sizes().end()));
  o.centralized(m.centralized())
      .share_params(m.share_params())
      .activation(m.mlp().activation().empty() ? "tanh" : m.mlp().activation())
      .activate_last_layer(m.mlp().activate_last_layer());
  nn::MultiAgentMlp mlp(o);
  return std::make_shared<nn::TensorDictModuleImpl>(
      mlp.ptr(), [p = mlp.ptr()](nn::TensorList& in) { return nn::TensorList{p->forward(in)}; }, options,
      "MultiAgentMlp");
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* multi = dynamic_cast<const nn::MultiAgentMlpImpl*>(&network);
  if (multi == nullptr) return false;
  const auto& o = multi->options();
  auto* m = out->mutable_multi_agent_mlp();
  m->set_n_agents(o.n_agents());
  m->set_n_agent_inputs(o.n_agent_inputs());
  m->set_n_agent_outputs(o.n_agent_outputs());
  m->set_centralized(o.centralized());
  m->set_share_params(o.share_params());
  auto* mlp = m->mutable_mlp();
  mlp->set_in_features(multi->agent_in_features());
  for (int64_t size : o.hidden_sizes()) mlp->add_hidden_sizes(size);
  mlp->set_out_features(o.n_agent_outputs());
  mlp->set_activation(o.activation());
  mlp->set_activate_last_layer(o.activate_last_layer());
  return true;
}

}  // namespace

extern const NetworkKind kMultiAgentMlp{tdpolicy::Network::kMultiAgentMlp, validate, build, export_network,
                                        "MultiAgentMlp"};

}  // namespace tdp::policy::kinds
