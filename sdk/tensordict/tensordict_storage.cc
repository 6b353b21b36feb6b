// TensorDictImpl: lookup, validated writes and recursive copies of the entry tree.
#include <absl/strings/str_cat.h>

#include "sdk/tensordict/tensordict_internal.h"

namespace tdp {

std::vector<NestedKey> TensorDictImpl::level_keys(const NestedKey& prefix) const {
  std::vector<NestedKey> keys;
  keys.reserve(entries.size());
  for (const auto& [name, entry] : entries) keys.push_back(prefix + NestedKey(name));
  return keys;
}

namespace {

// Why `key` names no entry: its path broke at index `depth`, on `level` (the TensorDict reached
// so far), which has no entry there or (`blocked`) holds a tensor there. Out of line and cold: a
// lookup that succeeds, which is every lookup of a policy step, runs none of it.
std::string describe_miss(const NestedKey& key, size_t depth,
                                                                      const TensorDictImpl& level, bool blocked) {
  const NestedKey prefix(std::vector<std::string>(key.path().begin(), key.path().begin() + depth));
  if (blocked) {
    return absl::StrCat("key ", key.to_string(), " not found: ", (prefix + NestedKey(key.path()[depth])).to_string(),
                        " is a tensor, not a TensorDict");
  }
  return absl::StrCat("key ", key.to_string(), " not found in TensorDict with keys ",
                      keys_to_string(level.level_keys(prefix)));
}

}  // namespace

const Entry* TensorDictImpl::lookup_path(const NestedKey& key, std::string* error) const {
  if (key.empty()) {
    if (error) *error = "the empty key names no entry";
    return nullptr;
  }
  const TensorDictImpl* level = this;
  for (size_t i = 0; i < key.size(); ++i) {
    const Entry* entry = level->find(key.path()[i]);
    if (entry == nullptr) {
      if (error) *error = describe_miss(key, i, *level, /*blocked=*/false);
      return nullptr;
    }
    if (i + 1 == key.size()) return entry;
    if (entry->is_tensor()) {
      if (error) *error = describe_miss(key, i, *level, /*blocked=*/true);
      return nullptr;
    }
    level = sub(*entry);
  }
  return nullptr;
}

void TensorDictImpl::throw_missing(const NestedKey& key) const {
  std::string error;
  lookup_path(key, &error);
  throw KeyError(error);
}

void TensorDictImpl::check_fits(const NestedKey& key, const Entry& value, c10::IntArrayRef batch) const {
  if (value.is_tensor()) {
    const at::Tensor& tensor = value.tensor();
    if (fits(tensor, batch)) return;
    if (!tensor.defined()) {
      throw std::invalid_argument(absl::StrCat("TensorDict.set: key ", key.to_string(),
                                               ": the tensor is undefined"));
    }
    throw std::invalid_argument(absl::StrCat("TensorDict.set: key ", key.to_string(), " has shape ",
                                             shape_to_string(tensor.sizes()),
                                             ", whose leading dims do not match batch_size ", shape_to_string(batch)));
  } else {
    const TensorDictImpl& nested = *sub(value);
    if (&nested == this) {
      throw std::invalid_argument(absl::StrCat("TensorDict.set: key ", key.to_string(),
                                               ": a TensorDict cannot contain itself"));
    }
    if (!internal::has_prefix(nested.batch_size, batch)) {
      throw std::invalid_argument(absl::StrCat(
          "TensorDict.set: key ", key.to_string(), " is a TensorDict with batch_size ",
          shape_to_string(nested.batch_size), ", which does not start with batch_size ",
          shape_to_string(batch)));
    }
  }
}

void TensorDictImpl::set(const NestedKey& key, Entry value) {
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
  Entry stored = level->placed(std::move(value));
  if (depth + 1 < key.size()) level = level->create_parents(key, depth);
  if (Entry* existing = level->find(key.leaf())) {
    *existing = std::move(stored);
  } else {
    level->add(key.leaf(), std::move(stored));
  }
}

// Out of line, as the rest of a write's rarer work: a step that overwrites its entries runs
// none of it, and its code stays out of the cache lines a write touches.
TensorDictImpl* TensorDictImpl::create_parents(const NestedKey& key, size_t depth) {
  TensorDictImpl* level = this;
  for (; depth + 1 < key.size(); ++depth) {
    auto created = make(level->batch_size, level->device);
    TensorDictImpl* next = created.get();
    level->entries.emplace_back(key.path()[depth], Entry(wrap(std::move(created))));
    level = next;
  }
  return level;
}

void TensorDictImpl::add(const std::string& name, Entry value) {
  entries.emplace_back(name, std::move(value));
}

Entry TensorDictImpl::moved_to_device(Entry value) const {
  if (value.is_tensor()) {
    const at::Tensor& tensor = value.tensor();
    return stays_on_device(tensor) ? value : Entry(tensor.to(*device));
  }
  const TensorDictImpl& nested = *sub(value);
  return nested.device == device ? value : Entry(value.tensordict().to(*device));
}

std::shared_ptr<TensorDictImpl> TensorDictImpl::transform(
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

std::shared_ptr<TensorDictImpl> TensorDictImpl::clone_structure(bool deep) const {
  return transform(
      NestedKey(), [deep](const NestedKey&, const at::Tensor& t) { return deep ? t.clone() : t; },
      [](c10::IntArrayRef batch) { return batch.vec(); }, device);
}

TensorDict TensorDictImpl::map_batch(const std::function<at::Tensor(const at::Tensor&)>& leaf_fn,
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

void TensorDictImpl::collect(std::vector<std::string>& path, bool include_nested, bool leaves_only,
                             std::vector<std::pair<NestedKey, Entry>>& out) const {
  for (const auto& [name, entry] : entries) {
    path.push_back(name);
    if (entry.is_tensor() || !leaves_only) out.emplace_back(NestedKey(path), entry);
    if (!entry.is_tensor() && include_nested) sub(entry)->collect(path, include_nested, leaves_only, out);
    path.pop_back();
  }
}

}  // namespace tdp
