// TensorDict copies and conversions: clone, empty, detach, to, apply, flatten/unflatten_keys.
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

#include "sdk/tensordict/tensordict.h"
#include "sdk/tensordict/tensordict_internal.h"

namespace tdp {

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

}  // namespace tdp
