// NestedKey: the name of an entry in a TensorDict, as a path of strings.
//
// A plain string names a top-level entry; a path names an entry inside nested TensorDicts,
// like Python's tuple keys in tensordict. Nested paths flatten, so a key built from another
// key's path plus a leaf is the same key:
//
//   tdp::NestedKey obs = "observation";                  // 'observation'
//   tdp::NestedKey pixels = {"next", "pixels"};           // ('next', 'pixels')
//   tdp::NestedKey same = {"next", {"pixels"}};           // ('next', 'pixels')
//   tdp::NestedKey deeper = {pixels, "red"};              // ('next', 'pixels', 'red')
//   std::cout << deeper;                                  // prints ('next', 'pixels', 'red')
//
// NestedKey is a value type: hashable (std::hash and absl::Hash), ordered, comparable.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tdp {

class NestedKey {
 public:
  // The empty key names no entry; TensorDict rejects it.
  NestedKey() = default;
  NestedKey(const char* key) : path_{std::string(key)} {}     // NOLINT: implicit, like Python
  NestedKey(std::string key) : path_{std::move(key)} {}       // NOLINT
  NestedKey(std::string_view key) : path_{std::string(key)} {}  // NOLINT
  // Concatenates the parts' paths: {"a", {"b", "c"}} is ('a', 'b', 'c').
  NestedKey(std::initializer_list<NestedKey> parts);  // NOLINT
  explicit NestedKey(std::vector<std::string> path) : path_(std::move(path)) {}

  const std::vector<std::string>& path() const { return path_; }
  size_t size() const { return path_.size(); }
  bool empty() const { return path_.empty(); }
  bool is_nested() const { return path_.size() > 1; }
  // The last name in the path: the entry's own name inside its parent.
  const std::string& leaf() const { return path_.back(); }
  // The path without its last name; empty for a top-level key.
  NestedKey parent() const;
  bool starts_with(const NestedKey& prefix) const;
  // This path followed by `suffix`'s.
  NestedKey operator+(const NestedKey& suffix) const;

  // Python's repr: 'a' for a top-level key, ('a', 'b') for a nested one.
  std::string to_string() const;
  // The names joined by `separator`: {"a", "b"} -> "a.b" with ".".
  std::string join(std::string_view separator) const;

  friend bool operator==(const NestedKey& a, const NestedKey& b) { return a.path_ == b.path_; }
  friend bool operator!=(const NestedKey& a, const NestedKey& b) { return a.path_ != b.path_; }
  friend bool operator<(const NestedKey& a, const NestedKey& b) { return a.path_ < b.path_; }
  friend bool operator<=(const NestedKey& a, const NestedKey& b) { return a.path_ <= b.path_; }
  friend bool operator>(const NestedKey& a, const NestedKey& b) { return a.path_ > b.path_; }
  friend bool operator>=(const NestedKey& a, const NestedKey& b) { return a.path_ >= b.path_; }

  template <typename H>
  friend H AbslHashValue(H state, const NestedKey& key) {
    return H::combine(std::move(state), key.path_);
  }

 private:
  std::vector<std::string> path_;
};

std::ostream& operator<<(std::ostream& out, const NestedKey& key);

// Formats keys as a Python list: ['a', ('b', 'c')]. Error messages use it to list what exists.
std::string keys_to_string(const std::vector<NestedKey>& keys);

}  // namespace tdp

template <>
struct std::hash<tdp::NestedKey> {
  size_t operator()(const tdp::NestedKey& key) const noexcept;
};
