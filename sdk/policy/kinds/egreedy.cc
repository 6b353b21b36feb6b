// egreedy: epsilon-greedy exploration under the RANDOM interaction type, TorchRL's EGreedyModule
// with its eps frozen (tdp::nn::EGreedyModule).
#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <stdexcept>

#include "sdk/policy/kinds/action_spec.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/policy/tensor_proto.h"
#include "sdk/probabilistic/egreedy_module.h"

namespace tdp::policy::kinds {
namespace {

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
  if (!validate_action_spec(action_spec, spec_path, context)) return false;
  const nn::TensorSpec random = tensor_spec_of(action_spec);
  int64_t n = 0;
  if (action_spec.has_one_hot() || action_spec.has_categorical()) {
    const bool one_hot = action_spec.has_one_hot();
    n = random.n();
    const std::string n_path = absl::StrCat(spec_path, one_hot ? ".one_hot" : ".categorical", ".n");
    if (one_hot && action && (action->empty() || action->back() != n)) {
      return context.fail(path + ".action_key",
                          absl::StrCat("a one_hot spec of ", n, " actions replaces one-hot actions [..., ", n,
                                       "]; the action has per-environment shape [", absl::StrJoin(*action, ", "), "]"),
                          "a categorical spec for integer actions");
    }
    // A random draw makes [..., n] weights (a mask's) or one-hot values per action.
    if (!context.fits_one_tensor(with_last(action, n), n_path, "the random actions' one-hot or mask")) return false;
  } else {
    for (const auto& [bound, name] : {std::pair{random.low(), ".low"}, std::pair{random.high(), ".high"}}) {
      if (!at::isfinite(bound).all().item<bool>()) {
        return context.fail(spec_path + ".bounded" + name, "expected finite floating-point values");
      }
    }
    if (!at::isFloatingType(random.dtype())) {
      return context.fail(spec_path + ".dtype", absl::StrCat("a bounded spec of dtype ", c10::toString(random.dtype())),
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

ModulePtr build(const tdpolicy::Module& module, const std::string& path, const BuildContext&) {
  const tdpolicy::EGreedy& spec = module.egreedy();
  nn::EGreedyModuleOptions options(tensor_spec_of(spec.spec()));
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
  if (!proto_dtype(options.spec().dtype())) {
    throw std::invalid_argument(absl::StrCat(path, ": an action spec of dtype ", c10::toString(options.spec().dtype()),
                                             ", which a spec has no name for"));
  }
  *spec->mutable_spec() = action_spec_of(options.spec());
  context.mark_overwrites(module->out_keys_source(), out);
  return true;
}

}  // namespace

extern const ModuleKind kEGreedy{tdpolicy::Module::kEgreedy, validate, build, export_module};

}  // namespace tdp::policy::kinds
