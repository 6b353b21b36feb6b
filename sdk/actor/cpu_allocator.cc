#include "sdk/actor/cpu_allocator.h"

#include <absl/base/config.h>
#include <absl/strings/str_cat.h>

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tdp::actor {

absl::Status tune_cpu_allocator(size_t retain_bytes) {
#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || defined(ABSL_HAVE_THREAD_SANITIZER) || \
    defined(ABSL_HAVE_MEMORY_SANITIZER)
  // A sanitizer's allocator serves malloc and ignores mallopt; it keeps freed memory itself (in
  // quarantine), so the page faults this call prevents do not happen and there is nothing to tune.
  (void)retain_bytes;
  return absl::OkStatus();
#elif defined(__GLIBC__)
  // glibc's ceiling for M_MMAP_THRESHOLD: 4 MiB * sizeof(long) (32 MiB on 64-bit).
  constexpr int kMaxMmapThreshold = 4 * 1024 * 1024 * static_cast<int>(sizeof(long));
  const int trim = retain_bytes > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(retain_bytes);
  if (mallopt(M_MMAP_THRESHOLD, kMaxMmapThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, trim) != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("tune_cpu_allocator: glibc's mallopt refused M_MMAP_THRESHOLD=", kMaxMmapThreshold,
                     " or M_TRIM_THRESHOLD=", trim));
  }
  return absl::OkStatus();
#else
  (void)retain_bytes;
  return absl::FailedPreconditionError(
      "tune_cpu_allocator: not built against glibc; use the allocator's own settings (jemalloc, "
      "tcmalloc) to keep freed memory mapped");
#endif
}

}  // namespace tdp::actor
