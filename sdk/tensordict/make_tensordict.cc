#include "sdk/tensordict/make_tensordict.h"

#include <algorithm>

namespace tdp {

std::vector<int64_t> common_leading_shape(const std::vector<c10::IntArrayRef>& shapes) {
  if (shapes.empty()) return {};
  std::vector<int64_t> common(shapes[0].begin(), shapes[0].end());
  for (const c10::IntArrayRef& shape : shapes) {
    size_t n = 0;
    while (n < common.size() && n < shape.size() && common[n] == shape[n]) ++n;
    common.resize(n);
  }
  return common;
}

TensorDict make_tensordict(const std::vector<std::pair<NestedKey, at::Tensor>>& entries,
                           std::optional<std::vector<int64_t>> batch_size, std::optional<c10::Device> device) {
  if (!batch_size.has_value()) {
    std::vector<c10::IntArrayRef> shapes;
    shapes.reserve(entries.size());
    for (const auto& [key, tensor] : entries) shapes.push_back(tensor.sizes());
    batch_size = common_leading_shape(shapes);
  }
  TensorDict out(*std::move(batch_size), device);
  for (const auto& [key, tensor] : entries) out.set(key, tensor);
  return out;
}

}  // namespace tdp
