// The spec fuzzers' body, compiled once (spec_fuzz.cc): the input is a whole spec file in the
// given format, parsed, validated, built with its parameters and self tests under small limits
// (fuzz_common.h), and run once per interaction type when it loads. Relative files
// (parameters_file, torchscript.file) resolve in policies/pytorch, so the seed corpus's
// TorchScript actor loads. Each format's libFuzzer entry point (spec_fuzzer.cc, built once per
// format) calls it; this header stays free of LibTorch so that those builds are quick.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tdp::fuzz {

enum class FuzzedFormat { kText = 0, kBinary = 1, kJson = 2 };

int fuzz_spec(const uint8_t* data, size_t size, FuzzedFormat format);

}  // namespace tdp::fuzz
