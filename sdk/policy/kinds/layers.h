// Internal to sdk/policy: a network inside another network (a sequence's layer, a dueling's
// branch). Each is validated, built and exported by its own kind's entry, as if a NetworkModule
// wrapped it, so that any network kind can be a layer.
//
//   std::vector<Shape> out;
//   if (!validate_layer(spec.layers(0), site.inputs, 1, kind_path + ".layers[0]", context, out)) return false;
//   nn::Layer layer = build_layer(spec.layers(0), 1, 1, context);
//   export_layer(*layer.module, out_spec.add_layers());
#pragma once

#include <string>
#include <vector>

#include "sdk/nn/layers.h"
#include "sdk/policy/kinds/kind.h"

namespace tdp::policy::kinds {

// Checks `layer` reading `inputs` and writing `num_outputs` tensors, and gives their shapes.
// `path` is the layer's field path ("module.network.network.sequence.layers[2]"); its kind's
// errors name the layer's input and output counts `<path>.in_keys` and `<path>.out_keys`.
bool validate_layer(const tdpolicy::Network& layer, const std::vector<Shape>& inputs, int num_outputs,
                    const std::string& path, ValidationContext& context, std::vector<Shape>& outputs);

// The network of a validated `layer` and its call from `num_inputs` tensors to `num_outputs`.
nn::Layer build_layer(const tdpolicy::Network& layer, int num_inputs, int num_outputs, const BuildContext& context);

// Writes `network` as the network kind that claims it; false (out untouched) when none does.
bool export_layer(const torch::nn::Module& network, tdpolicy::Network* out);

}  // namespace tdp::policy::kinds
