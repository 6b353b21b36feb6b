#include "sdk/policy/kinds/sequence.h"

#include <absl/strings/str_cat.h>

#include <set>

#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {

bool validate_sequence(const google::protobuf::RepeatedPtrField<std::string>& selected_out_keys,
                       const google::protobuf::RepeatedPtrField<tdpolicy::Module>& modules,
                       const std::string& kind_path, ValidationContext& context) {
  for (int i = 0; i < selected_out_keys.size(); ++i) {
    if (!context.key_at(selected_out_keys[i], absl::StrCat(kind_path, ".selected_out_keys[", i, "]"))) return false;
  }
  const std::string path = kind_path + ".modules";
  if (modules.empty()) return context.fail(path, "a sequence needs at least one module");
  std::set<std::string> names;
  for (int i = 0; i < modules.size(); ++i) {
    const std::string field = absl::StrCat(path, "[", i, "]");
    if (!modules[i].name().empty() && !names.insert(modules[i].name()).second) {
      return context.fail(field + ".name", absl::StrCat("two modules are named \"", modules[i].name(), "\""));
    }
    if (!context.module(modules[i], field)) return false;
  }
  return true;
}

std::vector<std::pair<std::string, nn::TensorDictModuleRef>> build_children(
    const google::protobuf::RepeatedPtrField<tdpolicy::Module>& modules, const std::string& kind_path,
    const BuildContext& context) {
  std::vector<std::pair<std::string, nn::TensorDictModuleRef>> out;
  for (int i = 0; i < modules.size(); ++i) {
    const auto& child = modules[i];
    out.emplace_back(child.name().empty() ? std::to_string(i) : child.name(),
                     context.module(child, absl::StrCat(kind_path, ".modules[", i, "]")));
  }
  return out;
}

}  // namespace tdp::policy::kinds
