// to_tensor_image: TorchRL's ToTensorImage, [..., H, W, C] -> float32 [..., C, H, W]
// (tdp::nn::ToTensorImage).
#include "sdk/nn/transforms.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  if (!context.arity(site, 1, 1, "a to_tensor_image")) return false;
  Shape out = site.inputs[0];
  if (out) {
    if (out->size() < 3) {
      return context.fail(site.path + ".in_keys[0]",
                          "a to_tensor_image reads an image [..., H, W, C], got shape " + shape_to_string(*out));
    }
    const size_t n = out->size();
    const int64_t h = (*out)[n - 3], w = (*out)[n - 2], c = (*out)[n - 1];
    (*out)[n - 3] = c;
    (*out)[n - 2] = h;
    (*out)[n - 1] = w;
  }
  outputs.push_back(out);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  return nn::TensorDictModule(nn::ToTensorImage(network.to_tensor_image().from_int()), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* image = dynamic_cast<const nn::ToTensorImageImpl*>(&network);
  if (image == nullptr) return false;
  out->mutable_to_tensor_image()->set_from_int(image->from_int());
  return true;
}

}  // namespace

extern const NetworkKind kToTensorImage{tdpolicy::Network::kToTensorImage, validate, build, export_network,
                                        "ToTensorImage"};

}  // namespace tdp::policy::kinds
