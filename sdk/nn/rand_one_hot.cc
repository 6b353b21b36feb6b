#include "sdk/nn/rand_one_hot.h"

#include <ATen/Functions.h>

namespace tdp::nn {

at::Tensor rand_one_hot(const at::Tensor& values, bool do_softmax,
                        std::optional<at::Generator> generator) {
  const at::Tensor probs = do_softmax ? values.softmax(-1) : values;
  auto shape = probs.sizes().vec();
  shape.back() = 1;
  // The first index whose cumulative probability exceeds one uniform draw per row.
  const at::Tensor u =
      at::rand(shape, generator.has_value() ? c10::optional<at::Generator>(*generator)
                                            : c10::optional<at::Generator>(),
               probs.options());
  const at::Tensor above = probs.cumsum(-1).gt(u);
  return above.cumsum(-1).eq(1).to(at::kLong);
}

}  // namespace tdp::nn
