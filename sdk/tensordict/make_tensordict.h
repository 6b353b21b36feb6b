// make_tensordict: a TensorDict from named tensors, with the batch size inferred when it is not
// given: the longest leading shape every entry shares (tensordict's `make_tensordict` with
// `auto_batch_size=True`; nested keys build the nesting, and a nested TensorDict's batch size is
// inferred the same way, so the result's is the common prefix of all the leaves' shapes).
//
//   tdp::TensorDict td = tdp::make_tensordict({{"observation", at::zeros({8, 4})},
//                                              {{"next", "observation"}, at::zeros({8, 4})},
//                                              {"reward", at::zeros({8, 1})}});
//   td.batch_size();                                          // [8]
//   tdp::make_tensordict({{"pixels", at::zeros({8, 3, 64, 64})}}, std::vector<int64_t>{8});
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp {

// The longest leading shape all `shapes` share ([] for none).
std::vector<int64_t> common_leading_shape(const std::vector<c10::IntArrayRef>& shapes);

// Throws (as TensorDict::set does, naming the key) when an entry does not start with a given
// `batch_size`; with `device`, entries are placed there.
TensorDict make_tensordict(const std::vector<std::pair<NestedKey, at::Tensor>>& entries,
                           std::optional<std::vector<int64_t>> batch_size = std::nullopt,
                           std::optional<c10::Device> device = std::nullopt);

}  // namespace tdp
