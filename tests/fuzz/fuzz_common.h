// What every libFuzzer entry point of tests/fuzz shares: small limits, so that no input can make
// the loader allocate more than about 256 MiB (run.sh also passes -malloc_limit_mb=256, so a
// larger single allocation is reported as a finding), and a step that runs a policy that did
// load, so that a spec the validator accepted is also exercised by the module tree it built.
//
//   tdp::policy::LoadOptions options = tdp::fuzz::fuzz_load_options();
//   auto policy = tdp::policy::build_policy(spec, "fuzz", dir, options);
//   if (policy.ok()) tdp::fuzz::run_policy(*policy);   // must not crash; may throw and catch
//
// A crash, a sanitizer report, an uncaught exception or an error Status with an empty message
// (checked with TDP_FUZZ_CHECK, which aborts) is a finding.
#pragma once

#include <string>

#include "sdk/policy/policy.h"

// Aborts with a message: a broken invariant is a finding, in libFuzzer and in the replay test.
#define TDP_FUZZ_CHECK(condition, message) \
  ::tdp::fuzz::check((condition), #condition, (message), __FILE__, __LINE__)

namespace tdp::fuzz {

void check(bool ok, const char* condition, const std::string& message, const char* file, int line);

// 2^20 elements per tensor and 2^22 in all (16 MiB of float32, held a few times while loading),
// depth 100 as by default.
policy::Limits fuzz_limits();
policy::LoadOptions fuzz_load_options();

// Every error must say something and name where it came from: `source`, or `other_source` when
// not empty (a parameters file's errors name that file), and must not be build_policy's generic
// "cannot load the policy: <exception>" fallback (validation should have named the field).
void check_error(const absl::Status& status, const std::string& source, const std::string& other_source = "");

// Calls the module on zeros of the declared input shapes at batch 2, under every interaction
// type. Exceptions from the module tree are allowed (tensor code throws, as LibTorch does; the
// Actor turns them into a Status); crashes are not.
void run_policy(const policy::Policy& policy);

}  // namespace tdp::fuzz
