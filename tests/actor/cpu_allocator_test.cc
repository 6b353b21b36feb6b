// tune_cpu_allocator: after it, a freed multi-MB block stays in the heap for the next step
// instead of going back to the kernel.
#include "sdk/actor/cpu_allocator.h"

#include <absl/base/config.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "tests/testing/status_matchers.h"

namespace tdp::actor {
namespace {

#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || defined(ABSL_HAVE_THREAD_SANITIZER) || \
    defined(ABSL_HAVE_MEMORY_SANITIZER)
// The sanitizer's allocator serves malloc: nothing to tune, and glibc's mallinfo2 says nothing.
TEST(CpuAllocator, IsOkWithoutChangeUnderASanitizer) { ASSERT_OK(tune_cpu_allocator()); }
#elif defined(__GLIBC__)
TEST(CpuAllocator, FreedActivationsStayMappedForTheNextStep) {
  ASSERT_OK(tune_cpu_allocator());
  constexpr size_t kStep = size_t{8} << 20;  // a batch-4096 step's activations
  void* block = std::malloc(kStep);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kStep);
  std::free(block);
  // Default glibc would have served 8 MiB with mmap and unmapped it on free.
  EXPECT_GE(mallinfo2().fordblks, kStep);
}
#endif

}  // namespace
}  // namespace tdp::actor
