// TensorSpec: the space of a TorchRL action (torchrl.data's Bounded, OneHot and Categorical specs),
// as far as a policy needs it: whether a value lies in the space (is_in) and the projection of
// one that does not back onto it (project), TorchRL's TensorSpec.project. An actor built with
// safe=True projects its outputs this way after it runs (SafeModule, and the
// ProbabilisticTensorDictModule option `projections`).
//
//   tdp::nn::TensorSpec box = tdp::nn::TensorSpec::bounded(torch::full({2}, -2.0), torch::full({2}, 2.0), {2});
//   at::Tensor a = box.project(torch::tensor({{3.0, -1.0}}));   // [[2, -1]]: clamped
//   tdp::nn::TensorSpec n4 = tdp::nn::TensorSpec::categorical(4);
//   n4.project(torch::tensor({5L}));                            // [3]: clamped into [0, 3]
//   tdp::nn::SpecProjection safe{"action", box};                // where a module projects
//
// project() follows TorchRL: when the whole value is in the space (shape, dtype and every
// element), it is returned as is; otherwise every element goes through the spec's _project:
// Bounded clamps into [low, high]; Categorical rounds a non-integer value and clamps it into
// [0, n - 1] (its dtype kept); OneHot draws each row's index from the row's values as weights
// (torch.multinomial: a one-hot row gives its own index) and writes it one-hot in the spec's
// dtype.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

class TensorSpec {
 public:
  enum class Kind { kBounded, kOneHot, kCategorical };

  // low and high broadcast to `shape`. TorchRL's Bounded(low, high, shape, dtype).
  static TensorSpec bounded(at::Tensor low, at::Tensor high, std::vector<int64_t> shape,
                            at::ScalarType dtype = at::kFloat);
  // TorchRL's OneHot(n, shape=[n], dtype=torch.bool) unless shape / dtype are given.
  static TensorSpec one_hot(int64_t n, std::vector<int64_t> shape = {}, at::ScalarType dtype = at::kBool);
  // TorchRL's Categorical(n, shape=[], dtype=torch.long) unless shape / dtype are given.
  static TensorSpec categorical(int64_t n, std::vector<int64_t> shape = {}, at::ScalarType dtype = at::kLong);

  Kind kind() const { return kind_; }
  const at::Tensor& low() const { return low_; }
  const at::Tensor& high() const { return high_; }
  int64_t n() const { return n_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  at::ScalarType dtype() const { return dtype_; }

  // TorchRL's is_in: the value's trailing dims match the shape (a spec dim of 1 broadcasts), its
  // dtype is the spec's, and every element is in the space.
  bool is_in(const at::Tensor& value) const;
  // `value` when is_in(value), else its projection (see the header comment). OneHot's draw uses
  // `generator` (the default generator when none).
  at::Tensor project(const at::Tensor& value, const std::optional<at::Generator>& generator = std::nullopt) const;

  // TorchRL's rand(), shaped like `action` (one_hot: [..., n]; categorical: [...]; bounded: as
  // `action`), from `generator` (null: LibTorch's default): uniform over the actions, or with a
  // boolean `mask` [..., n] only over the allowed ones (torch.multinomial over the mask); a
  // bounded draw is low + (high - low) * U[0, 1), put back on a bound it rounded past.
  at::Tensor rand(const at::Tensor& action, const at::Tensor& mask,
                  const std::optional<at::Generator>& generator = std::nullopt) const;

  // "Bounded(shape=[2], dtype=Float)", for messages and printing.
  std::string to_string() const;

 private:
  TensorSpec(Kind kind, std::vector<int64_t> shape, at::ScalarType dtype)
      : kind_(kind), shape_(std::move(shape)), dtype_(dtype) {}
  bool shape_matches(const at::Tensor& value) const;

  Kind kind_;
  at::Tensor low_, high_;
  int64_t n_ = 0;
  std::vector<int64_t> shape_;
  at::ScalarType dtype_;
};

// An entry a module projects onto its spec after it runs (TorchRL's safe=True).
struct SpecProjection {
  NestedKey key;
  TensorSpec spec;
};

// Projects each listed entry `out` holds (an absent one is skipped, as TorchRL does), in place.
void project_entries(const std::vector<SpecProjection>& projections, TensorDict& out,
                     const std::optional<at::Generator>& generator = std::nullopt);

}  // namespace tdp::nn
