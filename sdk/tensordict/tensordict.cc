// TensorDict construction, shape and device, and its entries: get, set, update, erase, keys, select.
#include "sdk/tensordict/tensordict.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <numeric>

#include "sdk/tensordict/tensordict_internal.h"

namespace tdp {

std::string shape_to_string(c10::IntArrayRef shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

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

TensorDict& TensorDict::set(const NestedKey& key, at::Tensor value) {
  impl_->set(key, std::move(value));
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
  std::vector<std::string> path;
  impl_->collect(path, include_nested, leaves_only, out);
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
