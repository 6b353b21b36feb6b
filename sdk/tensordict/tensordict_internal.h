// Internal to sdk/tensordict: TensorDictImpl, the entry tree every TensorDict handle shares, and
// the helpers the tensordict_*.cc files have in common.
#pragma once

#include <ATen/core/Tensor.h>
#include <absl/strings/str_cat.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
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

}  // namespace internal

// Entries in insertion order. A linear scan beats hashing for the handful of keys a policy uses.
struct TensorDictImpl {
  std::vector<int64_t> batch_size;
  std::optional<c10::Device> device;
  std::vector<std::pair<std::string, Entry>> entries;

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

  // The entry named `name` at this level, or nullptr.
  Entry* find(const std::string& name);
  const Entry* find(const std::string& name) const { return const_cast<TensorDictImpl*>(this)->find(name); }

  std::vector<NestedKey> level_keys(const NestedKey& prefix) const;

  // The entry at `key`, or nullptr. On a miss `error` (when given) explains where the path broke.
  const Entry* lookup(const NestedKey& key, std::string* error) const;
  // lookup() that throws KeyError on a miss; the message is built only then.
  const Entry& lookup_or_throw(const NestedKey& key) const;

  void check_fits(const NestedKey& key, const Entry& value, c10::IntArrayRef batch) const;
  // `value` on this TensorDict's device when it has one. By value: an entry already in place
  // is moved through, not copied.
  Entry placed(Entry value) const;

  // Validates everything first, so a throw leaves the tree untouched. `value` by value: the
  // caller's temporary is moved into the tree.
  void set(const NestedKey& key, Entry value);
  // set() of a tensor: a top-level tensor entry that `value` fits is overwritten in place; any
  // other write goes through set() above, which validates and explains.
  void set(const NestedKey& key, at::Tensor value);

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
