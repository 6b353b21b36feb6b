#include "sdk/tensordict/nested_key.h"

#include <absl/hash/hash.h>
#include <absl/strings/str_join.h>

#include <sstream>

namespace tdp {

NestedKey::NestedKey(std::initializer_list<NestedKey> parts) {
  for (const NestedKey& part : parts) {
    path_.insert(path_.end(), part.path_.begin(), part.path_.end());
  }
}

NestedKey NestedKey::parent() const {
  if (path_.empty()) return NestedKey();
  return NestedKey(std::vector<std::string>(path_.begin(), path_.end() - 1));
}

bool NestedKey::starts_with(const NestedKey& prefix) const {
  return prefix.path_.size() <= path_.size() &&
         std::equal(prefix.path_.begin(), prefix.path_.end(), path_.begin());
}

NestedKey NestedKey::operator+(const NestedKey& suffix) const {
  std::vector<std::string> path = path_;
  path.insert(path.end(), suffix.path_.begin(), suffix.path_.end());
  return NestedKey(std::move(path));
}

namespace {
void append_python_string(std::string& out, const std::string& name) {
  out += '\'';
  for (char c : name) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  out += '\'';
}
}  // namespace

std::string NestedKey::to_string() const {
  std::string out;
  if (path_.size() == 1) {
    append_python_string(out, path_[0]);
    return out;
  }
  out += '(';
  for (size_t i = 0; i < path_.size(); ++i) {
    if (i > 0) out += ", ";
    append_python_string(out, path_[i]);
  }
  // Python writes a one-element tuple as ('a',); only the empty key can reach here with size 0.
  out += ')';
  return out;
}

std::string NestedKey::join(std::string_view separator) const {
  return absl::StrJoin(path_, absl::string_view(separator.data(), separator.size()));
}

std::ostream& operator<<(std::ostream& out, const NestedKey& key) { return out << key.to_string(); }

std::string keys_to_string(const std::vector<NestedKey>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) out += ", ";
    out += keys[i].to_string();
  }
  return out + "]";
}

}  // namespace tdp

size_t std::hash<tdp::NestedKey>::operator()(const tdp::NestedKey& key) const noexcept {
  return absl::Hash<tdp::NestedKey>()(key);
}
