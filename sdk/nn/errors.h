// Internal: adds module context to an exception while keeping its type, so that callers can
// still catch tdp::KeyError, std::invalid_argument or c10::Error after a module rethrows.
#pragma once

#include <string>

namespace tdp::nn::detail {

// Call only inside a catch block: rethrows the exception in flight, its message prefixed with
// `context` (c10::Error gets it appended as context, LibTorch's way).
[[noreturn]] void rethrow_with_context(const std::string& context);

}  // namespace tdp::nn::detail
