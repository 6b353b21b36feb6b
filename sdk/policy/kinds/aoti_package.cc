// aoti_package: any other network, a torch.export'ed program compiled by AOTInductor into a .pt2
// file next to the spec (tdp::nn::aoti_package). The file's SHA-256 must be the spec's, so a spec
// never runs a package other than the one it was exported with. Built only: a C++ module tree never
// exports to it (tdpolicy.export writes it, with fallback="aoti").
#include "sdk/nn/aoti_package.h"

#include <absl/strings/ascii.h>
#include <absl/strings/escaping.h>
#include <absl/strings/str_cat.h>
#include <openssl/evp.h>

#include <stdexcept>
#include <string>

#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

constexpr char kHint[] = "tdpolicy.export(..., fallback=\"aoti\") writes the package and its digest";

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const tdpolicy::AotiPackage& package = site.module.network().aoti_package();
  if (package.file().empty()) {
    return context.fail(site.kind_path + ".file", "no file given",
                        "a .pt2 file written by torch._inductor.aoti_compile_and_package, next to the spec");
  }
  if (!context.inside_folder(package.file(), site.kind_path + ".file")) return false;
  const std::string& digest = package.sha256();
  if (digest.size() != 64 || digest.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    return context.fail(site.kind_path + ".sha256",
                        absl::StrCat("expected the file's SHA-256 as 64 hex digits, got \"", digest, "\""),
                        "sha256sum " + package.file());
  }
  if (!package.device().empty() && package.device() != "cpu" && package.device() != "cuda") {
    return context.fail(site.kind_path + ".device", absl::StrCat("unknown device \"", package.device(), "\""),
                        "cpu (the default) or cuda: what the package was compiled for");
  }
  if (site.module.in_keys_size() == 0) {
    return context.fail(site.path + ".in_keys", "an aoti_package reads at least one key");
  }
  outputs.assign(site.module.out_keys_size(), std::nullopt);
  return true;
}

// Lower-case hex SHA-256 of `bytes`, by OpenSSL.
std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL could not compute a SHA-256 digest");
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options,
                const BuildContext& context) {
  // Through the bounded reader, as the spec, parameter and TorchScript files; the digest is of the
  // bytes that are then loaded, not of the file as it may be later.
  const tdpolicy::AotiPackage& package = network.aoti_package();
  const std::string path = context.file(package.file());
  absl::StatusOr<std::string> bytes = read_bounded_file(path, context.limits().max_spec_bytes, "max_spec_bytes",
                                                        "the AOTInductor package (aoti_package.file)");
  if (!bytes.ok()) throw std::invalid_argument(std::string(bytes.status().message()));
  const std::string actual = sha256_hex(*bytes);
  if (actual != absl::AsciiStrToLower(package.sha256())) {
    throw std::invalid_argument(absl::StrCat(path, ": the file's SHA-256 is ", actual, ", not the aoti_package.sha256 ",
                                             package.sha256(), " of the spec (hint: ", kHint, ")"));
  }
  const c10::DeviceType device = package.device() == "cuda" ? c10::kCUDA : c10::kCPU;
  return nn::aoti_package(*std::move(bytes), path, options, device).ptr();
}

}  // namespace

extern const NetworkKind kAotiPackage{tdpolicy::Network::kAotiPackage, validate, build, /*export_network=*/nullptr,
                                      /*cpp_class=*/nullptr};

}  // namespace tdp::policy::kinds
