#include "sdk/tensordict/tensordict.h"

#include <ATen/Functions.h>
#include <ATen/TensorIndexing.h>
#include <absl/container/flat_hash_set.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>
#include <sstream>

namespace tdp {

std::string shape_to_string(c10::IntArrayRef shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

namespace {

bool has_prefix(c10::IntArrayRef shape, c10::IntArrayRef prefix) {
  return shape.size() >= prefix.size() && shape.slice(0, prefix.size()) == prefix;
}

// Python's names for dtypes, so printed TensorDicts read like tensordict's.
std::string dtype_str(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return "torch.float32";
    case c10::kDouble: return "torch.float64";
    case c10::kHalf: return "torch.float16";
    case c10::kBFloat16: return "torch.bfloat16";
    case c10::kLong: return "torch.int64";
    case c10::kInt: return "torch.int32";
    case c10::kShort: return "torch.int16";
    case c10::kChar: return "torch.int8";
    case c10::kByte: return "torch.uint8";
    case c10::kBool: return "torch.bool";
    case c10::kComplexFloat: return "torch.complex64";
    case c10::kComplexDouble: return "torch.complex128";
    default: return absl::StrCat("torch.", c10::toString(dtype));
  }
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  if (dim < -ndim || dim >= ndim) {
    throw std::out_of_range(absl::StrCat("TensorDict.", op, ": dim ", dim,
                                         " is out of range for ", ndim, " batch dims"));
  }
  return dim < 0 ? dim + ndim : dim;
}

}  // namespace

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

  Entry* find(const std::string& name) {
    for (auto& [entry_name, entry] : entries) {
      if (entry_name == name) return &entry;
    }
    return nullptr;
  }
  const Entry* find(const std::string& name) const { return const_cast<TensorDictImpl*>(this)->find(name); }

  std::vector<NestedKey> level_keys(const NestedKey& prefix) const {
    std::vector<NestedKey> keys;
    keys.reserve(entries.size());
    for (const auto& [name, entry] : entries) keys.push_back(prefix + NestedKey(name));
    return keys;
  }

  // The entry at `key`, or nullptr. On a miss `error` (when given) explains where the path broke.
  const Entry* lookup(const NestedKey& key, std::string* error) const {
    if (key.empty()) {
      if (error) *error = "the empty key names no entry";
      return nullptr;
    }
    const TensorDictImpl* level = this;
    for (size_t i = 0; i < key.size(); ++i) {
      const Entry* entry = level->find(key.path()[i]);
      NestedKey prefix(std::vector<std::string>(key.path().begin(), key.path().begin() + i));
      if (entry == nullptr) {
        if (error) {
          *error = absl::StrCat("key ", key.to_string(), " not found in TensorDict with keys ",
                                keys_to_string(level->level_keys(prefix)));
        }
        return nullptr;
      }
      if (i + 1 == key.size()) return entry;
      if (entry->is_tensor()) {
        if (error) {
          *error = absl::StrCat("key ", key.to_string(), " not found: ",
                                (prefix + NestedKey(key.path()[i])).to_string(),
                                " is a tensor, not a TensorDict");
        }
        return nullptr;
      }
      level = sub(*entry);
    }
    return nullptr;
  }

  const Entry& lookup_or_throw(const NestedKey& key) const {
    std::string error;
    const Entry* entry = lookup(key, &error);
    if (entry == nullptr) throw KeyError(error);
    return *entry;
  }

  void check_fits(const NestedKey& key, const Entry& value, c10::IntArrayRef batch) const {
    if (value.is_tensor()) {
      const at::Tensor& tensor = value.tensor();
      if (!tensor.defined()) {
        throw std::invalid_argument(absl::StrCat("TensorDict.set: key ", key.to_string(),
                                                 ": the tensor is undefined"));
      }
      if (!has_prefix(tensor.sizes(), batch)) {
        throw std::invalid_argument(absl::StrCat(
            "TensorDict.set: key ", key.to_string(), " has shape ", shape_to_string(tensor.sizes()),
            ", whose leading dims do not match batch_size ", shape_to_string(batch)));
      }
    } else {
      const TensorDictImpl& nested = *sub(value);
      if (&nested == this) {
        throw std::invalid_argument(absl::StrCat("TensorDict.set: key ", key.to_string(),
                                                 ": a TensorDict cannot contain itself"));
      }
      if (!has_prefix(nested.batch_size, batch)) {
        throw std::invalid_argument(absl::StrCat(
            "TensorDict.set: key ", key.to_string(), " is a TensorDict with batch_size ",
            shape_to_string(nested.batch_size), ", which does not start with batch_size ",
            shape_to_string(batch)));
      }
    }
  }

  // Moves `value` to this TensorDict's device when it has one.
  Entry placed(const Entry& value) const {
    if (!device) return value;
    if (value.is_tensor()) {
      const at::Tensor& tensor = value.tensor();
      return tensor.device() == *device ? value : Entry(tensor.to(*device));
    }
    const TensorDictImpl& nested = *sub(value);
    return nested.device == device ? value : Entry(value.tensordict().to(*device));
  }

  // Validates everything first, so a throw leaves the tree untouched.
  void set(const NestedKey& key, const Entry& value) {
    if (key.empty()) throw std::invalid_argument("TensorDict.set: the empty key names no entry");
    TensorDictImpl* level = this;
    size_t depth = 0;
    for (; depth + 1 < key.size(); ++depth) {
      Entry* entry = level->find(key.path()[depth]);
      if (entry == nullptr) break;
      if (entry->is_tensor()) {
        NestedKey blocker(std::vector<std::string>(key.path().begin(), key.path().begin() + depth + 1));
        throw std::invalid_argument(absl::StrCat("TensorDict.set: cannot write ", key.to_string(), ": ",
                                                 blocker.to_string(), " is a tensor, not a TensorDict"));
      }
      level = sub(*entry);
    }
    // Intermediate TensorDicts created below inherit the batch_size of the deepest existing one.
    level->check_fits(key, value, level->batch_size);
    Entry stored = level->placed(value);
    for (; depth + 1 < key.size(); ++depth) {
      auto created = make(level->batch_size, level->device);
      TensorDictImpl* next = created.get();
      level->entries.emplace_back(key.path()[depth], Entry(wrap(std::move(created))));
      level = next;
    }
    if (Entry* existing = level->find(key.leaf())) {
      *existing = std::move(stored);
    } else {
      level->entries.emplace_back(key.leaf(), std::move(stored));
    }
  }

