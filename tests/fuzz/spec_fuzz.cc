#include "tests/fuzz/spec_fuzz.h"

#include <string>

#include "sdk/policy/policy.h"
#include "tests/fuzz/fuzz_common.h"

namespace tdp::fuzz {

int fuzz_spec(const uint8_t* data, size_t size, FuzzedFormat format) {
  const std::string content(reinterpret_cast<const char*>(data), size);
  const std::string source = "fuzz.spec";
  const policy::LoadOptions options = fuzz_load_options();
  const policy::SpecFormat spec_format = format == FuzzedFormat::kText     ? policy::SpecFormat::kText
                                         : format == FuzzedFormat::kBinary ? policy::SpecFormat::kBinary
                                                                           : policy::SpecFormat::kJson;
  auto spec = policy::parse_spec(content, spec_format, source, options.limits);
  if (!spec.ok()) {
    check_error(spec.status(), source);
    return 0;
  }
  auto policy = policy::build_policy(*spec, source, "policies/pytorch", options);
  if (!policy.ok()) {
    check_error(policy.status(), source, "policies/pytorch/");
    return 0;
  }
  run_policy(*policy);
  return 0;
}

}  // namespace tdp::fuzz
