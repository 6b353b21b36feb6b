// Distributions on a CUDA device sample the numbers PyTorch's own ops draw from the same
// generator, also where a GPU path skips an op's host-side or device-side checks (which CUDA-graph
// capture forbids or which would kill the CUDA context). Runs where a GPU is visible (tests/gpu/);
// skips elsewhere, saying why.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "sdk/distributions/categorical.h"
#include "sdk/distributions/normal.h"
#include "tests/testing/gpu.h"

namespace tdp::dist {
namespace {

const c10::Device kCuda("cuda:0");

// The default CUDA generator, reseeded: the same stream for the SDK's call and PyTorch's op.
at::Generator seeded(uint64_t seed) {
  at::Generator generator = at::globalContext().defaultGenerator(kCuda);
  generator.set_current_seed(seed);
  return generator;
}

TEST(CategoricalCudaTest, OneDrawPerRowIsMultinomialsDrawBitwise) {
  SKIP_WITHOUT_GPU();
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{1, 2}, {64, 18}, {4096, 3}, {5}}) {
    const at::Tensor logits = at::randn(shape, at::TensorOptions().device(kCuda));
    const Categorical categorical = Categorical::from_logits(logits);
    const at::Tensor probs_2d = categorical.probs().reshape({-1, shape.back()});
    const at::Tensor expected =
        at::multinomial(probs_2d, 1, /*replacement=*/true, seeded(7)).reshape(categorical.batch_shape());
    EXPECT_TRUE(at::equal(categorical.sample({}, seeded(7)), expected)) << logits.sizes();
    EXPECT_TRUE(at::equal(categorical.sample({1}, seeded(7)), expected.unsqueeze(0))) << logits.sizes();
    // More than one draw per row stays multinomial's.
    std::vector<int64_t> three = {3};
    three.insert(three.end(), categorical.batch_shape().begin(), categorical.batch_shape().end());
    EXPECT_TRUE(at::equal(categorical.sample({3}, seeded(7)),
                          at::multinomial(probs_2d, 3, /*replacement=*/true, seeded(7)).t().reshape(three)));
  }
}

TEST(NormalCudaTest, SampleIsAtNormalsDrawBitwise) {
  SKIP_WITHOUT_GPU();
  const at::Tensor loc = at::randn({64, 6}, at::TensorOptions().device(kCuda));
  const at::Tensor scale = at::rand({64, 6}, at::TensorOptions().device(kCuda)) + 0.1;
  const Normal normal(loc, scale);
  EXPECT_TRUE(at::equal(normal.sample({}, seeded(3)), at::normal(loc, scale, seeded(3))));
}

}  // namespace
}  // namespace tdp::dist