  // Recursive copy of the tree; `leaf_fn` maps each tensor (undefined results are dropped) and
  // `batch_fn` each TensorDict's batch_size.
  std::shared_ptr<TensorDictImpl> transform(
      const NestedKey& prefix,
      const std::function<at::Tensor(const NestedKey&, const at::Tensor&)>& leaf_fn,
      const std::function<std::vector<int64_t>(c10::IntArrayRef)>& batch_fn,
      std::optional<c10::Device> new_device) const {
    auto out = make(batch_fn(batch_size), new_device);
    out->entries.reserve(entries.size());
    for (const auto& [name, entry] : entries) {
      NestedKey key = prefix + NestedKey(name);
      if (entry.is_tensor()) {
        at::Tensor mapped = leaf_fn(key, entry.tensor());
        if (mapped.defined()) out->entries.emplace_back(name, Entry(std::move(mapped)));
      } else {
        out->entries.emplace_back(
            name, Entry(wrap(sub(entry)->transform(key, leaf_fn, batch_fn, new_device))));
      }
    }
    return out;
  }

  std::shared_ptr<TensorDictImpl> clone_structure(bool deep) const {
    return transform(
        NestedKey(), [deep](const NestedKey&, const at::Tensor& t) { return deep ? t.clone() : t; },
        [](c10::IntArrayRef batch) { return batch.vec(); }, device);
  }

  // A batch-dim op: `leaf_fn` gets every tensor (its batch dims are the first `ndim`); nested
  // TensorDicts keep their extra batch dims after `new_batch`.
  TensorDict map_batch(const std::function<at::Tensor(const at::Tensor&)>& leaf_fn,
                       std::vector<int64_t> new_batch) const {
    const size_t ndim = batch_size.size();
    return wrap(transform(
        NestedKey(), [&leaf_fn](const NestedKey&, const at::Tensor& t) { return leaf_fn(t); },
        [&new_batch, ndim](c10::IntArrayRef batch) {
          std::vector<int64_t> out = new_batch;
          out.insert(out.end(), batch.begin() + ndim, batch.end());
          return out;
        },
        device));
  }

  void collect(const NestedKey& prefix, bool include_nested, bool leaves_only,
               std::vector<std::pair<NestedKey, Entry>>& out) const {
    for (const auto& [name, entry] : entries) {
      NestedKey key = prefix + NestedKey(name);
      if (entry.is_tensor()) {
        out.emplace_back(std::move(key), entry);
        continue;
      }
      if (!leaves_only) out.emplace_back(key, entry);
      if (include_nested) sub(entry)->collect(key, include_nested, leaves_only, out);
    }
  }

  void print(std::ostream& out, const std::string& indent) const {
    const std::string inner = indent + "    ";
    out << "TensorDict(\n" << inner << "fields={";
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& [name, entry] = entries[i];
      out << "\n" << inner << "    " << name << ": ";
      if (entry.is_tensor()) {
        const at::Tensor& t = entry.tensor();
        out << "Tensor(shape=torch.Size(" << shape_to_string(t.sizes()) << "), device=" << t.device()
            << ", dtype=" << dtype_str(t.scalar_type()) << ")";
      } else {
        sub(entry)->print(out, inner + "    ");
      }
      out << (i + 1 < entries.size() ? "," : "");
    }
    out << "},\n" << inner << "batch_size=torch.Size(" << shape_to_string(batch_size) << "),\n"
        << inner << "device=";
    if (device) {
      out << *device;
    } else {
      out << "None";
    }
    out << ")";
  }
};

// ---- Entry -------------------------------------------------------------------------------------

const at::Tensor& Entry::tensor() const {
  if (!is_tensor()) throw std::invalid_argument("Entry holds a TensorDict, not a tensor");
  return tensor_;
}

TensorDict Entry::tensordict() const {
  if (!is_tensordict()) throw std::invalid_argument("Entry holds a tensor, not a TensorDict");
  return TensorDict(tensordict_);
}

// ---- construction, shape, device ---------------------------------------------------------------

TensorDict::TensorDict() : impl_(std::make_shared<TensorDictImpl>()) {}

TensorDict::TensorDict(std::shared_ptr<TensorDictImpl> impl) : impl_(std::move(impl)) {}

TensorDict::TensorDict(std::vector<int64_t> batch_size, std::optional<c10::Device> device)
    : impl_(TensorDictImpl::make(std::move(batch_size), device)) {
  for (int64_t size : impl_->batch_size) {
    if (size < 0) {
      throw std::invalid_argument(absl::StrCat("TensorDict: batch_size ", shape_to_string(impl_->batch_size),
                                               " has a negative dim"));
    }
  }
}

TensorDict::TensorDict(std::initializer_list<std::pair<NestedKey, Entry>> entries,
                       std::vector<int64_t> batch_size, std::optional<c10::Device> device)
    : TensorDict(std::vector<std::pair<NestedKey, Entry>>(entries), std::move(batch_size), device) {}

TensorDict::TensorDict(const std::vector<std::pair<NestedKey, Entry>>& entries,
                       std::vector<int64_t> batch_size, std::optional<c10::Device> device)
    : TensorDict(std::move(batch_size), device) {
  for (const auto& [key, value] : entries) impl_->set(key, value);
}

c10::IntArrayRef TensorDict::batch_size() const { return impl_->batch_size; }

void TensorDict::set_batch_size(std::vector<int64_t> batch_size) {
  for (const auto& [name, entry] : impl_->entries) {
    impl_->check_fits(NestedKey(name), entry, batch_size);
  }
  impl_->batch_size = std::move(batch_size);
}

