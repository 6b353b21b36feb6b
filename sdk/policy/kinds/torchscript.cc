// torchscript: a module saved with torch.jit.save, next to the spec (tdp::nn::scripted_module).
// Built only: a C++ module tree never exports to it (the Python exporter writes it).
#include <absl/strings/str_cat.h>
#include <torch/csrc/jit/serialization/import.h>

#include <sstream>
#include <stdexcept>

#include "sdk/nn/scripted_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const std::string& file = site.module.network().torchscript().file();
  if (file.empty()) {
    return context.fail(site.kind_path + ".file", "no file given", "a file saved with torch.jit.save, next to the spec");
  }
  if (!context.inside_folder(file, site.kind_path + ".file")) return false;
  outputs.assign(site.module.out_keys_size(), std::nullopt);
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options,
                const BuildContext& context) {
  // Through the bounded reader, as the spec and parameter files: a regular file within
  // max_spec_bytes, read once; LibTorch then parses the bytes, not the path.
  const auto& script = network.torchscript();
  absl::StatusOr<std::string> bytes = read_bounded_file(context.file(script.file()), context.limits().max_spec_bytes,
                                                        "max_spec_bytes", "the TorchScript file");
  if (!bytes.ok()) throw std::invalid_argument(std::string(bytes.status().message()));
  std::istringstream stream(*std::move(bytes));
  return nn::scripted_module(torch::jit::load(stream), options, script.method().empty() ? "forward" : script.method())
      .ptr();
}

}  // namespace

extern const NetworkKind kTorchScript{tdpolicy::Network::kTorchscript, validate, build, /*export_network=*/nullptr,
                                      /*cpp_class=*/nullptr};

}  // namespace tdp::policy::kinds
