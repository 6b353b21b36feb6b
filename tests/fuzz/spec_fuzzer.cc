// libFuzzer entry point for the spec loader: the input is a whole spec file in the format
// TDP_FUZZ_FORMAT names (0 text, 1 binary, 2 JSON; one binary per format, see BUILD.bazel),
// parsed, validated, built with its parameters and self tests under small limits
// (fuzz_common.h), and run once per interaction type when it loads. Relative files
// (parameters_file, torchscript.file) resolve in policies/pytorch, so the seed corpus's
// TorchScript actor loads. The text target also has a structure-aware mutator
// (text_mutator.cc).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sdk/policy/policy.h"
#include "tests/fuzz/fuzz_common.h"

#ifndef TDP_FUZZ_FORMAT
#error "TDP_FUZZ_FORMAT must be 0 (text), 1 (binary) or 2 (JSON)"
#endif

namespace {

constexpr tdp::policy::SpecFormat kFormat = TDP_FUZZ_FORMAT == 0   ? tdp::policy::SpecFormat::kText
                                          : TDP_FUZZ_FORMAT == 1 ? tdp::policy::SpecFormat::kBinary
                                                                 : tdp::policy::SpecFormat::kJson;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string content(reinterpret_cast<const char*>(data), size);
  const std::string source = "fuzz.spec";
  const tdp::policy::LoadOptions options = tdp::fuzz::fuzz_load_options();
  auto spec = tdp::policy::parse_spec(content, kFormat, source, options.limits);
  if (!spec.ok()) {
    tdp::fuzz::check_error(spec.status(), source);
    return 0;
  }
  auto policy = tdp::policy::build_policy(*spec, source, "policies/pytorch", options);
  if (!policy.ok()) {
    tdp::fuzz::check_error(policy.status(), source, "policies/pytorch/");
    return 0;
  }
  tdp::fuzz::run_policy(*policy);
  return 0;
}