int64_t TensorDict::numel() const {
  return std::accumulate(impl_->batch_size.begin(), impl_->batch_size.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

std::optional<c10::Device> TensorDict::device() const { return impl_->device; }

// ---- entries -----------------------------------------------------------------------------------

at::Tensor TensorDict::get(const NestedKey& key) const {
  const Entry& entry = impl_->lookup_or_throw(key);
  if (!entry.is_tensor()) {
    throw std::invalid_argument(absl::StrCat("TensorDict.get: key ", key.to_string(),
                                             " holds a TensorDict; use get_tensordict()"));
  }
  return entry.tensor();
}

at::Tensor TensorDict::get(const NestedKey& key, const at::Tensor& default_value) const {
  const Entry* entry = impl_->lookup(key, nullptr);
  if (entry == nullptr) return default_value;
  if (!entry->is_tensor()) {
    throw std::invalid_argument(absl::StrCat("TensorDict.get: key ", key.to_string(),
                                             " holds a TensorDict; use get_tensordict()"));
  }
  return entry->tensor();
}

TensorDict TensorDict::get_tensordict(const NestedKey& key) const {
  const Entry& entry = impl_->lookup_or_throw(key);
  if (!entry.is_tensordict()) {
    throw std::invalid_argument(absl::StrCat("TensorDict.get_tensordict: key ", key.to_string(),
                                             " holds a tensor, not a TensorDict"));
  }
  return entry.tensordict();
}

Entry TensorDict::get_entry(const NestedKey& key) const { return impl_->lookup_or_throw(key); }

bool TensorDict::contains(const NestedKey& key) const { return impl_->lookup(key, nullptr) != nullptr; }

bool TensorDict::is_tensordict(const NestedKey& key) const {
  return impl_->lookup_or_throw(key).is_tensordict();
}

TensorDict& TensorDict::set(const NestedKey& key, const at::Tensor& value) {
  impl_->set(key, Entry(value));
  return *this;
}

TensorDict& TensorDict::set(const NestedKey& key, const TensorDict& value) {
  impl_->set(key, Entry(value));
  return *this;
}

TensorDict& TensorDict::set(const NestedKey& key, const Entry& value) {
  impl_->set(key, value);
  return *this;
}

namespace {
// torch's broadcasting rule for copy_: trailing dims equal or 1 in the source.
bool expandable_to(c10::IntArrayRef source, c10::IntArrayRef target) {
  if (source.size() > target.size()) return false;
  for (size_t i = 1; i <= source.size(); ++i) {
    int64_t s = source[source.size() - i];
    if (s != 1 && s != target[target.size() - i]) return false;
  }
  return true;
}
}  // namespace

TensorDict& TensorDict::set_(const NestedKey& key, const at::Tensor& value) {
  at::Tensor destination = get(key);
  if (!value.defined() || !expandable_to(value.sizes(), destination.sizes())) {
    throw std::invalid_argument(absl::StrCat(
        "TensorDict.set_: key ", key.to_string(), " holds shape ", shape_to_string(destination.sizes()),
        ", which a value of shape ",
        value.defined() ? shape_to_string(value.sizes()) : std::string("<undefined>"), " cannot fill"));
  }
  destination.copy_(value);
  return *this;
}

at::Tensor TensorDict::setdefault(const NestedKey& key, const at::Tensor& default_value) {
  if (!contains(key)) set(key, default_value);
  return get(key);
}

namespace {
// One write of an update. With `dry_run` an in-place copy only checks shapes, so a rehearsal
// on a structural copy finds every failure before the real pass writes anything.
void write_entry(TensorDict& target, const NestedKey& key, const Entry& value, bool inplace, bool dry_run) {
  if (inplace && value.is_tensor() && target.contains(key) && !target.is_tensordict(key)) {
    at::Tensor existing = target.get(key);
    if (!expandable_to(value.tensor().sizes(), existing.sizes())) {
      throw std::invalid_argument(absl::StrCat("TensorDict.update: key ", key.to_string(), " holds shape ",
                                               shape_to_string(existing.sizes()), ", which a value of shape ",
                                               shape_to_string(value.tensor().sizes()), " cannot fill in place"));
    }
    if (!dry_run) existing.copy_(value.tensor());
    return;
  }
  target.set(key, value);
}

// Nested TensorDicts merge key by key; everything else is written whole.
void merge_into(TensorDict& destination, const TensorDict& source, bool inplace, bool dry_run) {
  for (const auto& [key, entry] : source.items()) {
    if (entry.is_tensordict() && destination.contains(key) && destination.is_tensordict(key)) {
      TensorDict nested = destination.get_tensordict(key);
      merge_into(nested, entry.tensordict(), inplace, dry_run);
    } else {
      write_entry(destination, key, entry, inplace, dry_run);
    }
  }
}
}  // namespace

TensorDict& TensorDict::update(const TensorDict& other, bool inplace) {
  TensorDict rehearsal = clone(/*deep=*/false);
  merge_into(rehearsal, other, inplace, /*dry_run=*/true);
  merge_into(*this, other, inplace, /*dry_run=*/false);
  return *this;
}

TensorDict& TensorDict::update(const std::vector<std::pair<NestedKey, Entry>>& entries, bool inplace) {
  // Later entries may write below earlier ones, so rehearse the whole sequence on a copy.
  TensorDict rehearsal = clone(/*deep=*/false);
  for (const auto& [key, value] : entries) write_entry(rehearsal, key, value, inplace, /*dry_run=*/true);
  for (const auto& [key, value] : entries) write_entry(*this, key, value, inplace, /*dry_run=*/false);
  return *this;
}

TensorDict& TensorDict::erase(const NestedKey& key) {
  impl_->lookup_or_throw(key);
  TensorDictImpl* level = impl_.get();
  for (size_t i = 0; i + 1 < key.size(); ++i) level = TensorDictImpl::sub(*level->find(key.path()[i]));
  auto& entries = level->entries;
  entries.erase(std::find_if(entries.begin(), entries.end(),
                             [&](const auto& item) { return item.first == key.leaf(); }));
  return *this;
}

at::Tensor TensorDict::pop(const NestedKey& key) {
  at::Tensor value = get(key);
  erase(key);
  return value;
}

TensorDict& TensorDict::rename_key(const NestedKey& old_key, const NestedKey& new_key, bool safe) {
  Entry entry = impl_->lookup_or_throw(old_key);
  if (old_key == new_key) return *this;
  if (safe && contains(new_key)) {
    throw std::invalid_argument(absl::StrCat("TensorDict.rename_key: key ", new_key.to_string(),
                                             " already exists and safe=true"));
  }
  if (old_key.parent() == new_key.parent()) {
    if (contains(new_key)) erase(new_key);
    TensorDictImpl* level = impl_.get();
    for (size_t i = 0; i + 1 < old_key.size(); ++i) {
      level = TensorDictImpl::sub(*level->find(old_key.path()[i]));
    }
    for (auto& item : level->entries) {
      if (item.first == old_key.leaf()) item.first = new_key.leaf();
    }
    return *this;
  }
  set(new_key, entry);
  erase(old_key);
  return *this;
}

std::vector<NestedKey> TensorDict::keys(bool include_nested, bool leaves_only) const {
  std::vector<NestedKey> keys;
  for (auto& item : items(include_nested, leaves_only)) keys.push_back(std::move(item.first));
  return keys;
}

std::vector<Entry> TensorDict::values(bool include_nested, bool leaves_only) const {
  std::vector<Entry> values;
  for (auto& item : items(include_nested, leaves_only)) values.push_back(std::move(item.second));
  return values;
}

std::vector<std::pair<NestedKey, Entry>> TensorDict::items(bool include_nested, bool leaves_only) const {
  std::vector<std::pair<NestedKey, Entry>> out;
  out.reserve(impl_->entries.size());
  impl_->collect(NestedKey(), include_nested, leaves_only, out);
  return out;
}

bool TensorDict::is_empty() const { return items(/*include_nested=*/true, /*leaves_only=*/true).empty(); }

TensorDict TensorDict::select(const std::vector<NestedKey>& keys, bool strict) const {
  TensorDict out(impl_->batch_size, impl_->device);
  for (const NestedKey& key : keys) {
    std::string error;
    const Entry* entry = impl_->lookup(key, &error);
    if (entry == nullptr) {
      if (strict) throw KeyError(absl::StrCat("TensorDict.select: ", error));
      continue;
    }
    // Parents keep their own batch_size, which may be longer than ours.
    for (size_t depth = 1; depth < key.size(); ++depth) {
      NestedKey parent(std::vector<std::string>(key.path().begin(), key.path().begin() + depth));
      if (!out.contains(parent)) out.set(parent, get_tensordict(parent).empty());
    }
    out.set(key, entry->is_tensor() ? *entry : Entry(entry->tensordict().clone(/*deep=*/false)));
  }
  return out;
}

TensorDict TensorDict::exclude(const std::vector<NestedKey>& keys) const {
  TensorDict out = clone(/*deep=*/false);
  for (const NestedKey& key : keys) {
    if (out.contains(key)) out.erase(key);
  }
  return out;
}

// ---- copies and conversions --------------------------------------------------------------------

TensorDict TensorDict::clone(bool deep) const { return TensorDict(impl_->clone_structure(deep)); }

TensorDict TensorDict::empty(bool recurse) const {
  auto out = TensorDictImpl::make(impl_->batch_size, impl_->device);
  if (recurse) {
    for (const auto& [name, entry] : impl_->entries) {
      if (entry.is_tensordict()) out->entries.emplace_back(name, Entry(entry.tensordict().empty(true)));
    }
  }
  return TensorDict(std::move(out));
}

TensorDict TensorDict::detach() const {
  return apply([](const at::Tensor& t) { return t.detach(); });
}

TensorDict TensorDict::to(c10::Device device, bool non_blocking) const {
  return TensorDict(impl_->transform(
      NestedKey(),
      [device, non_blocking](const NestedKey&, const at::Tensor& t) { return t.to(device, non_blocking); },
      [](c10::IntArrayRef batch) { return batch.vec(); }, device));
}

TensorDict TensorDict::to(c10::ScalarType dtype) const {
  return apply([dtype](const at::Tensor& t) { return t.to(dtype); });
}

TensorDict TensorDict::apply(const std::function<at::Tensor(const at::Tensor&)>& fn,
                             std::optional<std::vector<int64_t>> batch_size) const {
  return named_apply([&fn](const NestedKey&, const at::Tensor& t) { return fn(t); }, std::move(batch_size));
}

TensorDict TensorDict::named_apply(const std::function<at::Tensor(const NestedKey&, const at::Tensor&)>& fn,
                                   std::optional<std::vector<int64_t>> batch_size) const {
  const size_t ndim = impl_->batch_size.size();
  auto out = impl_->transform(
      NestedKey(), fn,
      [&batch_size, ndim](c10::IntArrayRef batch) {
        if (!batch_size) return batch.vec();
        std::vector<int64_t> out = *batch_size;
        out.insert(out.end(), batch.begin() + ndim, batch.end());
        return out;
      },
      impl_->device);
  // The function may have changed shapes: check the result as `set` would have.
  TensorDict result(std::move(out));
  for (const auto& [key, entry] : result.items(true, false)) {
    c10::IntArrayRef parent_batch =
        key.is_nested() ? result.get_tensordict(key.parent()).batch_size() : result.batch_size();
    TensorDictImpl::of(result).check_fits(key, entry, parent_batch);
  }
  return result;
}

TensorDict TensorDict::flatten_keys(const std::string& separator) const {
  TensorDict out(impl_->batch_size, impl_->device);
  for (const auto& [key, entry] : items(/*include_nested=*/true, /*leaves_only=*/true)) {
    std::string flat = key.join(separator);
    if (out.contains(flat)) {
      throw std::invalid_argument(absl::StrCat("TensorDict.flatten_keys: key ", key.to_string(),
                                               " flattens to '", flat, "', which already exists"));
    }
    out.set(flat, entry);
  }
  return out;
}

TensorDict TensorDict::unflatten_keys(const std::string& separator) const {
  TensorDict out(impl_->batch_size, impl_->device);
  for (const auto& [name, entry] : impl_->entries) {
    NestedKey key(std::vector<std::string>(absl::StrSplit(name, separator)));
    if (entry.is_tensordict()) {
      TensorDict nested = entry.tensordict().unflatten_keys(separator);
      if (out.contains(key) && out.is_tensordict(key)) {
        out.get_tensordict(key).update(nested);
      } else {
        out.set(key, nested);
      }
    } else {
      out.set(key, entry);
    }
  }
  return out;
}

// ---- batch indexing ----------------------------------------------------------------------------

TensorDict TensorDict::operator[](int64_t index) const {
  if (impl_->batch_size.empty()) {
    throw std::out_of_range("TensorDict: cannot index a TensorDict with batch_size []");
  }
  const int64_t size = impl_->batch_size[0];
  if (index < -size || index >= size) {
    throw std::out_of_range(absl::StrCat("TensorDict: index ", index,
                                         " is out of range for batch dim 0 of size ", size));
  }
  const int64_t wrapped = index < 0 ? index + size : index;
  std::vector<int64_t> new_batch(impl_->batch_size.begin() + 1, impl_->batch_size.end());
  return impl_->map_batch([wrapped](const at::Tensor& t) { return t.select(0, wrapped); },
                          std::move(new_batch));
}

TensorDict TensorDict::index(std::initializer_list<at::indexing::TensorIndex> indices) const {
  return index(c10::ArrayRef<at::indexing::TensorIndex>(indices));
}

namespace {
// Batch dims an index consumes: a boolean mask covers as many dims as it has.
bool is_mask(const at::indexing::TensorIndex& index) {
  return index.is_tensor() &&
         (index.tensor().scalar_type() == at::kBool || index.tensor().scalar_type() == at::kByte);
}

int64_t consumed_dims(const at::indexing::TensorIndex& index) {
  if (index.is_none() || index.is_ellipsis() || index.is_boolean()) return 0;
  if (is_mask(index)) return std::max<int64_t>(index.tensor().dim(), 1);
  return 1;
}

// Checks `indices` against the batch dims and expands Ellipsis to full slices over batch dims
// only, so that applying the result to any entry never touches its feature dims.
std::vector<at::indexing::TensorIndex> normalize_batch_index(
    c10::ArrayRef<at::indexing::TensorIndex> indices, c10::IntArrayRef batch, const char* op) {
  using at::indexing::TensorIndex;
  const int64_t ndim = static_cast<int64_t>(batch.size());
  int64_t used = 0;
  int ellipses = 0;
  for (const TensorIndex& index : indices) {
    used += consumed_dims(index);
    ellipses += index.is_ellipsis() ? 1 : 0;
  }
  if (ellipses > 1) throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": at most one Ellipsis is allowed"));
  if (used > ndim) {
    throw std::out_of_range(absl::StrCat("TensorDict.", op, ": ", used, " indices for batch_size ",
                                         shape_to_string(batch), " (", ndim, " batch dims)"));
  }
  std::vector<TensorIndex> expanded;
  int64_t dim = 0;
  for (const TensorIndex& index : indices) {
    if (index.is_ellipsis()) {
      for (int64_t i = 0; i < ndim - used; ++i, ++dim) expanded.emplace_back(at::indexing::Slice());
      continue;
    }
    if (index.is_integer()) {
      const int64_t size = batch[dim];
      const int64_t value = index.integer().expect_int();
      if (value < -size || value >= size) {
        throw std::out_of_range(absl::StrCat("TensorDict.", op, ": index ", value,
                                             " is out of range for batch dim ", dim, " of size ", size));
      }
    }
    if (is_mask(index) && index.tensor().dim() > 0) {
      c10::IntArrayRef mask_shape = index.tensor().sizes();
      c10::IntArrayRef covered = batch.slice(dim, mask_shape.size());
      if (mask_shape != covered) {
        throw std::out_of_range(absl::StrCat("TensorDict.", op, ": boolean mask of shape ", shape_to_string(mask_shape),
                                             " does not match batch dims ", shape_to_string(covered),
                                             " starting at dim ", dim));
      }
    }
    dim += consumed_dims(index);
    expanded.push_back(index);
  }
  return expanded;
}

// What indexing does to a tensor of shape `batch`; an expanded scalar answers without
// allocating batch-sized memory.
std::vector<int64_t> indexed_batch(const std::vector<at::indexing::TensorIndex>& indices,
                                          c10::IntArrayRef batch, std::optional<c10::Device> device) {
  at::TensorOptions options = at::TensorOptions().dtype(at::kByte);
  if (device) options = options.device(*device);
  return at::zeros({}, options).expand(batch).index(indices).sizes().vec();
}
}  // namespace

