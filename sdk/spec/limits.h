// Limits: how much a spec file, a parameters file or a `tdp run` input may ask for, checked
// before anything is allocated. Specs and inputs come from other people; a limit turns a file
// that would exhaust memory, the stack or the CPU into an error that names the limit, the value
// and how to raise it. The defaults fit a 24 GiB machine with room to spare.
//
//   tdp::spec::LoadOptions options;
//   options.limits.max_total_elements = int64_t{1} << 32;       // a bigger policy
//   auto policy = tdp::spec::load_policy("big.pb", options);    // `tdp ... --max_total_elements=...`
//   absl::StatusOr<std::string> bytes =
//       tdp::spec::read_bounded_file("p.pb", options.limits.max_spec_bytes, "max_spec_bytes", "the spec file");
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include <cstdint>
#include <string>

namespace tdp::spec {

struct Limits {
  // Bytes of a spec file and of a parameters file (embedded weights count). Each is held about
  // three times while loading (bytes, parsed message, tensors): 3 GiB at most.
  int64_t max_spec_bytes = int64_t{1} << 30;
  // Bytes of a `tdp run` JSON input. Parsed JSON takes about 30 times its text: 2 GiB at most.
  int64_t max_input_bytes = int64_t{64} << 20;
  // Message nesting of a spec in every format (text braces, JSON objects, binary groups).
  // protobuf's own binary and JSON parsers stop at 100.
  int64_t max_nesting_depth = 100;
  // Elements of one tensor: a parameter, a self-test tensor, one layer's weights, one declared
  // input's per-env shape (2^28: 1 GiB of float32).
  int64_t max_tensor_elements = int64_t{1} << 28;
  // All declared elements together: every layer's weights, every embedded or file parameter,
  // the self tests' tensors and the declared inputs' per-env shapes (2^30: 4 GiB of float32).
  int64_t max_total_elements = int64_t{1} << 30;
  // Nesting of arrays and objects in a `tdp run` JSON input (a tensor's dims plus nested keys).
  int64_t max_json_depth = 32;
};

// "<what> has <value> <unit>, more than the limit of <limit> (<name>: raise it with
// LoadOptions.limits.<name> or the tdp flag --<name>)".
std::string limit_exceeded(absl::string_view what, int64_t value, absl::string_view unit, int64_t limit,
                           absl::string_view name);

// Reads a whole regular file of at most `max_bytes` bytes. A directory, a device (/dev/zero), a
// FIFO or a file over the limit is an error naming `path`, what the file is for (`what`: "the
// spec file") and, for the size, the limit `name`; nothing is read past max_bytes + 1.
// `path` "-" reads standard input, bounded the same way.
absl::StatusOr<std::string> read_bounded_file(const std::string& path, int64_t max_bytes, absl::string_view name,
                                              absl::string_view what);

// The deepest nesting of `{`/`}` (and `<`/`>` when `angle_brackets`, as the text format allows)
// and `[`/`]` in text, skipping quoted strings and, when `hash_comments`, `#` comments to the end
// of the line. Linear, no allocation; stops counting once past `stop_above`.
int64_t nesting_depth(absl::string_view text, bool angle_brackets, bool hash_comments, int64_t stop_above);

}  // namespace tdp::spec
