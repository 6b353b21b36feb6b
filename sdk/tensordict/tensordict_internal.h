// Internal to sdk/tensordict: TensorDictImpl, the entry tree every TensorDict handle shares, and
// the helpers the tensordict_*.cc files have in common.
#pragma once

#include <ATen/core/Tensor.h>
#include <absl/strings/str_cat.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp {

namespace internal {

inline int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  if (dim < -ndim || dim >= ndim) {
    throw std::out_of_range(absl::StrCat("TensorDict.", op, ": dim ", dim,
                                         " is out of range for ", ndim, " batch dims"));
  }
  return dim < 0 ? dim + ndim : dim;
}

// Whether `shape` starts with `prefix`. A loop rather than ArrayRef's ==, which std::equal turns
// into an out-of-line memcmp call: batch sizes have one or two dims, and every write checks one.
inline bool has_prefix(c10::IntArrayRef shape, c10::IntArrayRef prefix) {
  if (shape.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (shape[i] != prefix[i]) return false;
  }
  return true;
}

}  // namespace internal

// Entries in insertion order. A linear scan beats hashing for the handful of keys a policy uses;
// a policy step's few entries live inside the impl (one allocation, make_shared's, per TensorDict).
struct TensorDictImpl {
  // User-provided: make_shared's value-initialization would otherwise zero the whole impl, the
  // entries' inline storage included, before constructing it.
  TensorDictImpl() {}

  std::vector<int64_t> batch_size;
  std::optional<c10::Device> device;
  c10::SmallVector<std::pair<std::string, Entry>, 4> entries;

  static TensorDictImpl& of(const TensorDict& td) { return *td.impl_; }
  static TensorDict wrap(std::shared_ptr<TensorDictImpl> impl) { return TensorDict(std::move(impl)); }
  static std::shared_ptr<TensorDictImpl> make(std::vector<int64_t> batch_size,
                                              std::optional<c10::Device> device) {
    auto impl = std::make_shared<TensorDictImpl>();
    impl->batch_size = std::move(batch_size);
    impl->device = device;
    return impl;
  }
  static TensorDictImpl* sub(const Entry& entry) { return entry.tensordict_.get(); }

  Entry* find(const std::string& name) {
    for (auto& [entry_name, entry] : entries) {
      if (same_name(entry_name, name)) return &entry;
    }
    return nullptr;
  }
  // std::string's == calls memcmp out of line for every candidate of the right length. A policy's
  // names are short: up to 16 bytes compare as two overlapping words each, inline.
  static bool same_name(const std::string& a, const std::string& b) {
    const size_t size = a.size();
    if (size != b.size()) return false;
    const char* x = a.data();
    const char* y = b.data();
    if (size >= 8 && size <= 16) {
      return load<uint64_t>(x) == load<uint64_t>(y) && load<uint64_t>(x + size - 8) == load<uint64_t>(y + size - 8);
    }
    if (size >= 4 && size < 8) {
      return load<uint32_t>(x) == load<uint32_t>(y) && load<uint32_t>(x + size - 4) == load<uint32_t>(y + size - 4);
    }
    return std::memcmp(x, y, size) == 0;
  }
  template <typename Word>
  static Word load(const char* bytes) {
    Word word;
    std::memcpy(&word, bytes, sizeof(Word));
    return word;
  }
  const Entry* find(const std::string& name) const { return const_cast<TensorDictImpl*>(this)->find(name); }

  std::vector<NestedKey> level_keys(const NestedKey& prefix) const;

  // The entry at `key`, or nullptr. On a miss `error` (when given) explains where the path broke.
  // A top-level key without `error` (a policy step's reads) is one inline scan of the names.
  const Entry* lookup(const NestedKey& key, std::string* error) const {
    if (key.size() == 1 && error == nullptr) return find(key.leaf());
    return lookup_path(key, error);
  }
  const Entry* lookup_path(const NestedKey& key, std::string* error) const;

  // lookup() that throws KeyError on a miss. The message is built only then, by a second, cold
  // lookup: a hit builds no string.
  const Entry& lookup_or_throw(const NestedKey& key) const {
    if (const Entry* entry = lookup(key, nullptr)) return *entry;
    throw_missing(key);
  }
  [[noreturn]] void throw_missing(const NestedKey& key) const;

  void check_fits(const NestedKey& key, const Entry& value, c10::IntArrayRef batch) const;
  // The two rules a tensor write obeys, shared by the validating write (check_fits(), placed())
  // and set()'s in-place overwrite: a defined tensor whose leading dims are `batch`, and a tensor
  // that stays where it is (this TensorDict has no device, or the tensor is on it).
  static bool fits(const at::Tensor& tensor, c10::IntArrayRef batch) {
    return tensor.defined() && internal::has_prefix(tensor.sizes(), batch);
  }
  bool stays_on_device(const at::Tensor& tensor) const { return !device || tensor.device() == *device; }

  // `value` on this TensorDict's device when it has one. By value: an entry already in place
  // is moved through, not copied.
  Entry placed(Entry value) const {
    if (device) return moved_to_device(std::move(value));
    return value;
  }
  // placed() on a TensorDict with a device (out of line: device-less writes never run it).
  Entry moved_to_device(Entry value) const;

  // Validates everything first, so a throw leaves the tree untouched. `value` by value: the
  // caller's temporary is moved into the tree.
  void set(const NestedKey& key, Entry value);
  // set() of a tensor. A policy step's writes replace top-level tensors that already fit; those
  // swap the tensor in place, inline, with no Entry built or moved; everything else goes through
  // set() above, which validates and explains.
  void set(const NestedKey& key, at::Tensor value) {
    if (key.size() == 1) {
      Entry* existing = find(key.leaf());
      if (existing != nullptr && existing->is_tensor() && fits(value, batch_size) && stays_on_device(value)) {
        existing->tensor_ = std::move(value);
        return;
      }
    }
    set(key, Entry(std::move(value)));
  }
  // The TensorDicts on the way to `key` from path index `depth` on, created (set's nested case);
  // returns the innermost.
  TensorDictImpl* create_parents(const NestedKey& key, size_t depth);
  // Appends a new entry (set's first write of a key).
  void add(const std::string& name, Entry value);

  // Recursive copy of the tree; `leaf_fn` maps each tensor (undefined results are dropped) and
  // `batch_fn` each TensorDict's batch_size.
  std::shared_ptr<TensorDictImpl> transform(
      const NestedKey& prefix,
      const std::function<at::Tensor(const NestedKey&, const at::Tensor&)>& leaf_fn,
      const std::function<std::vector<int64_t>(c10::IntArrayRef)>& batch_fn,
      std::optional<c10::Device> new_device) const;

  std::shared_ptr<TensorDictImpl> clone_structure(bool deep) const;

  // A batch-dim op: `leaf_fn` gets every tensor (its batch dims are the first `ndim`); nested
  // TensorDicts keep their extra batch dims after `new_batch`.
  TensorDict map_batch(const std::function<at::Tensor(const at::Tensor&)>& leaf_fn,
                       std::vector<int64_t> new_batch) const;

  // The entries under `path` (this TensorDict's own path, extended and restored on the way
  // down), with their full keys: one key built per entry listed, none per level passed.
  void collect(std::vector<std::string>& path, bool include_nested, bool leaves_only,
               std::vector<std::pair<NestedKey, Entry>>& out) const;

  // Python's repr, for to_string(); defined in tensordict_print.cc.
  void print(std::ostream& out, const std::string& indent) const;
};

}  // namespace tdp