TensorDict TensorDict::index(c10::ArrayRef<at::indexing::TensorIndex> indices) const {
  const auto& batch = impl_->batch_size;
  auto expanded = normalize_batch_index(indices, batch, "index");
  try {
    return impl_->map_batch([&expanded](const at::Tensor& t) { return t.index(expanded); },
                            indexed_batch(expanded, batch, impl_->device));
  } catch (const c10::Error& error) {
    throw std::out_of_range(absl::StrCat("TensorDict.index: batch_size ", shape_to_string(batch), ": ",
                                         error.what_without_backtrace()));
  }
}

TensorDict& TensorDict::index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                                   const TensorDict& value) {
  return index_put_(c10::ArrayRef<at::indexing::TensorIndex>(indices), value);
}

TensorDict& TensorDict::index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const TensorDict& value) {
  const auto& batch = impl_->batch_size;
  auto expanded = normalize_batch_index(indices, batch, "index_put_");
  std::vector<int64_t> target;
  try {
    target = indexed_batch(expanded, batch, impl_->device);
  } catch (const c10::Error& error) {
    throw std::out_of_range(absl::StrCat("TensorDict.index_put_: batch_size ", shape_to_string(batch), ": ",
                                         error.what_without_backtrace()));
  }
  if (value.batch_size() != c10::IntArrayRef(target)) {
    throw std::invalid_argument(absl::StrCat("TensorDict.index_put_: the value has batch_size ",
                                             shape_to_string(value.batch_size()), " but the indexed batch shape is ",
                                             shape_to_string(target)));
  }
  // Here an entry has shape batch_size + (its shape in `value` past value's batch dims).
  const size_t value_ndim = value.batch_size().size();
  auto here_shape = [&](c10::IntArrayRef there) {
    std::vector<int64_t> shape = batch;
    shape.insert(shape.end(), there.begin() + value_ndim, there.end());
    return shape;
  };
  std::vector<std::pair<NestedKey, TensorDict>> new_tensordicts;
  std::vector<std::pair<NestedKey, at::Tensor>> new_leaves;
  std::vector<std::pair<NestedKey, at::Tensor>> writes;
  for (const auto& [key, entry] : value.items(/*include_nested=*/true, /*leaves_only=*/false)) {
    c10::IntArrayRef there = entry.is_tensor() ? entry.tensor().sizes() : entry.tensordict().batch_size();
    std::vector<int64_t> shape = here_shape(there);
    const Entry* existing = impl_->lookup(key, nullptr);
    if (existing == nullptr) {
      if (entry.is_tensor()) {
        const at::Tensor& leaf = entry.tensor();
        new_leaves.emplace_back(key, at::zeros(shape, leaf.options().device(impl_->device.value_or(leaf.device()))));
        writes.emplace_back(key, leaf);
      } else {
        new_tensordicts.emplace_back(key, TensorDict(shape, impl_->device));
      }
      continue;
    }
    if (existing->is_tensor() != entry.is_tensor()) {
      throw std::invalid_argument(absl::StrCat("TensorDict.index_put_: key ", key.to_string(), " is a ",
                                               existing->is_tensor() ? "tensor" : "TensorDict", " here but a ",
                                               entry.is_tensor() ? "tensor" : "TensorDict", " in the value"));
    }
    c10::IntArrayRef here = existing->is_tensor() ? existing->tensor().sizes() : existing->tensordict().batch_size();
    if (here != c10::IntArrayRef(shape)) {
      throw std::invalid_argument(absl::StrCat("TensorDict.index_put_: key ", key.to_string(), " has shape ",
                                               shape_to_string(here), " here, so the value's ", shape_to_string(there),
                                               " does not fit (expected ", shape_to_string(shape), ")"));
    }
    if (entry.is_tensor()) writes.emplace_back(key, entry.tensor());
  }
  // Everything fits: allocate, then write.
  for (const auto& [key, td] : new_tensordicts) impl_->set(key, Entry(td));
  for (const auto& [key, zeros] : new_leaves) impl_->set(key, Entry(zeros));
  for (const auto& [key, leaf] : writes) {
    at::Tensor destination = get(key);
    destination.index_put_(expanded, leaf.to(destination.options()));
  }
  return *this;
}

