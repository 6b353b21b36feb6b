#include "sdk/policy/keys.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

#include <algorithm>
#include <set>

#include "tdpolicy/spec.pb.h"

namespace tdp::policy {
namespace {

void collect_overwrites(const tdpolicy::Module& module, std::set<NestedKey>& overwritten) {
  for (const std::string& text : module.overwrite_keys()) {
    if (auto key = parse_key(text); key.ok()) overwritten.insert(*std::move(key));
  }
  for (const auto& child : module.sequential().modules()) collect_overwrites(child, overwritten);
  for (const auto& child : module.probabilistic_sequential().modules()) collect_overwrites(child, overwritten);
}

}  // namespace

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

std::vector<NestedKey> state_keys(const tdpolicy::PolicySpec& spec) {
  std::set<NestedKey> overwritten;
  collect_overwrites(spec.module(), overwritten);
  std::vector<NestedKey> keys;
  for (const tdpolicy::InputSpec& input : spec.inputs()) {
    auto key = parse_key(input.key());
    if (key.ok() && overwritten.count(*key) && std::find(keys.begin(), keys.end(), *key) == keys.end()) {
      keys.push_back(*std::move(key));
    }
  }
  return keys;
}

}  // namespace tdp::policy
