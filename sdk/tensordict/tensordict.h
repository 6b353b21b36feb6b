// TensorDict: an ordered dictionary of tensors (and nested TensorDicts) that share leading
// batch dimensions. It is the container every tdpolicy module reads its inputs from and writes
// its outputs to, the C++ counterpart of Python's tensordict.TensorDict.
//
//   tdp::TensorDict td({{"observation", torch::randn({4, 17})}}, /*batch_size=*/{4});
//   td.set({"next", "reward"}, torch::zeros({4, 1}));     // creates the nested "next" entry
//   at::Tensor obs = td.get("observation");                 // [4, 17]
//   tdp::TensorDict first = td[0];                          // batch_size [], obs [17]
//   tdp::TensorDict both = tdp::TensorDict::stack({td, td}, 0);  // batch_size [2, 4]
//
// Semantics follow tensordict:
// - batch_size: every entry's leading dims equal it; a nested TensorDict's batch_size starts with
//   its parent's. A `set` that breaks this throws, naming the key and both shapes.
// - device: optional; when set, `set` moves tensors there.
// - Reference semantics, like at::Tensor: copying a TensorDict copies a handle to the same
//   entries (so a nested TensorDict taken with get_tensordict() writes through to its parent).
//   clone() makes an independent copy.
// - Errors: a missing key throws tdp::KeyError listing the keys that exist; shape and batch
//   violations throw std::invalid_argument; out-of-range batch indices throw std::out_of_range.
//   A call that throws leaves the TensorDict exactly as it was.
// - Thread safety: not synchronized. Concurrent const calls (get, keys, index, clone, ...) on one
//   TensorDict are safe; any mutation (set, update, erase, ...) needs exclusive access, which
//   includes every handle that shares the same entries.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sdk/tensordict/nested_key.h"

namespace at::indexing {
struct TensorIndex;
}

namespace tdp {

// Thrown when a key is missing; the message lists the keys that exist (Python's KeyError).
class KeyError : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

// "[4, 17]": how the SDK's messages print a shape.
std::string shape_to_string(c10::IntArrayRef shape);

class Entry;
struct TensorDictImpl;

class TensorDict {
 public:
  // An empty TensorDict with batch_size [] and no device.
  TensorDict();
  explicit TensorDict(std::vector<int64_t> batch_size,
                      std::optional<c10::Device> device = std::nullopt);
  // Builds and validates every entry; throws (as `set` does) before returning anything.
  TensorDict(std::initializer_list<std::pair<NestedKey, Entry>> entries,
             std::vector<int64_t> batch_size,
             std::optional<c10::Device> device = std::nullopt);
  TensorDict(const std::vector<std::pair<NestedKey, Entry>>& entries,
             std::vector<int64_t> batch_size,
             std::optional<c10::Device> device = std::nullopt);

  // ---- shape and device ------------------------------------------------------------------
  c10::IntArrayRef batch_size() const;
  c10::IntArrayRef shape() const { return batch_size(); }
  // Checks every entry against `batch_size` first; on a mismatch nothing changes.
  void set_batch_size(std::vector<int64_t> batch_size);
  int64_t ndim() const { return static_cast<int64_t>(batch_size().size()); }
  int64_t batch_dims() const { return ndim(); }
  // Number of batch elements: the product of batch_size (1 for batch_size []).
  int64_t numel() const;
  std::optional<c10::Device> device() const;

  // ---- entries -----------------------------------------------------------------------------
  // The tensor at `key`. Throws KeyError (listing the keys present) when it is missing, and
  // std::invalid_argument when `key` holds a nested TensorDict.
  at::Tensor get(const NestedKey& key) const;
  // The tensor at `key`, or `default_value` when no entry is there.
  at::Tensor get(const NestedKey& key, const at::Tensor& default_value) const;
  // The nested TensorDict at `key` (shares its entries with this one).
  TensorDict get_tensordict(const NestedKey& key) const;
  // The entry at `key`, tensor or TensorDict.
  Entry get_entry(const NestedKey& key) const;
  bool contains(const NestedKey& key) const;
  bool is_tensordict(const NestedKey& key) const;

