#include "sdk/policy/kinds/action_spec.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <absl/strings/str_cat.h>

#include <stdexcept>

#include "sdk/policy/keys.h"
#include "sdk/policy/tensor_proto.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

// TorchRL's default dtypes: Bounded float32, OneHot bool, Categorical int64.
at::ScalarType dtype_of(const tdpolicy::ActionSpec& spec) {
  if (spec.dtype() != tdpolicy::DTYPE_UNSPECIFIED) return *scalar_type(spec.dtype());
  switch (spec.kind_case()) {
    case tdpolicy::ActionSpec::kOneHot:
      return at::kBool;
    case tdpolicy::ActionSpec::kCategorical:
      return at::kLong;
    default:
      return at::kFloat;
  }
}

std::string shape_text(const at::Tensor& tensor) { return shape_to_string(tensor.sizes()); }

}  // namespace

std::optional<at::Tensor> constant_tensor(const tdpolicy::TensorProto& proto, const std::string& path,
                                          const std::string& what, ValidationContext& context, bool infinite_ok) {
  if (!context.declared(proto.shape(), path + ".shape", what)) return std::nullopt;
  absl::StatusOr<at::Tensor> tensor = from_tensor_proto(proto);
  if (!tensor.ok()) {
    context.fail(path, std::string(tensor.status().message()));
    return std::nullopt;
  }
  if (!at::isFloatingType(tensor->scalar_type())) {
    context.fail(path, absl::StrCat(what, " has dtype ", c10::toString(tensor->scalar_type())),
                 "give a floating-point tensor");
    return std::nullopt;
  }
  const bool bad = infinite_ok ? tensor->isnan().any().item<bool>() : !tensor->isfinite().all().item<bool>();
  if (bad) {
    context.fail(path, absl::StrCat(what, " holds ", infinite_ok ? "NaN" : "a NaN or infinite value"));
    return std::nullopt;
  }
  return *tensor;
}

bool broadcasts_onto(const at::Tensor& tensor, const Shape& shape, const std::string& path, const std::string& what,
                     ValidationContext& context) {
  if (!shape) return true;
  const int64_t dims = static_cast<int64_t>(shape->size());
  bool ok = tensor.dim() <= dims;
  for (int64_t i = 1; ok && i <= tensor.dim(); ++i) {
    ok = tensor.size(-i) == 1 || tensor.size(-i) == (*shape)[dims - i];
  }
  if (ok) return true;
  return context.fail(path,
                      absl::StrCat(what, " of shape ", shape_text(tensor),
                                   " does not broadcast onto the per-environment shape ", shape_to_string(*shape)),
                      "give one value, one per last dim, or the full per-environment shape");
}

bool ordered(const at::Tensor& low, const at::Tensor& high, bool strict, const std::string& path,
             ValidationContext& context) {
  std::vector<int64_t> shape;
  try {
    shape = at::infer_size(low.sizes(), high.sizes());
  } catch (const std::exception&) {
    return context.fail(path, absl::StrCat("low of shape ", shape_text(low), " and high of shape ", shape_text(high),
                                           " do not broadcast together"));
  }
  const bool ok = strict ? (low < high).all().item<bool>() : (low <= high).all().item<bool>();
  if (ok) return true;
  return context.fail(path, strict ? "low must be less than high everywhere" : "low must not exceed high anywhere");
}

at::Tensor constant(const tdpolicy::TensorProto& proto) {
  absl::StatusOr<at::Tensor> tensor = from_tensor_proto(proto);
  if (!tensor.ok()) throw std::invalid_argument(std::string(tensor.status().message()));
  return *tensor;
}

