// Internal: adds module context to an exception while keeping its type, so that callers can
// still catch tdp::KeyError, std::invalid_argument or c10::Error after a module rethrows; and
// tells a failed allocation from other errors, whatever type LibTorch gave it.
#pragma once

#include <exception>
#include <string>

namespace tdp::nn::detail {

// Call only inside a catch block: rethrows the exception in flight, its message prefixed with
// `context` (c10::Error gets it appended as context, LibTorch's way).
[[noreturn]] void rethrow_with_context(const std::string& context);

// True for a failed allocation: std::bad_alloc, c10::OutOfMemoryError, or the plain c10::Error
// LibTorch's CPU allocator throws ("DefaultCPUAllocator: can't allocate memory"), with or
// without the context modules add on the way up.
bool is_allocation_failure(const std::exception& error);

}  // namespace tdp::nn::detail
