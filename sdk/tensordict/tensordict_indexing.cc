// TensorDict batch indexing: operator[], index, index_put_ and masked_select.
#include <ATen/Functions.h>
#include <ATen/TensorIndexing.h>
#include <absl/strings/str_cat.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "sdk/tensordict/tensordict.h"
#include "sdk/tensordict/tensordict_internal.h"

namespace tdp {

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

}  // namespace tdp