  // Writes `value` at `key`, creating missing intermediate TensorDicts with this batch_size and
  // device. The value's leading dims must equal batch_size. Returns *this for chaining.
  // `value` is taken by value: a caller passing a tensor it is done with (std::move, a fresh
  // result) hands its reference over, and no reference count is raised and dropped again.
  TensorDict& set(const NestedKey& key, at::Tensor value);
  TensorDict& set(const NestedKey& key, const TensorDict& value);
  TensorDict& set(const NestedKey& key, const Entry& value);
  // Copies `value` into the existing tensor at `key` (same shape; broadcasting as copy_).
  TensorDict& set_(const NestedKey& key, const at::Tensor& value);
  // The tensor at `key`; when missing, `default_value` is set first (Python's setdefault).
  at::Tensor setdefault(const NestedKey& key, const at::Tensor& default_value);
  // Writes every entry of `other` (nested TensorDicts merge key by key). Validated first.
  // With `inplace`, existing tensors are copied into (set_) rather than replaced.
  TensorDict& update(const TensorDict& other, bool inplace = false);
  TensorDict& update(const std::vector<std::pair<NestedKey, Entry>>& entries,
                     bool inplace = false);
  // Removes the entry at `key`; throws KeyError when missing.
  TensorDict& erase(const NestedKey& key);
  // Removes and returns the tensor at `key`.
  at::Tensor pop(const NestedKey& key);
  // Moves the entry to `new_key` (at the same position when both share a parent). With `safe`,
  // an existing `new_key` throws instead of being overwritten.
  TensorDict& rename_key(const NestedKey& old_key, const NestedKey& new_key, bool safe = false);

  // Keys in insertion order. `include_nested` descends into nested TensorDicts (listing a
  // nested TensorDict's own key before its children unless `leaves_only`).
  std::vector<NestedKey> keys(bool include_nested = false, bool leaves_only = false) const;
  std::vector<Entry> values(bool include_nested = false, bool leaves_only = false) const;
  std::vector<std::pair<NestedKey, Entry>> items(bool include_nested = false,
                                                 bool leaves_only = false) const;
  // True when there is no tensor anywhere (nested empty TensorDicts do not count).
  bool is_empty() const;

  // A new TensorDict with only `keys` (nested keys keep their parents). With `strict`, a
  // missing key throws KeyError; otherwise it is skipped.
  TensorDict select(const std::vector<NestedKey>& keys, bool strict = true) const;
  // A new TensorDict without `keys`; missing keys are ignored.
  TensorDict exclude(const std::vector<NestedKey>& keys) const;

  // ---- copies and conversions --------------------------------------------------------------
  // `deep`: tensors are cloned; otherwise only the dictionaries are new and tensors are shared.
  TensorDict clone(bool deep = true) const;
  // Same batch_size and device, no entries; with `recurse`, nested TensorDicts stay (empty).
  TensorDict empty(bool recurse = false) const;
  TensorDict detach() const;
  TensorDict to(c10::Device device, bool non_blocking = false) const;
  TensorDict to(c10::ScalarType dtype) const;
  // A new TensorDict whose leaves are fn(leaf). A leaf mapped to an undefined tensor is dropped.
  // `batch_size` replaces this batch_size in the result (when the function changes it).
  TensorDict apply(const std::function<at::Tensor(const at::Tensor&)>& fn,
                   std::optional<std::vector<int64_t>> batch_size = std::nullopt) const;
  TensorDict named_apply(
      const std::function<at::Tensor(const NestedKey&, const at::Tensor&)>& fn,
      std::optional<std::vector<int64_t>> batch_size = std::nullopt) const;
  // {"a": {"b": t}} -> {"a.b": t}. Throws when two flattened names collide.
  TensorDict flatten_keys(const std::string& separator = ".") const;
  // {"a.b": t} -> {"a": {"b": t}}.
  TensorDict unflatten_keys(const std::string& separator = ".") const;

