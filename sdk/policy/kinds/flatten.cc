// flatten: joins the last num_dims dims into one (tdp::nn::Flatten; TorchRL's SquashDims).
#include <absl/strings/str_cat.h>

#include "sdk/nn/layers.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const int64_t n = site.module.network().flatten().num_dims();
  if (!context.arity(site, 1, 1, "a flatten")) return false;
  if (!context.positive(n, site.kind_path + ".num_dims")) return false;
  const Shape& in = site.inputs[0];
  if (!in) {
    outputs.push_back(std::nullopt);
    return true;
  }
  if (static_cast<int64_t>(in->size()) < n) {
    return context.fail(site.path + ".in_keys[0]",
                        absl::StrCat("the input has shape ", shape_to_string(*in), ", fewer dims than the ", n,
                                     " flatten.num_dims joins"),
                        "flatten joins per-environment dims; the batch dims are not in the declared shape");
  }
  std::vector<int64_t> out(in->begin(), in->end() - n);
  int64_t joined = 1;
  for (auto it = in->end() - n; it != in->end(); ++it) joined *= *it;
  out.push_back(joined);
  outputs.push_back(std::move(out));
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  return nn::TensorDictModule(nn::Flatten(network.flatten().num_dims()), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* flatten = dynamic_cast<const nn::FlattenImpl*>(&network);
  if (flatten == nullptr) return false;
  out->mutable_flatten()->set_num_dims(flatten->num_dims());
  return true;
}

}  // namespace

extern const NetworkKind kFlatten{tdpolicy::Network::kFlatten, validate, build, export_network, "Flatten"};

}  // namespace tdp::policy::kinds
