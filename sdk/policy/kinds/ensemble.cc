// ensemble: num_copies independently initialized copies of a module, whose outputs and batch
// size gain a leading [num_copies] dim (tdp::nn::EnsembleModule).
#include <absl/strings/str_cat.h>

#include "sdk/nn/ensemble_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

// The copies' keys are the module's (each gains the leading copies dim, which per-env shapes
// do not show); their parameters count num_copies times.
bool validate(const tdpolicy::Module& module, const std::string& module_path, const std::set<NestedKey>&,
              ValidationContext& context) {
  const tdpolicy::Ensemble& spec = module.ensemble();
  const std::string path = module_path + ".ensemble";
  constexpr int64_t kMaxCopies = 1 << 16;
  if (spec.num_copies() < 1 || spec.num_copies() > kMaxCopies) {
    return context.fail(path + ".num_copies", absl::StrCat(spec.num_copies(), " copies; expected 1 to ", kMaxCopies));
  }
  if (!spec.has_module()) {
    return context.fail(path + ".module", "the ensemble has no module", "add `module { network { ... } }`");
  }
  const double before = context.declared_elements();
  if (!context.module(spec.module(), path + ".module")) return false;
  // The template's declared elements were counted once above; its stacked copies add
  // num_copies times as many, checked before the ensemble allocates them.
  return context.count((context.declared_elements() - before) * static_cast<double>(spec.num_copies()),
                       path + ".num_copies", absl::StrCat("the ensemble's ", spec.num_copies(), " copies"), "weights");
}

ModulePtr build(const tdpolicy::Module& module, const std::string& path, const BuildContext& context) {
  const tdpolicy::Ensemble& ensemble = module.ensemble();
  return std::make_shared<nn::EnsembleModuleImpl>(
      context.module(ensemble.module(), path + ".ensemble.module"),
      nn::EnsembleModuleOptions(ensemble.num_copies())
          .expand_input(!ensemble.has_expand_input() || ensemble.expand_input()));
}

bool export_module(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string& path,
                   ExportContext& context) {
  auto* ensemble = dynamic_cast<const nn::EnsembleModuleImpl*>(&module);
  if (ensemble == nullptr) return false;
  auto* spec = out->mutable_ensemble();
  spec->set_num_copies(ensemble->options().num_copies());
  spec->set_expand_input(ensemble->options().expand_input());
  context.module(*ensemble->module(), spec->mutable_module(), path + ".ensemble.module");
  return true;
}

}  // namespace

extern const ModuleKind kEnsemble{tdpolicy::Module::kEnsemble, validate, build, export_module};

}  // namespace tdp::policy::kinds
