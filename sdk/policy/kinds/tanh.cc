// tanh: TorchRL's TanhModule, each in_key's value mapped onto [low, high] through tanh
// (tdp::nn::TanhModule).
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <absl/strings/str_cat.h>

#include "sdk/nn/tanh_module.h"
#include "sdk/policy/kinds/action_spec.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const tdpolicy::Module& module, const std::string& module_path, const std::set<NestedKey>& overwrites,
              ValidationContext& context) {
  const tdpolicy::TanhModule& spec = module.tanh();
  const std::string path = module_path + ".tanh";
  if (spec.in_keys_size() == 0) return context.fail(path + ".in_keys", "a tanh module reads at least one key");
  if (spec.out_keys_size() > 0 && spec.out_keys_size() != spec.in_keys_size()) {
    return context.fail(path + ".out_keys",
                        absl::StrCat("a tanh module writes one key per in_key: ", spec.in_keys_size(), " in_keys, ",
                                     spec.out_keys_size(), " out_keys"));
  }
  if (spec.bounds_size() > 0 && spec.bounds_size() != spec.in_keys_size()) {
    return context.fail(path + ".bounds", absl::StrCat("one bounds entry per out_key or none: ", spec.bounds_size(),
                                                       " for ", spec.in_keys_size(), " keys"));
  }
  std::vector<Shape> shapes;
  for (int i = 0; i < spec.in_keys_size(); ++i) {
    auto shape = context.read(spec.in_keys(i), absl::StrCat(path, ".in_keys[", i, "]"));
    if (!shape) return false;
    shapes.push_back(*shape);
  }
  for (int i = 0; i < spec.bounds_size(); ++i) {
    const std::string field = absl::StrCat(path, ".bounds[", i, "]");
    const tdpolicy::BoundedSpec& bound = spec.bounds(i);
    std::optional<at::Tensor> low, high;
    if (bound.has_low()) {
      low = constant_tensor(bound.low(), field + ".low", "the low bound", context);
      if (!low || !broadcasts_onto(*low, shapes[i], field + ".low", "the low bound", context)) return false;
    }
    if (bound.has_high()) {
      high = constant_tensor(bound.high(), field + ".high", "the high bound", context);
      if (!high || !broadcasts_onto(*high, shapes[i], field + ".high", "the high bound", context)) return false;
    }
    const at::Tensor lo = low ? *low : -at::ones({});
    const at::Tensor hi = high ? *high : at::ones({});
    if (!ordered(lo, hi, /*strict=*/false, field + ".low", context)) return false;
  }
  for (int i = 0; i < spec.in_keys_size(); ++i) {
    const std::string& key = spec.out_keys_size() > 0 ? spec.out_keys(i) : spec.in_keys(i);
    const std::string field =
        spec.out_keys_size() > 0 ? absl::StrCat(path, ".out_keys[", i, "]") : absl::StrCat(path, ".in_keys[", i, "]");
    // Writing its in_key back (out_keys left empty) is what the module is for: no overwrite_keys needed.
    std::set<NestedKey> allowed = overwrites;
    if (spec.out_keys_size() == 0) allowed.insert(*parse_key(key));
    if (!context.write(key, field, shapes[i], allowed)) return false;
  }
  return true;
}

ModulePtr build(const tdpolicy::Module& module, const std::string&, const BuildContext&) {
  const tdpolicy::TanhModule& spec = module.tanh();
  nn::TanhModuleOptions options(keys_of(spec.in_keys()), keys_of(spec.out_keys()));
  if (spec.bounds_size() > 0) {
    std::vector<std::pair<at::Tensor, at::Tensor>> bounds;
    for (const tdpolicy::BoundedSpec& bound : spec.bounds()) {
      bounds.emplace_back(bound.has_low() ? constant(bound.low()) : -at::ones({}),
                          bound.has_high() ? constant(bound.high()) : at::ones({}));
    }
    options.bounds(bounds);
  }
  options.clamp(spec.clamp());
  return nn::TanhModule(options).ptr();
}

bool export_module(const nn::TensorDictModuleBase& base, tdpolicy::Module* module_out, const std::string&,
                   ExportContext& context) {
  auto* module = dynamic_cast<const nn::TanhModuleImpl*>(&base);
  if (module == nullptr) return false;
  tdpolicy::TanhModule* out = module_out->mutable_tanh();
  const nn::TanhModuleOptions& options = module->options();
  add_keys(options.in_keys(), out->mutable_in_keys());
  if (options.out_keys() != options.in_keys()) add_keys(options.out_keys(), out->mutable_out_keys());
  for (const auto& [low, high] : options.bounds()) {
    tdpolicy::BoundedSpec* bound = out->add_bounds();
    *bound->mutable_low() = to_tensor_proto(low);
    *bound->mutable_high() = to_tensor_proto(high);
  }
  out->set_clamp(options.clamp());
  std::vector<NestedKey> written;
  for (size_t i = 0; i < options.out_keys().size(); ++i) {
    if (options.out_keys()[i] != options.in_keys()[i]) written.push_back(options.out_keys()[i]);
  }
  context.mark_overwrites(written, module_out);
  return true;
}

}  // namespace

extern const ModuleKind kTanh{tdpolicy::Module::kTanh, validate, build, export_module};

}  // namespace tdp::policy::kinds
