// probabilistic_sequential: modules run in order, the last (or several) probabilistic
// (tdp::nn::ProbabilisticTensorDictSequential).
#include <absl/strings/str_cat.h>

#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/sequence.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/probabilistic/probabilistic_sequential.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const tdpolicy::Module& module, const std::string& path, const std::set<NestedKey>&,
              ValidationContext& context) {
  const auto& seq = module.probabilistic_sequential();
  return validate_sequence(seq.selected_out_keys(), seq.modules(), path + ".probabilistic_sequential", context);
}

ModulePtr build(const tdpolicy::Module& module, const std::string& path, const BuildContext& context) {
  const auto& spec = module.probabilistic_sequential();
  std::vector<nn::TensorDictModuleRef> modules;
  for (auto& [name, child] : build_children(spec.modules(), path + ".probabilistic_sequential", context)) {
    modules.push_back(std::move(child));
  }
  nn::ProbabilisticTensorDictSequentialOptions options;
  if (spec.has_return_composite()) options.return_composite(spec.return_composite());
  options.partial_tolerant(spec.partial_tolerant()).selected_out_keys(keys_of(spec.selected_out_keys()));
  return nn::ProbabilisticTensorDictSequential(modules, options).ptr();
}

bool export_module(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string& path,
                   ExportContext& context) {
  auto* seq = dynamic_cast<const nn::ProbabilisticTensorDictSequentialImpl*>(&module);
  if (seq == nullptr) return false;
  auto* spec = out->mutable_probabilistic_sequential();
  if (seq->prob_options().return_composite()) spec->set_return_composite(*seq->prob_options().return_composite());
  spec->set_partial_tolerant(seq->options().partial_tolerant());
  add_keys(seq->options().selected_out_keys(), spec->mutable_selected_out_keys());
  for (size_t i = 0; i < seq->modules().size(); ++i) {
    context.module(*seq->modules()[i], spec->add_modules(),
                   absl::StrCat(path, ".probabilistic_sequential.modules[", i, "]"));
  }
  return true;
}

}  // namespace

extern const ModuleKind kProbabilisticSequential{tdpolicy::Module::kProbabilisticSequential, validate, build,
                                                 export_module};

}  // namespace tdp::policy::kinds
