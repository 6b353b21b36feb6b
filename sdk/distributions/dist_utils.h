// Private helpers shared by the distribution implementations (not part of the public API):
// the torch.distributions.utils functions, written with the same ATen ops so that results
// match PyTorch to the last bit.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/broadcast_tensors.h>
#include <c10/util/ArrayRef.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sdk/tensordict/tensordict.h"

namespace tdp::dist::internal {

// Whether every tensor is defined and all share one shape.
bool same_shape(c10::ArrayRef<at::Tensor> values);
// torch.broadcast_tensors over a distribution's N parameters. By value: tensors that already
// share a shape (one network head's outputs usually do) come back as given, with no dispatcher
// op and no allocation, which is a measurable part of building a distribution per step at batch 1.
template <size_t N>
std::array<at::Tensor, N> broadcast_all(std::array<at::Tensor, N> values) {
  if (same_shape(values)) return values;
  std::vector<at::Tensor> broadcast = at::broadcast_tensors(values);
  for (size_t i = 0; i < N; ++i) values[i] = std::move(broadcast[i]);
  return values;
}
// Sums the `dims` rightmost dims (torch.distributions.utils._sum_rightmost).
at::Tensor sum_rightmost(const at::Tensor& value, int64_t dims);
// Clamps to [eps, 1 - eps] with eps the dtype's machine epsilon.
at::Tensor clamp_probs(const at::Tensor& probs);
at::Tensor probs_to_logits(const at::Tensor& probs, bool is_binary);
at::Tensor logits_to_probs(const at::Tensor& logits, bool is_binary);
std::vector<int64_t> concat(c10::IntArrayRef a, c10::IntArrayRef b);
using ::tdp::shape_to_string;
// A one-element tensor prints its value ("0.5"), others their shape ("[3, 4]").
std::string param_to_string(const at::Tensor& value);
// Throws std::invalid_argument naming the distribution when `value` is undefined.
// (Views, not strings: the names are only read to build the message.)
[[noreturn]] void throw_undefined(std::string_view distribution, std::string_view param);
inline const at::Tensor& require_defined(const at::Tensor& value, std::string_view distribution,
                                         std::string_view param) {
  if (!value.defined()) throw_undefined(distribution, param);
  return value;
}

}  // namespace tdp::dist::internal
