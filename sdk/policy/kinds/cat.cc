// cat: joins any number of inputs on the last dim (tdp::nn::Cat, through a function taking the
// TensorList of the in_keys).
#include <absl/strings/str_cat.h>

#include <algorithm>

#include "sdk/nn/networks.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const std::string& path = site.path;
  if (site.module.in_keys_size() < 1) return context.fail(path + ".in_keys", "a cat reads at least one key, got 0");
  if (site.module.out_keys_size() != 1) {
    return context.fail(path + ".out_keys", absl::StrCat("a cat writes 1 key(s), got ", site.module.out_keys_size()));
  }
  // Known shapes must agree on all but the last dim; the output's last dim is their sum.
  const std::vector<Shape>& inputs = site.inputs;
  Shape out = inputs[0];
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& in = inputs[i];
    if (in && in->empty()) {
      return context.fail(absl::StrCat(path, ".in_keys[", i, "]"),
                          "a cat input needs at least one dim (it joins on the last)");
    }
    if (i == 0 || !in || !out) {
      if (!in) out = std::nullopt;
      continue;
    }
    if (in->size() != out->size() || !std::equal(in->begin(), in->end() - 1, out->begin())) {
      return context.fail(absl::StrCat(path, ".in_keys[", i, "]"),
                          absl::StrCat("the input has shape ", shape_to_string(*in), " but in_keys[0] has ",
                                       shape_to_string(*inputs[0]), "; a cat needs the same dims but the last"));
    }
    out->back() += in->back();
  }
  outputs.push_back(out);
  return true;
}

ModulePtr build(const tdpolicy::Network&, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  nn::Cat cat;
  return std::make_shared<nn::TensorDictModuleImpl>(
      cat.ptr(), [c = cat.ptr()](nn::TensorList& in) { return nn::TensorList{c->forward(in)}; }, options, "Cat");
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  if (dynamic_cast<const nn::CatImpl*>(&network) == nullptr) return false;
  out->mutable_cat();
  return true;
}

}  // namespace

extern const NetworkKind kCat{tdpolicy::Network::kCat, validate, build, export_network, "Cat"};

}  // namespace tdp::policy::kinds
