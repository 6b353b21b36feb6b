#include "sdk/policy/kinds/layers.h"

#include <absl/strings/str_cat.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <stdexcept>

#include "sdk/nn/networks.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

std::vector<NestedKey> numbered(const char* stem, int n) {
  std::vector<NestedKey> keys;
  for (int i = 0; i < n; ++i) keys.emplace_back(absl::StrCat(stem, i));
  return keys;
}

// The network's own forward for the classes that read one tensor; nullopt for the others.
template <typename M, typename... Rest>
std::optional<nn::Layer> direct(const std::shared_ptr<torch::nn::Module>& module) {
  if (auto typed = std::dynamic_pointer_cast<M>(module)) return nn::make_layer(typed);
  if constexpr (sizeof...(Rest) > 0) {
    return direct<Rest...>(module);
  } else {
    return std::nullopt;
  }
}

}  // namespace

bool validate_layer(const tdpolicy::Network& layer, const std::vector<Shape>& inputs, int num_outputs,
                    const std::string& path, ValidationContext& context, std::vector<Shape>& outputs) {
  if (layer.kind_case() == tdpolicy::Network::KIND_NOT_SET) {
    return context.fail(path, "no network kind is set", absl::StrCat("one of ", network_kind_names()));
  }
  const std::string kind_path = absl::StrCat(path, ".", kind_name(layer.kind_case()));
  const NetworkKind* kind = network_kind(layer.kind_case());
  if (kind == nullptr) return context.fail(kind_path, "this SDK has no entry for the network kind");
  // The layer as its kind's validation sees a network: a NetworkModule reading and writing that many keys.
  tdpolicy::NetworkModule site_module;
  for (size_t i = 0; i < inputs.size(); ++i) site_module.add_in_keys(absl::StrCat("input", i));
  for (int i = 0; i < num_outputs; ++i) site_module.add_out_keys(absl::StrCat("output", i));
  *site_module.mutable_network() = layer;
  outputs.clear();
  if (!kind->validate(NetworkSite{site_module, inputs, path, kind_path}, context, outputs)) return false;
  if (static_cast<int>(outputs.size()) != num_outputs) {
    return context.fail(path + ".out_keys", absl::StrCat("expected ", num_outputs, " outputs, got ", outputs.size()));
  }
  return true;
}

nn::Layer build_layer(const tdpolicy::Network& layer, int num_inputs, int num_outputs, const BuildContext& context) {
  const NetworkKind* kind = network_kind(layer.kind_case());
  if (kind == nullptr) throw std::invalid_argument("no network kind is set");
  const std::vector<NestedKey> in_keys = numbered("input", num_inputs);
  const std::vector<NestedKey> out_keys = numbered("output", num_outputs);
  ModulePtr built = kind->build(layer, nn::TensorDictModuleOptions(in_keys, out_keys), context);
  auto td_module = std::dynamic_pointer_cast<nn::TensorDictModuleImpl>(built);
  const std::shared_ptr<torch::nn::Module> network = td_module != nullptr && td_module->module() != nullptr
                                                         ? td_module->module()
                                                         : std::shared_ptr<torch::nn::Module>(built);
  if (auto sequence = std::dynamic_pointer_cast<nn::SequenceImpl>(network)) {
    return nn::Layer{sequence, [sequence](nn::TensorList& in) { return sequence->forward(in); }};
  }
  if (num_inputs == 1) {
    auto layer_of =
        direct<torch::nn::LinearImpl, torch::nn::LayerNormImpl, nn::MlpImpl, nn::ActivationImpl, nn::Conv2dImpl,
               nn::FlattenImpl, nn::MappingModuleImpl, nn::NormalParamExtractorImpl, nn::DuelingImpl>(network);
    if (layer_of) return *layer_of;
  }
  // Any other kind runs through the TensorDictModule its entry built, on a TensorDict of its own.
  return nn::Layer{network, [built, in_keys, out_keys](nn::TensorList& in) {
                     TensorDict tensordict;
                     for (size_t i = 0; i < in_keys.size(); ++i) tensordict.set(in_keys[i], in[i]);
                     const TensorDict result = built->forward(tensordict);
                     nn::TensorList out;
                     for (const NestedKey& key : out_keys) out.push_back(result.get(key));
                     return out;
                   }};
}

bool export_layer(const torch::nn::Module& network, tdpolicy::Network* out) {
  for (const NetworkKind* kind : network_kinds()) {
    if (kind->export_network != nullptr && kind->export_network(network, out)) return true;
  }
  return false;
}

}  // namespace tdp::policy::kinds
