// libFuzzer entry point for the spec loader in the format TDP_FUZZ_FORMAT names (0 text,
// 1 binary, 2 JSON; one binary per format, see BUILD.bazel); the body is spec_fuzz.cc's. The text
// target also has a structure-aware mutator (text_mutator.cc).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/spec_fuzz.h"

#ifndef TDP_FUZZ_FORMAT
#error "TDP_FUZZ_FORMAT must be 0 (text), 1 (binary) or 2 (JSON)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tdp::fuzz::fuzz_spec(data, size, static_cast<tdp::fuzz::FuzzedFormat>(TDP_FUZZ_FORMAT));
}
