// to_dtype: x.to(dtype), TorchRL's DoubleToFloat (tdp::nn::ToDtype).
#include <absl/strings/str_cat.h>

#include "sdk/nn/transforms.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  if (!context.arity(site, 1, 1, "a to_dtype")) return false;
  const tdpolicy::DType dtype = site.module.network().to_dtype().dtype();
  const std::optional<at::ScalarType> scalar = scalar_type(dtype);
  if (!scalar || !at::isFloatingType(*scalar)) {
    return context.fail(
        site.kind_path + ".dtype",
        absl::StrCat("a to_dtype casts to a floating dtype, got ",
                     tdpolicy::DType_IsValid(dtype) ? tdpolicy::DType_Name(dtype) : std::to_string(dtype)),
        "FLOAT32, FLOAT64, FLOAT16 or BFLOAT16");
  }
  outputs.push_back(site.inputs[0]);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  return nn::TensorDictModule(nn::ToDtype(*scalar_type(network.to_dtype().dtype())), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* cast = dynamic_cast<const nn::ToDtypeImpl*>(&network);
  if (cast == nullptr) return false;
  const std::optional<tdpolicy::DType> dtype = proto_dtype(cast->dtype());
  if (!dtype) return false;
  out->mutable_to_dtype()->set_dtype(*dtype);
  return true;
}

}  // namespace

extern const NetworkKind kToDtype{tdpolicy::Network::kToDtype, validate, build, export_network, "ToDtype"};

}  // namespace tdp::policy::kinds