bool validate_action_spec(const tdpolicy::ActionSpec& spec, const std::string& path, ValidationContext& context) {
  if (spec.dtype() != tdpolicy::DTYPE_UNSPECIFIED && !scalar_type(spec.dtype())) {
    return context.fail(path + ".dtype", absl::StrCat("unknown dtype ", static_cast<int>(spec.dtype())));
  }
  if (!context.declared(spec.shape(), path + ".shape", "the spec's shape")) return false;
  const Shape shape = std::vector<int64_t>(spec.shape().begin(), spec.shape().end());
  switch (spec.kind_case()) {
    case tdpolicy::ActionSpec::kBounded: {
      const std::string field = path + ".bounded";
      if (!spec.bounded().has_low() || !spec.bounded().has_high()) {
        return context.fail(field, "a bounded spec needs low and high");
      }
      auto low = constant_tensor(spec.bounded().low(), field + ".low", "the spec's low", context, true);
      if (!low) return false;
      auto high = constant_tensor(spec.bounded().high(), field + ".high", "the spec's high", context, true);
      if (!high) return false;
      return broadcasts_onto(*low, shape, field + ".low", "the spec's low", context) &&
             broadcasts_onto(*high, shape, field + ".high", "the spec's high", context) &&
             ordered(*low, *high, /*strict=*/false, field + ".low", context);
    }
    case tdpolicy::ActionSpec::kOneHot: {
      const int64_t n = spec.one_hot().n();
      if (!context.positive(n, path + ".one_hot.n")) return false;
      if (!spec.shape().empty() && spec.shape(spec.shape_size() - 1) != n) {
        return context.fail(path + ".shape", absl::StrCat("a one_hot spec's last dim must be n (", n, "), got ",
                                                          spec.shape(spec.shape_size() - 1)));
      }
      return true;
    }
    case tdpolicy::ActionSpec::kCategorical:
      return context.positive(spec.categorical().n(), path + ".categorical.n");
    case tdpolicy::ActionSpec::KIND_NOT_SET:
      break;
  }
  return context.fail(path, "no spec kind is set", "one of bounded, one_hot, categorical");
}

bool validate_projections(const tdpolicy::Module& module, const std::string& path, ValidationContext& context) {
  for (int i = 0; i < module.projections_size(); ++i) {
    const tdpolicy::SpecProjection& projection = module.projections(i);
    const std::string field = absl::StrCat(path, ".projections[", i, "]");
    auto key = context.key_at(projection.key(), field + ".key");
    if (!key) return false;
    if (!context.is_written(*key)) {
      return context.fail(field + ".key",
                          absl::StrCat("the projected key \"", projection.key(), "\" is not written by the module"),
                          absl::StrCat("project one of its outputs; written so far: ", context.written_list()));
    }
    if (!validate_action_spec(projection.spec(), field + ".spec", context)) return false;
  }
  return true;
}

nn::TensorSpec tensor_spec_of(const tdpolicy::ActionSpec& spec) {
  std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
  const at::ScalarType dtype = dtype_of(spec);
  switch (spec.kind_case()) {
    case tdpolicy::ActionSpec::kBounded:
      return nn::TensorSpec::bounded(constant(spec.bounded().low()), constant(spec.bounded().high()), shape, dtype);
    case tdpolicy::ActionSpec::kOneHot:
      return nn::TensorSpec::one_hot(spec.one_hot().n(), shape, dtype);
    case tdpolicy::ActionSpec::kCategorical:
      return nn::TensorSpec::categorical(spec.categorical().n(), shape, dtype);
    case tdpolicy::ActionSpec::KIND_NOT_SET:
      break;
  }
  throw std::invalid_argument("ActionSpec: no spec kind is set");
}

tdpolicy::ActionSpec action_spec_of(const nn::TensorSpec& spec) {
  tdpolicy::ActionSpec out;
  for (int64_t size : spec.shape()) out.add_shape(size);
  if (auto dtype = proto_dtype(spec.dtype())) out.set_dtype(*dtype);
  switch (spec.kind()) {
    case nn::TensorSpec::Kind::kBounded:
      *out.mutable_bounded()->mutable_low() = to_tensor_proto(spec.low());
      *out.mutable_bounded()->mutable_high() = to_tensor_proto(spec.high());
      break;
    case nn::TensorSpec::Kind::kOneHot:
      out.mutable_one_hot()->set_n(spec.n());
      break;
    case nn::TensorSpec::Kind::kCategorical:
      out.mutable_categorical()->set_n(spec.n());
      break;
  }
  return out;
}

std::vector<nn::SpecProjection> projections_of(const tdpolicy::Module& module) {
  std::vector<nn::SpecProjection> projections;
  for (const auto& projection : module.projections()) {
    projections.push_back({*parse_key(projection.key()), tensor_spec_of(projection.spec())});
  }
  return projections;
}

void add_projections(const std::vector<nn::SpecProjection>& projections, tdpolicy::Module* out) {
  for (const nn::SpecProjection& projection : projections) {
    tdpolicy::SpecProjection* added = out->add_projections();
    added->set_key(key_string(projection.key));
    *added->mutable_spec() = action_spec_of(projection.spec);
  }
}

}  // namespace tdp::policy::kinds