TensorDict TensorDict::masked_select(const at::Tensor& mask) const {
  if (mask.scalar_type() != at::kBool) {
    throw std::invalid_argument("TensorDict.masked_select: the mask must be a bool tensor");
  }
  return index({at::indexing::TensorIndex(mask)});
}

// ---- batch-dim shape ops -----------------------------------------------------------------------

TensorDict TensorDict::unsqueeze(int64_t dim) const {
  const int64_t d = wrap_dim(dim, ndim() + 1, "unsqueeze");
  std::vector<int64_t> new_batch = impl_->batch_size;
  new_batch.insert(new_batch.begin() + d, 1);
  return impl_->map_batch([d](const at::Tensor& t) { return t.unsqueeze(d); }, std::move(new_batch));
}

TensorDict TensorDict::squeeze(std::optional<int64_t> dim) const {
  std::vector<int64_t> dims;
  if (dim) {
    const int64_t d = wrap_dim(*dim, ndim(), "squeeze");
    if (impl_->batch_size[d] == 1) dims.push_back(d);
  } else {
    for (int64_t d = ndim() - 1; d >= 0; --d) {
      if (impl_->batch_size[d] == 1) dims.push_back(d);
    }
  }
  std::vector<int64_t> new_batch = impl_->batch_size;
  for (int64_t d : dims) new_batch.erase(new_batch.begin() + d);  // dims are descending
  return impl_->map_batch(
      [&dims](const at::Tensor& t) {
        at::Tensor out = t;
        for (int64_t d : dims) out = out.squeeze(d);
        return out;
      },
      std::move(new_batch));
}

