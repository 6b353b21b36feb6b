// libFuzzer entry point for the parameters file: the input is the bytes of a binary
// tdpolicy.Parameters file, which a fixed spec (policies/pytorch/gaussian_actor.pbtxt with its
// embedded parameters moved out, parameters_file "params.pb") loads from its folder, under the
// small limits of fuzz_common.h. A policy that loads is run under every interaction type.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "sdk/policy/policy.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

struct Fixture {
  tdpolicy::PolicySpec spec;
  std::string dir;
  std::string file;
};

const Fixture& fixture() {
  static const Fixture* f = [] {
    auto* out = new Fixture;
    auto spec = tdp::policy::read_spec("policies/pytorch/gaussian_actor.pbtxt");
    TDP_FUZZ_CHECK(spec.ok(), std::string(spec.status().message()));
    out->spec = *spec;
    out->spec.clear_parameters();
    out->spec.clear_init_seed();
    out->spec.set_parameters_file("params.pb");
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/tdp_params_fuzzer_XXXXXX";
    TDP_FUZZ_CHECK(mkdtemp(dir.data()) != nullptr, "cannot create a temporary folder " + dir);
    out->dir = dir;
    out->file = dir + "/params.pb";
    return out;
  }();
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& f = fixture();
  {
    std::ofstream out(f.file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    TDP_FUZZ_CHECK(static_cast<bool>(out), "cannot write " + f.file);
  }
  const std::string source = "fuzz_params_spec.pbtxt";
  auto policy = tdp::policy::build_policy(f.spec, source, f.dir, tdp::fuzz::fuzz_load_options());
  if (!policy.ok()) {
    tdp::fuzz::check_error(policy.status(), source, f.file);
    return 0;
  }
  tdp::fuzz::run_policy(*policy);
  return 0;
}
