// TensorDict batch-dim shape ops: unsqueeze, squeeze, reshape, view, expand, permute, narrow,
// unbind and split.
#include <absl/strings/str_cat.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>

#include "sdk/tensordict/tensordict.h"
#include "sdk/tensordict/tensordict_internal.h"

namespace tdp {

using internal::wrap_dim;


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

}  // namespace tdp
