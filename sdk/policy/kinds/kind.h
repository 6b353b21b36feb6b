// Internal to sdk/policy (a `srcs` header: never installed). The table of module kinds: every kind
// a spec can name, a tdpolicy.Module kind (sequential, network, ...) or a tdpolicy.Network kind
// (mlp, linear, ...), has one file in this folder that declares side by side how it is validated
// (fields, arity, output shapes from input shapes, allocation bounds), built (spec -> module) and
// exported (a built module -> spec fields); kinds.cc lists the entries. validate.cc, build.cc and
// export.cc look a kind up here instead of switching on it (sdk/policy/README.md, "Adding a module
// kind").
//
//   const tdp::policy::kinds::NetworkKind* kind = tdp::policy::kinds::network_kind(network.kind_case());
//   if (kind == nullptr) throw std::invalid_argument("no network kind is set");
//   tdp::policy::kinds::BuildContext context(base_dir, limits);
//   std::shared_ptr<tdp::nn::TensorDictModuleBase> module = kind->build(network, options, context);
#pragma once

#include <google/protobuf/repeated_field.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/limits.h"
#include "sdk/tensordict/nested_key.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::policy::kinds {

class ValidationContext;  // validation_context.h

using ModulePtr = std::shared_ptr<nn::TensorDictModuleBase>;
// A per-environment shape (without the batch dims); nullopt where the validator cannot tell.
using Shape = std::optional<std::vector<int64_t>>;

// What a kind's build gets besides its spec: where the spec's files are, the limits on reading
// them, and the recursion into child modules.
class BuildContext {
 public:
  BuildContext(const std::string& base_dir, const Limits& limits) : base_dir_(base_dir), limits_(limits) {}
  const Limits& limits() const { return limits_; }
  // A file the spec names, relative to the spec's folder (an absolute one as is).
  std::string file(const std::string& name) const;
  // The module `spec` describes, by its kind's entry; throws std::invalid_argument naming `path`
  // when no kind is set.
  ModulePtr module(const tdpolicy::Module& spec, const std::string& path) const;

 private:
  const std::string& base_dir_;
  const Limits& limits_;
};

// What a kind's export gets: the recursion into child modules and the keys written so far.
class ExportContext {
 public:
  // `written`: the declared inputs' keys.
  explicit ExportContext(std::set<NestedKey> written) : written_(std::move(written)) {}
  // Writes `module` into `out` by the kind that claims it; throws std::invalid_argument naming
  // `path` when none does.
  void module(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string& path);
  // A C++ module tree carries no overwrite intent, but one that runs means it: a leaf writing a
  // key that a declared input or an earlier module provides (a recurrent state) gets
  // overwrite_keys, so that the exported spec validates.
  void mark_overwrites(const std::vector<NestedKey>& keys, tdpolicy::Module* out);

 private:
  std::set<NestedKey> written_;
};

// A NetworkModule as its network kind's validation sees it.
struct NetworkSite {
  const tdpolicy::NetworkModule& module;  // in_keys, out_keys, network
  const std::vector<Shape>& inputs;       // what each in_key holds, in order
  const std::string& path;                // the NetworkModule's field path (in_keys/out_keys errors)
  const std::string& kind_path;           // its network's kind field: path + ".network.<kind>"
};

// A tdpolicy.Network kind: the network a `network { in_keys out_keys network { ... } }` module wraps.
struct NetworkKind {
  tdpolicy::Network::KindCase kind;
  // Checks the network's fields and arity and gives the shapes of what it writes, one per
  // out_key (network.cc checks the count). False after context.fail(...).
  bool (*validate)(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs);
  // The TensorDictModule around the network of a validated spec.
  ModulePtr (*build)(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options,
                     const BuildContext& context);
  // Writes the network a TensorDictModule wraps into `out` and returns true, or returns false
  // (out untouched) when it is not of this kind. Null: C++ module trees never export to it.
  bool (*export_network)(const torch::nn::Module& network, tdpolicy::Network* out);
  // The C++ class export_network takes, for the error that lists what exports ("Mlp").
  const char* cpp_class;
};

// A tdpolicy.Module kind.
struct ModuleKind {
  tdpolicy::Module::KindCase kind;
  // Checks the module (its children through context.module()) and records what it writes.
  // `path` is the Module's field path; `overwrites` its parsed overwrite_keys.
  bool (*validate)(const tdpolicy::Module& module, const std::string& path, const std::set<NestedKey>& overwrites,
                   ValidationContext& context);
  ModulePtr (*build)(const tdpolicy::Module& module, const std::string& path, const BuildContext& context);
  // Writes `module` into `out` and returns true, or returns false (out untouched) when the module
  // is not of this kind. Each claims only its own modules, so the table's order does not matter.
  bool (*export_module)(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string& path,
                        ExportContext& context);
};

// Every entry, in the order of the proto's oneof fields.
const std::vector<const ModuleKind*>& module_kinds();
const std::vector<const NetworkKind*>& network_kinds();
// The entry of a kind; null for KIND_NOT_SET (and for a proto field without an entry).
const ModuleKind* module_kind(tdpolicy::Module::KindCase kind);
const NetworkKind* network_kind(tdpolicy::Network::KindCase kind);
// The oneof's field names, in order: "sequential, probabilistic_sequential, ..." (the hint when
// no kind is set), and one kind's ("mlp").
std::string module_kind_names();
std::string network_kind_names();
std::string kind_name(tdpolicy::Module::KindCase kind);
std::string kind_name(tdpolicy::Network::KindCase kind);

// The keys of a validated spec ("_" kept as is).
std::vector<NestedKey> keys_of(const google::protobuf::RepeatedPtrField<std::string>& texts);
// Appends `keys` as spec strings.
void add_keys(const std::vector<NestedKey>& keys, google::protobuf::RepeatedPtrField<std::string>* out);

}  // namespace tdp::policy::kinds
