#include "sdk/policy/limits.h"

#include <absl/strings/str_cat.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>

namespace tdp::policy {

std::string limit_exceeded(absl::string_view what, int64_t value, absl::string_view unit, int64_t limit,
                           absl::string_view name) {
  return absl::StrCat(what, " has ", value, " ", unit, ", more than the limit of ", limit, " (", name,
                      ": raise it with LoadOptions.limits.", name, " or the tdp flag --", name, ")");
}

int64_t saturated_count(double count) {
  return count >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(count);
}

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct FileCloser {
  void operator()(std::FILE* file) const {
    if (file != nullptr) std::fclose(file);
  }
};

// Reads at most max_bytes + 1 bytes, in chunks, so an endless stream costs max_bytes at most.
absl::StatusOr<std::string> read_stream(std::FILE* file, const std::string& path, int64_t max_bytes,
                                        absl::string_view name, absl::string_view what) {
  std::string content;
  char buffer[1 << 16];
  while (true) {
    const size_t got = std::fread(buffer, 1, sizeof(buffer), file);
    if (got > 0) {
      if (static_cast<int64_t>(content.size() + got) > max_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            path, ": ", limit_exceeded(absl::StrCat(what, " (read so far)"), static_cast<int64_t>(content.size() + got),
                                       "bytes", max_bytes, name)));
      }
      content.append(buffer, got);
    }
    if (got < sizeof(buffer)) break;
  }
  if (std::ferror(file)) return absl::DataLossError(absl::StrCat(path, ": cannot read ", what));
  return content;
}

}  // namespace

absl::StatusOr<std::string> read_bounded_file(const std::string& path, int64_t max_bytes, absl::string_view name,
                                              absl::string_view what) {
  if (path == "-") return read_stream(stdin, "stdin", max_bytes, name, what);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(path, ": cannot open ", what, ": no such file"));
    }
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open ", what, ": ", std::strerror(error)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", what, " is ", file_kind(info.st_mode), ", not a regular file"));
  }
  if (static_cast<int64_t>(info.st_size) > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", limit_exceeded(what, static_cast<int64_t>(info.st_size), "bytes", max_bytes, name)));
  }
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open ", what, ": ", std::strerror(errno)));
  }
  return read_stream(file.get(), path, max_bytes, name, what);
}

namespace {

// What scan_text() does with a byte. Most bytes are plain text, told apart with one table
// load instead of a chain of comparisons: the scan runs on every text and JSON spec before the
// parser, and under the fuzzer's comparison tracing that chain took a sixth of the text fuzzer's time.
enum ByteClass : uint8_t { kText, kQuote, kHash, kOpen, kClose, kOpenAngle, kCloseAngle };

constexpr std::array<uint8_t, 256> byte_classes() {
  std::array<uint8_t, 256> classes{};
  classes['"'] = classes['\''] = kQuote;
  classes['#'] = kHash;
  classes['{'] = classes['['] = kOpen;
  classes['}'] = classes[']'] = kClose;
  classes['<'] = kOpenAngle;
  classes['>'] = kCloseAngle;
  return classes;
}
constexpr std::array<uint8_t, 256> kByteClass = byte_classes();

}  // namespace

TextScan scan_text(absl::string_view text, bool angle_brackets, bool hash_comments, int64_t stop_depth_above) {
  const char* const s = text.data();
  const size_t n = text.size();
  TextScan scan;
  int64_t depth = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t byte_class = kByteClass[static_cast<unsigned char>(s[i])];
    if (byte_class == kText) continue;
    switch (byte_class) {
      case kQuote: {
        // A quoted string: skip to its closing quote, past escapes. An unterminated one ends the
        // text (the parser reports it).
        ++scan.objects;
        const char quote = s[i];
        for (++i; i < n && s[i] != quote && s[i] != '\n'; ++i) {
          if (s[i] == '\\') ++i;
        }
        break;
      }
      case kHash:
        if (hash_comments) {
          while (i < n && s[i] != '\n') ++i;
        }
        break;
      case kOpenAngle:
        if (!angle_brackets) break;
        [[fallthrough]];
      case kOpen:
        if (s[i] != '[') ++scan.objects;
        if (++depth > scan.depth) {
          scan.depth = depth;
          if (scan.depth > stop_depth_above) return scan;
        }
        break;
      case kCloseAngle:
        if (!angle_brackets) break;
        [[fallthrough]];
      case kClose:
        if (depth > 0) --depth;
        break;
    }
  }
  return scan;
}

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// Counts into `count` the objects of one message of `type` read from `input`; false once the
// count passes `stop_above` or the data is malformed (the walk ends either way).
bool count_objects(google::protobuf::io::CodedInputStream& input, const google::protobuf::Descriptor& type,
                   int depth_left, int64_t stop_above, int64_t& count) {
  while (true) {
    const uint32_t tag = input.ReadTag();
    if (tag == 0) return true;  // the end of this message (or of malformed data)
    const FieldDescriptor* field = type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    const bool delimited = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    // A known scalar (packed or not) lands in a repeated field of 8 bytes at most per value;
    // everything else is an object: a message, a string or bytes, an unknown field.
    if (field == nullptr || field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ||
        field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (++count > stop_above) return false;
    }
    if (delimited && field != nullptr && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      uint32_t length = 0;
      if (depth_left == 0 || !input.ReadVarint32(&length)) return false;
      const auto limit = input.PushLimit(static_cast<int>(std::min<uint32_t>(length, INT32_MAX)));
      if (!count_objects(input, *field->message_type(), depth_left - 1, stop_above, count)) return false;
      if (!input.ConsumedEntireMessage()) return false;
      input.PopLimit(limit);
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      return false;
    }
  }
}

}  // namespace

int64_t binary_objects(absl::string_view bytes, const google::protobuf::Descriptor& type, int max_depth,
                       int64_t stop_above) {
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  int64_t count = 0;
  count_objects(input, type, max_depth, stop_above, count);
  return count;
}

int parser_recursion_limit(const Limits& limits) {
  return static_cast<int>(std::min<int64_t>(limits.max_nesting_depth, 1 << 20));
}

absl::Status check_spec_objects(int64_t objects, const Limits& limits, absl::string_view source,
                                absl::string_view what) {
  if (objects <= limits.max_spec_objects) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      source, ": ",
      limit_exceeded(what, objects, "messages and strings (or more)", limits.max_spec_objects, "max_spec_objects")));
}

absl::Status parse_binary_within_limits(absl::string_view bytes, google::protobuf::Message& message,
                                        const Limits& limits, absl::string_view source, absl::string_view what) {
  const int recursion_limit = parser_recursion_limit(limits);
  const google::protobuf::Descriptor& type = *message.GetDescriptor();
  if (auto status = check_spec_objects(binary_objects(bytes, type, recursion_limit, limits.max_spec_objects), limits,
                                       source, what);
      !status.ok()) {
    return status;
  }
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  input.SetRecursionLimit(recursion_limit);
  if (bytes.size() <= INT32_MAX && message.ParseFromCodedStream(&input)) return absl::OkStatus();
  // The wire format says nothing about where it went wrong; say what was read.
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": not a valid binary ", type.name(), " (", bytes.size(),
      " bytes: malformed wire data, a field of the wrong type, or messages nested more than ", limits.max_nesting_depth,
      " deep (max_nesting_depth: raise it with LoadOptions.limits.max_nesting_depth or the tdp flag "
      "--max_nesting_depth))"));
}

}  // namespace tdp::policy
