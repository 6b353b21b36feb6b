#include "sdk/spec/keys.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

namespace tdp::spec {

absl::StatusOr<NestedKey> parse_key(const std::string& text) {
  std::vector<std::string> path = absl::StrSplit(text, '/');
  for (const std::string& level : path) {
    if (level.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("key \"", text, "\" is empty or has an empty level (levels are separated by \"/\")"));
    }
  }
  return NestedKey(std::move(path));
}

std::string key_string(const NestedKey& key) { return key.join("/"); }

}  // namespace tdp::spec
