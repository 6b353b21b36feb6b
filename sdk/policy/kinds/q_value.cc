// q_value: action values -> the greedy action, TorchRL's QValueModule, or with a support its
// DistributionalQValueModule (tdp::nn::QValueModule).
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <stdexcept>

#include "sdk/nn/q_value_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy::kinds {
namespace {

// The dims of a distributional value without its atoms dim (second to last).
Shape without_atoms(const Shape& shape) {
  if (!shape || shape->size() < 2) return std::nullopt;
  std::vector<int64_t> out(shape->begin(), shape->end());
  out.erase(out.end() - 2);
  return out;
}

Shape without_last(const Shape& shape) {
  if (!shape || shape->empty()) return std::nullopt;
  return std::vector<int64_t>(shape->begin(), shape->end() - 1);
}

bool validate(const tdpolicy::Module& module, const std::string& module_path, const std::set<NestedKey>& overwrites,
              ValidationContext& context) {
  const tdpolicy::QValue& spec = module.q_value();
  const std::string path = module_path + ".q_value";
  const std::string& space = spec.action_space();
  if (space == "mult_one_hot" || space == "mult-one-hot") {
    return context.fail(path + ".action_space",
                        "mult_one_hot needs TorchRL's var_nums (each action component's cardinality), which the "
                        "spec has no field for",
                        "one_hot or categorical");
  }
  if (space == "binary") {
    return context.fail(path + ".action_space", "TorchRL's QValueModule does not implement the binary action space",
                        "one_hot or categorical");
  }
  if (!space.empty() && space != "one_hot" && space != "categorical") {
    return context.fail(path + ".action_space", absl::StrCat("unknown action space \"", space, "\""),
                        "one_hot (the default) or categorical");
  }
  const bool one_hot = space.empty() || space == "one_hot";
  const std::string value_text = spec.action_value_key().empty() ? "action_value" : spec.action_value_key();
  auto value_key = context.key_at(value_text, path + ".action_value_key");
  if (!value_key) return false;
  auto read = context.read(value_text, path + ".action_value_key");
  if (!read) return false;
  const Shape values = *read;
  const bool distributional = spec.has_support();
  Shape per_action = values;  // the action values as the greedy choice sees them, [..., n_actions]
  if (distributional) {
    const std::string support_path = path + ".support";
    if (!context.declared(spec.support().shape(), support_path, "the support")) return false;
    if (spec.support().shape_size() != 1 || spec.support().shape(0) < 1) {
      return context.fail(support_path,
                          absl::StrCat("the support has shape [", absl::StrJoin(spec.support().shape(), ", "),
                                       "]; expected [n_atoms] with n_atoms >= 1"));
    }
    absl::StatusOr<at::Tensor> support = from_tensor_proto(spec.support());
    if (!support.ok()) return context.fail(support_path, std::string(support.status().message()));
    if (!support->is_floating_point() && support->scalar_type() != at::kLong && support->scalar_type() != at::kInt) {
      return context.fail(support_path, absl::StrCat("a support of dtype ", c10::toString(support->scalar_type()),
                                                     " (expected a floating-point or integer dtype)"));
    }
    const int64_t atoms = spec.support().shape(0);
    if (values && (values->size() < 2 || (*values)[values->size() - 2] != atoms)) {
      return context.fail(path + ".action_value_key",
                          absl::StrCat("\"", value_text, "\" has per-environment shape [", absl::StrJoin(*values, ", "),
                                       "]; a support of ", atoms, " atoms reads [..., ", atoms, ", n_actions]"));
    }
    per_action = without_atoms(values);
  }
  if (!spec.action_mask_key().empty()) {
    auto read_mask = context.read(spec.action_mask_key(), path + ".action_mask_key");
    if (!read_mask) return false;
    const Shape mask = *read_mask;
    if (mask && per_action && !per_action->empty() && (mask->empty() || mask->back() != per_action->back())) {
      return context.fail(
          path + ".action_mask_key",
          absl::StrCat("the mask \"", spec.action_mask_key(), "\" has per-environment shape [",
                       absl::StrJoin(*mask, ", "), "]; the action values have ", per_action->back(), " actions"));
    }
  }
  const int expected = distributional ? 2 : 3;
  std::vector<std::string> out_keys(spec.out_keys().begin(), spec.out_keys().end());
  if (out_keys.empty()) {
    out_keys = {"action", value_text};
    if (!distributional) out_keys.push_back("chosen_action_value");
  }
  if (static_cast<int>(out_keys.size()) != expected) {
    return context.fail(path + ".out_keys",
                        absl::StrCat("expected ", expected, " out_keys (action, action_value",
                                     distributional ? "" : ", chosen_action_value", "), got ", out_keys.size()));
  }
  auto second = context.key_at(out_keys[1], path + ".out_keys[1]");
  if (!second) return false;
  if (*second != *value_key) {
    return context.fail(
        path + ".out_keys[1]",
        absl::StrCat("the second out_key must be the action-value key \"", value_text, "\", got \"", out_keys[1], "\""),
        "TorchRL writes the (masked) action values back where it read them");
  }
  // The action values are written back where they were read.
  std::set<NestedKey> rewritten = overwrites;
  rewritten.insert(*value_key);
  std::vector<Shape> shapes = {one_hot ? per_action : without_last(per_action), values};
  if (!distributional) shapes.push_back(with_last(values, 1));
  for (int i = 0; i < expected; ++i) {
    if (!context.write(out_keys[i], absl::StrCat(path, ".out_keys[", i, "]"), shapes[i], rewritten)) return false;
  }
  return true;
}

ModulePtr build(const tdpolicy::Module& module, const std::string& path, const BuildContext&) {
  const tdpolicy::QValue& spec = module.q_value();
  nn::QValueModuleOptions options;
  options.action_space(spec.action_space().empty() ? nn::ActionSpace::kOneHot
                                                   : nn::action_space_from_str(spec.action_space()));
  if (!spec.action_value_key().empty()) options.action_value_key(*parse_key(spec.action_value_key()));
  if (!spec.action_mask_key().empty()) options.action_mask_key(*parse_key(spec.action_mask_key()));
  options.out_keys(keys_of(spec.out_keys()));
  if (spec.has_support()) {
    absl::StatusOr<at::Tensor> support = from_tensor_proto(spec.support());
    if (!support.ok())
      throw std::invalid_argument(absl::StrCat(path, ".q_value.support: ", support.status().message()));
    options.support(*support);
  }
  return nn::QValueModule(options).ptr();
}

bool export_module(const nn::TensorDictModuleBase& base, tdpolicy::Module* out, const std::string&,
                   ExportContext& context) {
  auto* module = dynamic_cast<const nn::QValueModuleImpl*>(&base);
  if (module == nullptr) return false;
  const nn::QValueModuleOptions& options = module->options();
  tdpolicy::QValue* spec = out->mutable_q_value();
  spec->set_action_value_key(key_string(options.action_value_key()));
  if (options.action_mask_key()) spec->set_action_mask_key(key_string(*options.action_mask_key()));
  add_keys(module->out_keys_source(), spec->mutable_out_keys());
  spec->set_action_space(nn::to_string(options.action_space()));
  if (options.support().defined()) *spec->mutable_support() = to_tensor_proto(options.support());
  context.mark_overwrites(module->out_keys_source(), out);
  return true;
}

}  // namespace

extern const ModuleKind kQValue{tdpolicy::Module::kQValue, validate, build, export_module};

}  // namespace tdp::policy::kinds
