// Keys as specs write them: a string whose "/" separates nesting levels.
//
//   tdp::NestedKey key = tdp::spec::parse_key("next/observation");   // ('next', 'observation')
//   std::string text = tdp::spec::key_string(key);                   // "next/observation"
#pragma once

#include <absl/status/statusor.h>

#include <string>

#include "sdk/tensordict/nested_key.h"

namespace tdp::spec {

// An empty string, or an empty level ("a//b", "/a"), is an error.
absl::StatusOr<NestedKey> parse_key(const std::string& text);
std::string key_string(const NestedKey& key);

}  // namespace tdp::spec
