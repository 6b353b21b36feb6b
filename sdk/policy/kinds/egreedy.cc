// egreedy: epsilon-greedy exploration under the RANDOM interaction type, TorchRL's EGreedyModule
// with its eps frozen (tdp::nn::EGreedyModule).
#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <stdexcept>

#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/policy/tensor_proto.h"
#include "sdk/probabilistic/egreedy_module.h"

namespace tdp::policy::kinds {
namespace {

// The dtype of the spec's random actions: its own, else TorchRL's default for the kind.
at::ScalarType spec_dtype(const tdpolicy::ActionSpec& spec) {
  if (spec.dtype() != tdpolicy::DTYPE_UNSPECIFIED) {
    if (auto dtype = scalar_type(spec.dtype())) return *dtype;
  }
  switch (spec.kind_case()) {
    case tdpolicy::ActionSpec::kOneHot:
      return at::kBool;
    case tdpolicy::ActionSpec::kCategorical:
      return at::kLong;
    default:
      return at::kFloat;
  }
}

bool validate_bound(const tdpolicy::TensorProto& proto, const std::string& path, ValidationContext& context) {
  if (!context.declared(proto.shape(), path, "the bound")) return false;
  absl::StatusOr<at::Tensor> bound = from_tensor_proto(proto);
  if (!bound.ok()) return context.fail(path, std::string(bound.status().message()));
  if (!bound->is_floating_point() || !at::isfinite(*bound).all().item<bool>()) {
    return context.fail(path, "expected finite floating-point values");
  }
  return true;
}

bool validate(const tdpolicy::Module& module, const std::string& module_path, const std::set<NestedKey>& overwrites,
              ValidationContext& context) {
  const tdpolicy::EGreedy& spec = module.egreedy();
  const std::string path = module_path + ".egreedy";
  if (!context.finite(spec.eps(), path + ".eps")) return false;
  if (spec.eps() < 0 || spec.eps() > 1) {
    return context.fail(path + ".eps", absl::StrCat("eps ", spec.eps(), " is not a probability"), "0 <= eps <= 1");
  }
  const std::string action_text = spec.action_key().empty() ? "action" : spec.action_key();
  auto read = context.read(action_text, path + ".action_key");
  if (!read) return false;
  const Shape action = *read;
  const tdpolicy::ActionSpec& action_spec = spec.spec();
  const std::string spec_path = path + ".spec";
  if (!spec.has_spec() || action_spec.kind_case() == tdpolicy::ActionSpec::KIND_NOT_SET) {
    return context.fail(spec_path, "no action spec: random actions are drawn from it",
                        "one_hot { n: ... }, categorical { n: ... } or bounded { low high }");
  }
  if (action_spec.dtype() != tdpolicy::DTYPE_UNSPECIFIED && !scalar_type(action_spec.dtype())) {
    return context.fail(spec_path + ".dtype", absl::StrCat("unknown dtype ", static_cast<int>(action_spec.dtype())));
  }
  const at::ScalarType dtype = spec_dtype(action_spec);
  int64_t n = 0;
  if (action_spec.has_one_hot() || action_spec.has_categorical()) {
    const bool one_hot = action_spec.has_one_hot();
    n = one_hot ? action_spec.one_hot().n() : action_spec.categorical().n();
    const std::string n_path = absl::StrCat(spec_path, one_hot ? ".one_hot" : ".categorical", ".n");
    if (!context.positive(n, n_path)) return false;
    if (one_hot && action && (action->empty() || action->back() != n)) {
      return context.fail(path + ".action_key",
                          absl::StrCat("a one_hot spec of ", n, " actions replaces one-hot actions [..., ", n,
                                       "]; the action has per-environment shape [", absl::StrJoin(*action, ", "), "]"),
                          "a categorical spec for integer actions");
    }
    // A random draw makes [..., n] weights (a mask's) or one-hot values per action.
    if (!context.fits_one_tensor(with_last(action, n), n_path, "the random actions' one-hot or mask")) return false;
  } else {
    const std::string bounded = spec_path + ".bounded";
    if (!validate_bound(action_spec.bounded().low(), bounded + ".low", context) ||
        !validate_bound(action_spec.bounded().high(), bounded + ".high", context)) {
      return false;
    }
    if (!at::isFloatingType(dtype)) {
      return context.fail(spec_path + ".dtype", absl::StrCat("a bounded spec of dtype ", c10::toString(dtype)),
                          "a floating-point dtype");
    }
    if (!spec.action_mask_key().empty()) {
      return context.fail(path + ".action_mask_key", "an action mask needs a one_hot or categorical spec");
    }
  }
  // TorchRL expands the spec to the action: its shape must end the action's.
  if (action && action_spec.shape_size() > 0) {
    const std::vector<int64_t> shape(action_spec.shape().begin(), action_spec.shape().end());
    if (action->size() < shape.size() || !std::equal(shape.begin(), shape.end(), action->end() - shape.size())) {
      return context.fail(spec_path + ".shape", absl::StrCat("the spec's shape [", absl::StrJoin(shape, ", "),
                                                             "] does not end the action's per-environment shape [",
                                                             absl::StrJoin(*action, ", "), "]"));
    }
  }
  if (!spec.action_mask_key().empty()) {
    auto mask = context.read(spec.action_mask_key(), path + ".action_mask_key");
    if (!mask) return false;
    if (!context.check_last_dim(*mask, n, path + ".action_mask_key", "the spec's n")) return false;
  }
  // The action is replaced where it was read.
  auto key = context.key_at(action_text, path + ".action_key");
  if (!key) return false;
  std::set<NestedKey> rewritten = overwrites;
  rewritten.insert(*key);
  return context.write(action_text, path + ".action_key", action, rewritten);
}

at::Tensor bound_of(const tdpolicy::TensorProto& proto, const std::string& path) {
  absl::StatusOr<at::Tensor> bound = from_tensor_proto(proto);
  if (!bound.ok()) throw std::invalid_argument(absl::StrCat(path, ": ", bound.status().message()));
  return *bound;
}

ModulePtr build(const tdpolicy::Module& module, const std::string& path, const BuildContext&) {
  const tdpolicy::EGreedy& spec = module.egreedy();
  const tdpolicy::ActionSpec& action_spec = spec.spec();
  const at::ScalarType dtype = spec_dtype(action_spec);
  nn::ActionSpec random;
  if (action_spec.has_one_hot()) {
    random = nn::ActionSpec::one_hot(action_spec.one_hot().n(), dtype);
  } else if (action_spec.has_categorical()) {
    random = nn::ActionSpec::categorical(action_spec.categorical().n(), dtype);
  } else {
    const std::string bounded = path + ".egreedy.spec.bounded";
    random = nn::ActionSpec::bounded(bound_of(action_spec.bounded().low(), bounded + ".low"),
                                     bound_of(action_spec.bounded().high(), bounded + ".high"), dtype);
  }
  random.shape.assign(action_spec.shape().begin(), action_spec.shape().end());
  nn::EGreedyModuleOptions options(random);
  options.eps(spec.eps());
  if (!spec.action_key().empty()) options.action_key(*parse_key(spec.action_key()));
  if (!spec.action_mask_key().empty()) options.action_mask_key(*parse_key(spec.action_mask_key()));
  return nn::EGreedyModule(options).ptr();
}

bool export_module(const nn::TensorDictModuleBase& base, tdpolicy::Module* out, const std::string& path,
                   ExportContext& context) {
  auto* module = dynamic_cast<const nn::EGreedyModuleImpl*>(&base);
  if (module == nullptr) return false;
  const nn::EGreedyModuleOptions& options = module->options();
  tdpolicy::EGreedy* spec = out->mutable_egreedy();
  spec->set_eps(options.eps());
  spec->set_action_key(key_string(options.action_key()));
  if (options.action_mask_key()) spec->set_action_mask_key(key_string(*options.action_mask_key()));
  const nn::ActionSpec& random = options.spec();
  tdpolicy::ActionSpec* action_spec = spec->mutable_spec();
  switch (random.kind) {
    case nn::ActionSpec::Kind::kOneHot:
      action_spec->mutable_one_hot()->set_n(random.n);
      break;
    case nn::ActionSpec::Kind::kCategorical:
      action_spec->mutable_categorical()->set_n(random.n);
      break;
    case nn::ActionSpec::Kind::kBounded:
      *action_spec->mutable_bounded()->mutable_low() = to_tensor_proto(random.low);
      *action_spec->mutable_bounded()->mutable_high() = to_tensor_proto(random.high);
      break;
  }
  for (int64_t size : random.shape) action_spec->add_shape(size);
  std::optional<tdpolicy::DType> dtype = proto_dtype(random.dtype);
  if (!dtype) {
    throw std::invalid_argument(absl::StrCat(path, ": an action spec of dtype ", c10::toString(random.dtype),
                                             ", which a spec has no name for"));
  }
  action_spec->set_dtype(*dtype);
  context.mark_overwrites(module->out_keys_source(), out);
  return true;
}

}  // namespace

extern const ModuleKind kEGreedy{tdpolicy::Module::kEgreedy, validate, build, export_module};

}  // namespace tdp::policy::kinds
