// Limits: how much a spec file, a parameters file or a `tdp run` input may ask for, checked
// before anything is allocated. Specs and inputs come from other people; a limit turns a file
// that would exhaust memory, the stack or the CPU into an error that names the limit, the value
// and how to raise it. The defaults fit a 24 GiB machine with room to spare.
//
//   tdp::policy::LoadOptions options;
//   options.limits.max_total_elements = int64_t{1} << 32;       // a bigger policy
//   auto policy = tdp::policy::load_policy("big.pb", options);    // `tdp ... --max_total_elements=...`
//   absl::StatusOr<std::string> bytes =
//       tdp::policy::read_bounded_file("p.pb", options.limits.max_spec_bytes, "max_spec_bytes", "the spec file");
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdint>
#include <string>

namespace tdp::policy {

struct Limits {
  // Bytes of a spec file and of a parameters file (embedded weights count). A weight's bytes are
  // held about three times while loading (bytes, parsed message, tensors); small entries cost
  // more parsed (up to 8 bytes per packed integer byte; messages and strings: max_spec_objects).
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
  // Messages and strings in a spec file or a parameters file, the objects its parser allocates
  // one by one (each 32 to 200 bytes; a binary one can take 2 bytes of the file): a file of
  // empty entries takes 45 times its size in memory. 2^22: under 1 GiB; real specs hold thousands.
  int64_t max_spec_objects = int64_t{1} << 22;
  // Nesting of arrays and objects in a `tdp run` JSON input (a tensor's dims plus nested keys).
  int64_t max_json_depth = 32;
};

// An element count computed in double (a product of untrusted sizes overflows int64) as an
// int64 for a message: INT64_MAX when it does not fit.
int64_t saturated_count(double count);

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

// What a text or JSON spec holds, counted before any parser runs (linear, no allocation).
struct TextScan {
  // The deepest nesting of `{`/`}` (and `<`/`>` when `angle_brackets`, as the text format allows)
  // and `[`/`]`; counting stops once past `stop_depth_above`.
  int64_t depth = 0;
  // Messages (`{`, and `<` with angle_brackets) and quoted strings: what a parser allocates one by
  // one. An upper bound (a JSON key counts too).
  int64_t objects = 0;
};
// Skips quoted strings and, when `hash_comments`, `#` comments to the end of the line.
TextScan scan_text(absl::string_view text, bool angle_brackets, bool hash_comments, int64_t stop_depth_above);

// The same count for the binary wire format, walked with the schema of `type`: every message,
// string or bytes value and unknown field, at any depth (at most `max_depth`, as the parser).
// Malformed data ends the count (the parser then reports it); stops once past `stop_above`.
int64_t binary_objects(absl::string_view bytes, const google::protobuf::Descriptor& type, int max_depth,
                       int64_t stop_above);

// The recursion limit the protobuf parsers get: max_nesting_depth, capped where an int ends.
int parser_recursion_limit(const Limits& limits);

// OK, or "<source>: <what> has <objects> messages and strings (or more), more than the limit of
// ... (max_spec_objects: ...)" when `objects` passes max_spec_objects.
absl::Status check_spec_objects(int64_t objects, const Limits& limits, absl::string_view source,
                                absl::string_view what);

// Parses the binary wire format of `message`'s type from `bytes`, within `limits`: the objects
// are counted first (max_spec_objects, `what` names the file in that error), the parser's nesting
// is bounded (max_nesting_depth). Errors start with `source`; a malformed file is an
// InvalidArgument that names the message type and the byte count (the wire format says no more).
absl::Status parse_binary_within_limits(absl::string_view bytes, google::protobuf::Message& message,
                                        const Limits& limits, absl::string_view source, absl::string_view what);

}  // namespace tdp::policy
