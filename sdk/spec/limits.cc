#include "sdk/spec/limits.h"

#include <absl/strings/str_cat.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>

namespace tdp::spec {

std::string limit_exceeded(absl::string_view what, int64_t value, absl::string_view unit, int64_t limit,
                           absl::string_view name) {
  return absl::StrCat(what, " has ", value, " ", unit, ", more than the limit of ", limit, " (", name,
                      ": raise it with LoadOptions.limits.", name, " or the tdp flag --", name, ")");
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

// What nesting_depth() does with a byte. Most bytes are plain text, told apart with one table
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

int64_t nesting_depth(absl::string_view text, bool angle_brackets, bool hash_comments, int64_t stop_above) {
  const char* const s = text.data();
  const size_t n = text.size();
  int64_t depth = 0;
  int64_t deepest = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t byte_class = kByteClass[static_cast<unsigned char>(s[i])];
    if (byte_class == kText) continue;
    switch (byte_class) {
      case kQuote: {
        // A quoted string: skip to its closing quote, past escapes. An unterminated one ends the
        // text (the parser reports it).
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
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > stop_above) return deepest;
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
  return deepest;
}

}  // namespace tdp::spec