namespace {
std::vector<int64_t> infer_batch_shape(std::vector<int64_t> shape, int64_t numel, c10::IntArrayRef from) {
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) throw std::invalid_argument("TensorDict.reshape: only one dim can be -1");
      infer_at = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer_at >= 0 && known != 0 && numel % known == 0) shape[infer_at] = numel / known;
  const int64_t total = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
  if (total != numel || (infer_at >= 0 && shape[infer_at] < 0)) {
    throw std::invalid_argument(absl::StrCat("TensorDict.reshape: batch_size ", shape_to_string(from),
                                             " cannot be reshaped to ", shape_to_string(shape)));
  }
  return shape;
}

std::vector<int64_t> with_features(c10::IntArrayRef batch_part, const at::Tensor& t, size_t ndim) {
  std::vector<int64_t> shape = batch_part.vec();
  shape.insert(shape.end(), t.sizes().begin() + ndim, t.sizes().end());
  return shape;
}
}  // namespace

TensorDict TensorDict::reshape(std::vector<int64_t> shape) const {
  std::vector<int64_t> new_batch = infer_batch_shape(std::move(shape), numel(), impl_->batch_size);
  const size_t n = impl_->batch_size.size();
  return impl_->map_batch([&](const at::Tensor& t) { return t.reshape(with_features(new_batch, t, n)); },
                          new_batch);
}

