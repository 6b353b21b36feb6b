// export_spec / save_policy: module tree -> spec + parameters. Each module is written by the kind
// that claims it (sdk/policy/kinds/).
#include <absl/strings/str_cat.h>

#include <fstream>
#include <set>
#include <stdexcept>

#include "sdk/policy/keys.h"
#include "sdk/nn/safe_module.h"
#include "sdk/policy/kinds/action_spec.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy {

namespace kinds {

void ExportContext::module(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string& path) {
  if (auto* safe = dynamic_cast<const nn::SafeModuleImpl*>(&module)) {
    this->module(*safe->module(), out, path);
    add_projections(safe->projections(), out);
    return;
  }
  for (const ModuleKind* kind : module_kinds()) {
    if (kind->export_module(module, out, path, *this)) return;
  }
  throw std::invalid_argument(absl::StrCat(path, ": a ", module.type_name(), " cannot be written to a spec"));
}

void ExportContext::mark_overwrites(const std::vector<NestedKey>& keys, tdpolicy::Module* out) {
  for (const NestedKey& key : keys) {
    if (key == NestedKey("_")) continue;
    if (!written_.insert(key).second) *out->add_overwrite_keys() = key_string(key);
  }
}

}  // namespace kinds

absl::StatusOr<tdpolicy::PolicySpec> export_spec(const nn::TensorDictModuleBase& module,
                                                const tdpolicy::PolicySpec& header) {
  tdpolicy::PolicySpec spec = header;
  spec.clear_module();
  spec.clear_parameters();
  spec.clear_parameters_file();
  spec.clear_init_seed();
  try {
    std::set<NestedKey> inputs;
    for (const auto& input : spec.inputs()) {
      auto key = parse_key(input.key());
      if (key.ok()) inputs.insert(*key);
    }
    kinds::ExportContext(std::move(inputs)).module(module, spec.mutable_module(), "module");
    auto* parameters = spec.mutable_parameters();
    for (const auto& item : module.named_parameters()) {
      auto* named = parameters->add_tensors();
      named->set_name(item.key());
      *named->mutable_tensor() = to_tensor_proto(item.value());
    }
    for (const auto& item : module.named_buffers()) {
      auto* named = parameters->add_tensors();
      named->set_name(item.key());
      *named->mutable_tensor() = to_tensor_proto(item.value());
    }
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("export_spec: ", error.what()));
  }
  // What was exported must load back: check it as the loader would.
  if (auto status = validate_spec(spec, "export_spec"); !status.ok()) return status;
  return spec;
}

absl::Status save_policy(const Policy& policy, const std::string& path, const SaveOptions& options) {
  auto spec = export_spec(*policy.module, policy.spec);
  if (!spec.ok()) return spec.status();
  if (!options.embed_parameters) {
    const std::string parameters_path = path + ".params.pb";
    std::string bytes;
    spec->parameters().SerializeToString(&bytes);
    std::ofstream out(parameters_path, std::ios::binary | std::ios::trunc);
    if (!out || !(out << bytes)) {
      return absl::PermissionDeniedError(absl::StrCat(parameters_path, ": cannot write the parameters file"));
    }
    const size_t slash = parameters_path.find_last_of('/');
    spec->set_parameters_file(slash == std::string::npos ? parameters_path : parameters_path.substr(slash + 1));
    spec->clear_parameters();
  }
  return write_spec(*spec, path);
}

}  // namespace tdp::policy
