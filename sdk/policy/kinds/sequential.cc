// sequential: modules run in order on one TensorDict (tdp::nn::TensorDictSequential).
#include <absl/strings/str_cat.h>

#include "sdk/nn/tensordict_sequential.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/sequence.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/probabilistic/probabilistic_sequential.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const tdpolicy::Module& module, const std::string& path, const std::set<NestedKey>&,
              ValidationContext& context) {
  const auto& seq = module.sequential();
  return validate_sequence(seq.selected_out_keys(), seq.modules(), path + ".sequential", context);
}

ModulePtr build(const tdpolicy::Module& module, const std::string& path, const BuildContext& context) {
  const auto& seq = module.sequential();
  nn::TensorDictSequentialOptions options;
  options.partial_tolerant(seq.partial_tolerant()).selected_out_keys(keys_of(seq.selected_out_keys()));
  return std::make_shared<nn::TensorDictSequentialImpl>(build_children(seq.modules(), path + ".sequential", context),
                                                        options);
}

bool export_module(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string& path,
                   ExportContext& context) {
  auto* seq = dynamic_cast<const nn::TensorDictSequentialImpl*>(&module);
  // A ProbabilisticTensorDictSequential is one too: probabilistic_sequential.cc's.
  if (seq == nullptr || dynamic_cast<const nn::ProbabilisticTensorDictSequentialImpl*>(&module) != nullptr) {
    return false;
  }
  auto* spec = out->mutable_sequential();
  spec->set_partial_tolerant(seq->options().partial_tolerant());
  add_keys(seq->options().selected_out_keys(), spec->mutable_selected_out_keys());
  for (size_t i = 0; i < seq->modules().size(); ++i) {
    auto* child = spec->add_modules();
    if (seq->is_named()) child->set_name(seq->names()[i]);
    context.module(*seq->modules()[i], child, absl::StrCat(path, ".sequential.modules[", i, "]"));
  }
  return true;
}

}  // namespace

extern const ModuleKind kSequential{tdpolicy::Module::kSequential, validate, build, export_module};

}  // namespace tdp::policy::kinds