TensorDict TensorDict::view(std::vector<int64_t> shape) const {
  std::vector<int64_t> new_batch = infer_batch_shape(std::move(shape), numel(), impl_->batch_size);
  const size_t n = impl_->batch_size.size();
  try {
    return impl_->map_batch([&](const at::Tensor& t) { return t.view(with_features(new_batch, t, n)); },
                            new_batch);
  } catch (const c10::Error& error) {
    throw std::invalid_argument(absl::StrCat("TensorDict.view: ", error.what_without_backtrace()));
  }
}

TensorDict TensorDict::expand(std::vector<int64_t> shape) const {
  const auto& batch = impl_->batch_size;
  const size_t n = batch.size();
  bool ok = shape.size() >= n;
  for (size_t i = 0; ok && i < n; ++i) {
    int64_t& target = shape[shape.size() - n + i];
    if (target == -1) target = batch[i];
    ok = batch[i] == target || batch[i] == 1;
  }
  if (!ok) {
    throw std::invalid_argument(absl::StrCat("TensorDict.expand: batch_size ", shape_to_string(batch),
                                             " cannot be expanded to ", shape_to_string(shape)));
  }
  return impl_->map_batch([&](const at::Tensor& t) { return t.expand(with_features(shape, t, n)); }, shape);
}

TensorDict TensorDict::permute(std::vector<int64_t> dims) const {
  const int64_t n = ndim();
  std::vector<bool> seen(n, false);
  bool ok = static_cast<int64_t>(dims.size()) == n;
  for (size_t i = 0; ok && i < dims.size(); ++i) {
    dims[i] = wrap_dim(dims[i], n, "permute");
    ok = !seen[dims[i]];
    seen[dims[i]] = true;
  }
  if (!ok) {
    throw std::invalid_argument(absl::StrCat("TensorDict.permute: ", shape_to_string(dims),
                                             " is not a permutation of the ", n, " batch dims"));
  }
  std::vector<int64_t> new_batch;
  for (int64_t d : dims) new_batch.push_back(impl_->batch_size[d]);
  return impl_->map_batch(
      [&](const at::Tensor& t) {
        std::vector<int64_t> order = dims;
        for (int64_t d = n; d < t.dim(); ++d) order.push_back(d);
        return t.permute(order);
      },
      std::move(new_batch));
}

TensorDict TensorDict::narrow(int64_t dim, int64_t start, int64_t length) const {
  const int64_t d = wrap_dim(dim, ndim(), "narrow");
  const int64_t size = impl_->batch_size[d];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start + length > size) {
    throw std::out_of_range(absl::StrCat("TensorDict.narrow: start ", start, " and length ", length,
                                         " do not fit batch dim ", d, " of size ", size));
  }
  std::vector<int64_t> new_batch = impl_->batch_size;
  new_batch[d] = length;
  return impl_->map_batch([d, start, length](const at::Tensor& t) { return t.narrow(d, start, length); },
                          std::move(new_batch));
}

std::vector<TensorDict> TensorDict::unbind(int64_t dim) const {
  const int64_t d = wrap_dim(dim, ndim(), "unbind");
  std::vector<int64_t> new_batch = impl_->batch_size;
  new_batch.erase(new_batch.begin() + d);
  std::vector<TensorDict> out;
  for (int64_t i = 0; i < impl_->batch_size[d]; ++i) {
    out.push_back(impl_->map_batch([d, i](const at::Tensor& t) { return t.select(d, i); }, new_batch));
  }
  return out;
}

std::vector<TensorDict> TensorDict::split(int64_t split_size, int64_t dim) const {
  const int64_t d = wrap_dim(dim, ndim(), "split");
  if (split_size <= 0) {
    throw std::invalid_argument(absl::StrCat("TensorDict.split: split_size must be positive, got ", split_size));
  }
  const int64_t size = impl_->batch_size[d];
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < size; start += split_size) sizes.push_back(std::min(split_size, size - start));
  return split(std::move(sizes), d);
}

std::vector<TensorDict> TensorDict::split(std::vector<int64_t> split_sizes, int64_t dim) const {
  const int64_t d = wrap_dim(dim, ndim(), "split");
  const int64_t total = std::accumulate(split_sizes.begin(), split_sizes.end(), int64_t{0});
  if (total != impl_->batch_size[d] ||
      std::any_of(split_sizes.begin(), split_sizes.end(), [](int64_t s) { return s < 0; })) {
    throw std::invalid_argument(absl::StrCat("TensorDict.split: sizes ", shape_to_string(split_sizes),
                                             " do not add up to batch dim ", d, " of size ",
                                             impl_->batch_size[d]));
  }
  std::vector<TensorDict> out;
  int64_t start = 0;
  for (int64_t length : split_sizes) {
    out.push_back(narrow(d, start, length));
    start += length;
  }
  return out;
}