  // ---- batch indexing: every entry indexed over the batch dims ----------------------------
  // Integer index along the first batch dim (negative counts from the end).
  TensorDict operator[](int64_t index) const;
  // Any mix of integers, slices, None, Ellipsis, boolean masks and index tensors, as
  // at::Tensor::index; include <ATen/TensorIndexing.h> for at::indexing::Slice and friends.
  // Ellipsis spans batch dims only; more indices than batch dims throw.
  TensorDict index(c10::ArrayRef<at::indexing::TensorIndex> indices) const;
  TensorDict index(std::initializer_list<at::indexing::TensorIndex> indices) const;
  // Rows where the boolean `mask` (shape: the leading batch dims) is true.
  TensorDict masked_select(const at::Tensor& mask) const;
  // Python's `td[indices] = value`: writes every leaf of `value` into the indexed batch
  // elements, in place. Leaves missing here are first allocated as zeros with this batch_size
  // (how rollout buffers are filled step by step). `value`'s batch_size must be the indexed
  // batch shape; everything is checked before anything is written.
  TensorDict& index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const TensorDict& value);
  TensorDict& index_put_(std::initializer_list<at::indexing::TensorIndex> indices, const TensorDict& value);

  // ---- batch-dim shape ops (dims count batch dims; feature dims follow along) ---------------
  TensorDict unsqueeze(int64_t dim) const;
  TensorDict squeeze(std::optional<int64_t> dim = std::nullopt) const;
  TensorDict reshape(std::vector<int64_t> shape) const;
  TensorDict view(std::vector<int64_t> shape) const;
  TensorDict expand(std::vector<int64_t> shape) const;
  TensorDict permute(std::vector<int64_t> dims) const;
  TensorDict narrow(int64_t dim, int64_t start, int64_t length) const;
  std::vector<TensorDict> unbind(int64_t dim = 0) const;
  std::vector<TensorDict> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<TensorDict> split(std::vector<int64_t> split_sizes, int64_t dim = 0) const;
  // Stacks along a new batch dim / concatenates along an existing one. All inputs need the
  // same keys (nested too) and batch sizes; the error names the first difference.
  static TensorDict stack(const std::vector<TensorDict>& tensordicts, int64_t dim = 0);
  static TensorDict cat(const std::vector<TensorDict>& tensordicts, int64_t dim = 0);

  // ---- comparison and printing ------------------------------------------------------------
  // Same keys, batch_size and equal tensors (at::equal).
  bool equal(const TensorDict& other) const;
  bool allclose(const TensorDict& other, double rtol = 1e-5, double atol = 1e-8) const;
  // Python's repr: TensorDict(fields={...}, batch_size=torch.Size([...]), device=None, ...).
  std::string to_string() const;

  // True when both handles share the same entries.
  bool is_same(const TensorDict& other) const { return impl_ == other.impl_; }

 private:
  explicit TensorDict(std::shared_ptr<TensorDictImpl> impl);
  friend struct TensorDictImpl;
  friend class Entry;

  std::shared_ptr<TensorDictImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const TensorDict& td);

// Sets `value` at `key` in `out`, first creating the parents that `like` holds as nested
// TensorDicts, with their batch sizes and device, so that a TensorDict of per-entry results
// (log-probs of a composite sample) mirrors the nesting of the sample it was computed from.
void set_mirroring(TensorDict& out, const TensorDict& like, const NestedKey& key, const at::Tensor& value);

// One value of a TensorDict: a tensor or a nested TensorDict.
class Entry {
 public:
  Entry(at::Tensor tensor) : tensor_(std::move(tensor)) {}  // NOLINT: implicit by design
  Entry(TensorDict tensordict)                               // NOLINT
      : tensordict_(std::move(tensordict.impl_)) {}

  bool is_tensor() const { return tensordict_ == nullptr; }
  bool is_tensordict() const { return tensordict_ != nullptr; }
  // Throw std::invalid_argument when the entry holds the other kind.
  const at::Tensor& tensor() const;
  TensorDict tensordict() const;

 private:
  friend struct TensorDictImpl;
  at::Tensor tensor_;
  std::shared_ptr<TensorDictImpl> tensordict_;
};

}  // namespace tdp
