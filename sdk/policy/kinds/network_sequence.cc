// sequence: networks applied in order, each layer's output feeding the next (tdp::nn::Sequence,
// Python's nn.Sequential). The file is not sequence.cc: that one holds what sequential.cc and
// probabilistic_sequential.cc share.
#include <absl/strings/str_cat.h>

#include "sdk/nn/layers.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/layers.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& sequence = site.module.network().sequence();
  if (sequence.layers().empty()) return context.fail(site.kind_path + ".layers", "a sequence needs at least one layer");
  if (site.module.in_keys().empty()) return context.fail(site.path + ".in_keys", "a sequence reads at least one key");
  if (site.module.out_keys().empty())
    return context.fail(site.path + ".out_keys", "a sequence writes at least one key");
  std::vector<Shape> values = site.inputs;
  for (int i = 0; i < sequence.layers_size(); ++i) {
    const bool last = i + 1 == sequence.layers_size();
    std::vector<Shape> next;
    if (!validate_layer(sequence.layers(i), values, last ? site.module.out_keys_size() : 1,
                        absl::StrCat(site.kind_path, ".layers[", i, "]"), context, next)) {
      return false;
    }
    values = std::move(next);
  }
  outputs = std::move(values);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options,
                const BuildContext& context) {
  const auto& layers = network.sequence().layers();
  nn::Sequence sequence;
  for (int i = 0; i < layers.size(); ++i) {
    const bool last = i + 1 == layers.size();
    sequence->push_back(build_layer(layers[i], i == 0 ? static_cast<int>(options.in_keys().size()) : 1,
                                    last ? static_cast<int>(options.out_keys().size()) : 1, context));
  }
  auto module = sequence.ptr();
  return nn::TensorDictModule(
             module, [module](nn::TensorList& in) { return module->forward(in); }, options, "Sequence")
      .ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* sequence = dynamic_cast<const nn::SequenceImpl*>(&network);
  if (sequence == nullptr) return false;
  tdpolicy::Sequence spec;
  for (const nn::Layer& layer : sequence->layers()) {
    if (!export_layer(*layer.module, spec.add_layers())) return false;
  }
  *out->mutable_sequence() = std::move(spec);
  return true;
}

}  // namespace

extern const NetworkKind kSequence{tdpolicy::Network::kSequence, validate, build, export_network, "Sequence"};

}  // namespace tdp::policy::kinds
