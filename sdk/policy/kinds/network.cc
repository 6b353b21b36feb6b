// network: a TensorDictModule around a tdpolicy.Network, reading in_keys and writing out_keys.
// The network's own kind (mlp, linear, ...) is looked up in the table of network kinds.
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <stdexcept>

#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const tdpolicy::Module& module, const std::string& module_path, const std::set<NestedKey>& overwrites,
              ValidationContext& context) {
  const tdpolicy::NetworkModule& spec = module.network();
  const std::string path = module_path + ".network";
  std::vector<Shape> inputs;
  for (int i = 0; i < spec.in_keys_size(); ++i) {
    auto shape = context.read(spec.in_keys(i), absl::StrCat(path, ".in_keys[", i, "]"));
    if (!shape) return false;
    inputs.push_back(*shape);
  }
  const std::string net_path = path + ".network";
  const tdpolicy::Network::KindCase kind_case = spec.network().kind_case();
  if (kind_case == tdpolicy::Network::KIND_NOT_SET) {
    return context.fail(net_path, "no network kind is set", absl::StrCat("one of ", network_kind_names()));
  }
  const std::string kind_path = absl::StrCat(net_path, ".", kind_name(kind_case));
  const NetworkKind* kind = network_kind(kind_case);
  if (kind == nullptr) return context.fail(kind_path, "this SDK has no entry for the network kind");
  std::vector<Shape> outputs;
  if (!kind->validate(NetworkSite{spec, inputs, path, kind_path}, context, outputs)) return false;
  if (static_cast<int>(outputs.size()) != spec.out_keys_size()) {
    return context.fail(path + ".out_keys",
                        absl::StrCat("expected ", outputs.size(), " out_keys, got ", spec.out_keys_size()));
  }
  for (int i = 0; i < spec.out_keys_size(); ++i) {
    if (!context.write(spec.out_keys(i), absl::StrCat(path, ".out_keys[", i, "]"), outputs[i], overwrites)) {
      return false;
    }
  }
  return true;
}

ModulePtr build(const tdpolicy::Module& module, const std::string&, const BuildContext& context) {
  const tdpolicy::NetworkModule& spec = module.network();
  const NetworkKind* kind = network_kind(spec.network().kind_case());
  if (kind == nullptr) throw std::invalid_argument("no network kind is set");
  return kind->build(spec.network(), nn::TensorDictModuleOptions(keys_of(spec.in_keys()), keys_of(spec.out_keys())),
                     context);
}

bool export_module(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string& path,
                   ExportContext& context) {
  auto* td_module = dynamic_cast<const nn::TensorDictModuleImpl*>(&module);
  if (td_module == nullptr) return false;
  auto* spec = out->mutable_network();
  add_keys(td_module->in_keys(), spec->mutable_in_keys());
  add_keys(td_module->out_keys_source(), spec->mutable_out_keys());
  const auto& inner = td_module->module();
  bool exported = false;
  std::vector<std::string> exportable;
  for (const NetworkKind* kind : network_kinds()) {
    if (kind->export_network == nullptr) continue;
    exportable.push_back(kind->cpp_class);
    exported = exported || (inner != nullptr && kind->export_network(*inner, spec->mutable_network()));
  }
  if (!exported) {
    throw std::invalid_argument(absl::StrCat(path, ": a TensorDictModule around ", inner ? inner->name() : "a function",
                                             " cannot be written to a spec (supported: ",
                                             absl::StrJoin(exportable, ", "), ")"));
  }
  context.mark_overwrites(td_module->out_keys_source(), out);
  return true;
}

}  // namespace

extern const ModuleKind kNetwork{tdpolicy::Module::kNetwork, validate, build, export_module};

}  // namespace tdp::policy::kinds
