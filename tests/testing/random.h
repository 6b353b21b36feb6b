// seeded(seed): a fresh CPU generator, for draws that must repeat without touching the global one.
//
//   at::Tensor a = dist.sample({2}, seeded(7));
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <cstdint>

namespace tdp::test_util {

inline at::Generator seeded(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

}  // namespace tdp::test_util
