// rand_one_hot: draws a one-hot sample along the last dimension of `values` (probabilities,
// or logits when do_softmax is true). Python's tensordict.nn.rand_one_hot; discrete actors
// use it to sample an action.
//
//   at::Tensor logits = torch::randn({4, 6});
//   at::Tensor action = tdp::nn::rand_one_hot(logits);            // [4, 6] of 0/1, int64
//   at::Generator gen = at::detail::createCPUGenerator(42);
//   at::Tensor same = tdp::nn::rand_one_hot(logits, true, gen);   // reproducible
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <optional>

namespace tdp::nn {

// Returns an int64 tensor of the shape of `values` with a single 1 on the last dimension, at
// index i with probability values[..., i] (after softmax when do_softmax).
at::Tensor rand_one_hot(const at::Tensor& values, bool do_softmax = true,
                        std::optional<at::Generator> generator = std::nullopt);

}  // namespace tdp::nn
