// Private helpers shared by the distribution implementations (not part of the public API):
// the torch.distributions.utils functions, written with the same ATen ops so that results
// match PyTorch to the last bit.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sdk/tensordict/tensordict.h"

namespace tdp::dist::internal {

// torch.broadcast_tensors. By value: tensors that already share a shape come back as given,
// with no copy.
std::vector<at::Tensor> broadcast_all(std::vector<at::Tensor> values);
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
const at::Tensor& require_defined(const at::Tensor& value, const std::string& distribution,
                                  const std::string& param);

}  // namespace tdp::dist::internal