namespace {
// Checks that every TensorDict has the first one's keys and, per key, compatible shapes:
// equal everywhere, or equal except along `free_dim` (for cat).
void check_joinable(const std::vector<TensorDict>& tds, const char* op, std::optional<int64_t> free_dim) {
  if (tds.empty()) throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": the list is empty"));
  const auto first_items = tds[0].items(/*include_nested=*/true, /*leaves_only=*/false);
  auto compatible = [&](c10::IntArrayRef a, c10::IntArrayRef b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i] && !(free_dim && static_cast<int64_t>(i) == *free_dim)) return false;
    }
    return true;
  };
  for (size_t i = 1; i < tds.size(); ++i) {
    if (!compatible(tds[i].batch_size(), tds[0].batch_size())) {
      throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": tensordict ", i, " has batch_size ",
                                               shape_to_string(tds[i].batch_size()), " but tensordict 0 has ",
                                               shape_to_string(tds[0].batch_size())));
    }
    const auto items = tds[i].items(true, false);
    absl::flat_hash_set<NestedKey> keys;
    for (const auto& item : items) keys.insert(item.first);
    for (const auto& [key, entry] : first_items) {
      if (!keys.contains(key)) {
        throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": key ", key.to_string(),
                                                 " is in tensordict 0 but not in tensordict ", i));
      }
      const Entry other = tds[i].get_entry(key);
      if (entry.is_tensor() != other.is_tensor()) {
        throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": key ", key.to_string(),
                                                 " is a tensor in one tensordict and a TensorDict in another"));
      }
      if (entry.is_tensor() && entry.tensor().device() != other.tensor().device()) {
        throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": tensors on different devices at key ",
                                                 key.to_string(), ": ", entry.tensor().device().str(),
                                                 " in tensordict 0, ", other.tensor().device().str(),
                                                 " in tensordict ", i));
      }
      c10::IntArrayRef a = entry.is_tensor() ? entry.tensor().sizes() : entry.tensordict().batch_size();
      c10::IntArrayRef b = other.is_tensor() ? other.tensor().sizes() : other.tensordict().batch_size();
      if (!compatible(b, a)) {
        throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": key ", key.to_string(), " has shape ",
                                                 shape_to_string(a), " in tensordict 0 but ", shape_to_string(b),
                                                 " in tensordict ", i));
      }
    }
    if (items.size() != first_items.size()) {
      absl::flat_hash_set<NestedKey> first_keys;
      for (const auto& item : first_items) first_keys.insert(item.first);
      for (const auto& item : items) {
        if (!first_keys.contains(item.first)) {
          throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": key ", item.first.to_string(),
                                                   " is in tensordict ", i, " but not in tensordict 0"));
        }
      }
    }
  }
}

std::optional<c10::Device> common_device(const std::vector<TensorDict>& tds) {
  std::optional<c10::Device> device = tds[0].device();
  for (const TensorDict& td : tds) {
    if (td.device() != device) return std::nullopt;
  }
  return device;
}

// Joins leaf by leaf; `join` gets the tensors (or, through recursion, nested TensorDicts).
TensorDict join_all(const std::vector<TensorDict>& tds, std::vector<int64_t> batch,
                    const std::function<at::Tensor(const std::vector<at::Tensor>&)>& join,
                    const std::function<std::vector<int64_t>(const std::vector<TensorDict>&)>& nested_batch) {
  TensorDict out(std::move(batch), common_device(tds));
  for (const NestedKey& key : tds[0].keys()) {
    if (tds[0].is_tensordict(key)) {
      std::vector<TensorDict> nested;
      for (const TensorDict& td : tds) nested.push_back(td.get_tensordict(key));
      out.set(key, join_all(nested, nested_batch(nested), join, nested_batch));
    } else {
      std::vector<at::Tensor> tensors;
      for (const TensorDict& td : tds) tensors.push_back(td.get(key));
      out.set(key, join(tensors));
    }
  }
  return out;
}
}  // namespace

TensorDict TensorDict::stack(const std::vector<TensorDict>& tensordicts, int64_t dim) {
  check_joinable(tensordicts, "stack", std::nullopt);
  const int64_t d = wrap_dim(dim, tensordicts[0].ndim() + 1, "stack");
  auto stacked_batch = [d, n = static_cast<int64_t>(tensordicts.size())](const std::vector<TensorDict>& tds) {
    std::vector<int64_t> batch = tds[0].batch_size().vec();
    batch.insert(batch.begin() + d, n);
    return batch;
  };
  return join_all(tensordicts, stacked_batch(tensordicts),
                  [d](const std::vector<at::Tensor>& tensors) { return at::stack(tensors, d); }, stacked_batch);
}

TensorDict TensorDict::cat(const std::vector<TensorDict>& tensordicts, int64_t dim) {
  if (tensordicts.empty()) throw std::invalid_argument("TensorDict.cat: the list is empty");
  const int64_t d = wrap_dim(dim, tensordicts[0].ndim(), "cat");
  check_joinable(tensordicts, "cat", d);
  auto cat_batch = [d](const std::vector<TensorDict>& tds) {
    std::vector<int64_t> batch = tds[0].batch_size().vec();
    batch[d] = 0;
    for (const TensorDict& td : tds) batch[d] += td.batch_size()[d];
    return batch;
  };
  return join_all(tensordicts, cat_batch(tensordicts),
                  [d](const std::vector<at::Tensor>& tensors) { return at::cat(tensors, d); }, cat_batch);
}

// ---- comparison and printing -------------------------------------------------------------------

namespace {
bool leaves_match(const TensorDict& a, const TensorDict& b,
                  const std::function<bool(const at::Tensor&, const at::Tensor&)>& same) {
  if (a.batch_size() != b.batch_size()) return false;
  const auto a_items = a.items(true, true);
  if (a_items.size() != b.items(true, true).size()) return false;
  for (const auto& [key, entry] : a_items) {
    if (!b.contains(key) || b.is_tensordict(key)) return false;
    const at::Tensor& x = entry.tensor();
    const at::Tensor y = b.get(key);
    if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type() || !same(x, y)) return false;
  }
  return true;
}
}  // namespace

bool TensorDict::equal(const TensorDict& other) const {
  return leaves_match(*this, other, [](const at::Tensor& x, const at::Tensor& y) { return x.equal(y); });
}

bool TensorDict::allclose(const TensorDict& other, double rtol, double atol) const {
  return leaves_match(*this, other,
                      [rtol, atol](const at::Tensor& x, const at::Tensor& y) { return x.allclose(y, rtol, atol); });
}

std::string TensorDict::to_string() const {
  std::ostringstream out;
  impl_->print(out, "");
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const TensorDict& td) { return out << td.to_string(); }

void set_mirroring(TensorDict& out, const TensorDict& like, const NestedKey& key, const at::Tensor& value) {
  const auto& path = key.path();
  for (size_t n = 1; n < path.size(); ++n) {
    NestedKey parent(std::vector<std::string>(path.begin(), path.begin() + n));
    if (!out.contains(parent) && like.contains(parent) && like.is_tensordict(parent)) {
      out.set(parent, TensorDict(like.get_tensordict(parent).batch_size().vec(), like.device()));
    }
  }
  out.set(key, value);
}

}  // namespace tdp
