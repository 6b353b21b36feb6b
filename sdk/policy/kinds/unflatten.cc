// unflatten: splits the last dim into sizes (torch::nn::Unflatten over dim -1; torch.nn.Unflatten
// and TorchRL's MLP with a tuple out_features).
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <torch/nn/modules/linear.h>

#include <limits>

#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& sizes = site.module.network().unflatten().sizes();
  const std::string p = site.kind_path + ".sizes";
  if (!context.arity(site, 1, 1, "an unflatten")) return false;
  if (sizes.empty()) return context.fail(p, "an unflatten splits the last dim into at least one size");
  int64_t product = 1;
  for (int i = 0; i < sizes.size(); ++i) {
    if (!context.positive(sizes[i], absl::StrCat(p, "[", i, "]"))) return false;
    if (product > std::numeric_limits<int64_t>::max() / sizes[i]) {
      return context.fail(p, absl::StrCat("the sizes [", absl::StrJoin(sizes, ", "), "] multiply past int64"));
    }
    product *= sizes[i];
  }
  const Shape& in = site.inputs[0];
  if (!in) {
    outputs.push_back(std::nullopt);
    return true;
  }
  if (in->empty() || in->back() != product) {
    return context.fail(p,
                        absl::StrCat("the sizes [", absl::StrJoin(sizes, ", "), "] multiply to ", product,
                                     " but the input has per-environment shape ", shape_to_string(*in)),
                        in->empty() ? "an unflatten splits a per-environment dim; the input has none"
                                    : absl::StrCat("sizes whose product is the input's last dim, ", in->back()));
  }
  std::vector<int64_t> out(in->begin(), in->end() - 1);
  out.insert(out.end(), sizes.begin(), sizes.end());
  outputs.push_back(std::move(out));
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& sizes = network.unflatten().sizes();
  return nn::TensorDictModule(
             torch::nn::Unflatten(torch::nn::UnflattenOptions(-1, std::vector<int64_t>(sizes.begin(), sizes.end()))),
             options)
      .ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* unflatten = dynamic_cast<const torch::nn::UnflattenImpl*>(&network);
  if (unflatten == nullptr || unflatten->options.dim() != -1 || !unflatten->options.dimname().empty()) return false;
  for (int64_t size : unflatten->options.sizes()) out->mutable_unflatten()->add_sizes(size);
  return true;
}

}  // namespace

extern const NetworkKind kUnflatten{tdpolicy::Network::kUnflatten, validate, build, export_network, "Unflatten"};

}  // namespace tdp::policy::kinds
