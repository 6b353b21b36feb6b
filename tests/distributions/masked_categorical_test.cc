// MaskedCategorical and MaskedOneHotCategorical against TorchRL 0.13's, with a dense mask.
// Golden values from the venv's TorchRL:
//   ~/.cache/tdpolicy/venv/bin/python -c '
//   import torch; from torchrl.modules import MaskedCategorical as M, MaskedOneHotCategorical as O
//   l = torch.tensor([[0.5, -1.0, 2.0, 0.25], [1.5, 0.0, -0.5, 3.0], [-2.0, 1.0, 0.5, 0.0]])
//   m = torch.tensor([[True, False, True, True], [False, True, True, False], [True, True, True, True]])
//   d = M(logits=l, mask=m); v = torch.tensor([1, 2, 0])
//   print(d.logits.tolist(), d.mode.tolist(), d.log_prob(v).tolist(), d.entropy().tolist())
//   print(M(logits=l, mask=m, neg_inf=-1e9, use_cross_entropy=False).log_prob(v).tolist())
//   p = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])
//   d3 = M(probs=p, mask=m); print(d3.log_prob(torch.tensor([0, 1, 0])).tolist(), d3.probs.tolist())
//   o = O(logits=l, mask=m); print(o.mode.tolist(), o.log_prob(torch.nn.functional.one_hot(v, 4)).tolist())
//   print(torch.multinomial(d.probs, 5, True, generator=torch.Generator().manual_seed(0)).T.tolist())'
#include "sdk/distributions/masked_categorical.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "sdk/distributions/registry.h"
#include "tests/testing/error_of.h"

namespace tdp::dist {
namespace {

using test_util::error_of;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

at::Tensor logits() {
  return at::tensor({0.5, -1.0, 2.0, 0.25, 1.5, 0.0, -0.5, 3.0, -2.0, 1.0, 0.5, 0.0}, at::kFloat).reshape({3, 4});
}

at::Tensor mask() {
  return at::tensor({1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1}, at::kLong).to(at::kBool).reshape({3, 4});
}

at::Tensor floats(std::vector<double> values) { return at::tensor(values, at::kDouble).to(at::kFloat); }

void expect_near(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(at::allclose(got.to(at::kDouble), want.to(at::kDouble), 1e-6, 1e-6, /*equal_nan=*/true))
      << got << "\nexpected\n"
      << want;
}

TEST(MaskedCategorical, MatchesTorchRL) {
  MaskedCategorical d({}, logits(), mask());
  expect_near(d.logits(), floats({-1.8342585563659668, -kInf, -0.3342585563659668, -2.084258556365967, -kInf,
                                  -0.4740769863128662, -0.9740769863128662, -kInf, -3.7051730155944824,
                                  -0.705173134803772, -1.205173134803772, -1.705173134803772})
                              .reshape({3, 4}));
  EXPECT_TRUE(d.mode().equal(at::tensor({2, 1, 1}, at::kLong)));
  EXPECT_TRUE(d.deterministic_sample().equal(d.mode()));
  // A masked-out action (1 in the first row) scores -inf.
  expect_near(d.log_prob(at::tensor({1, 2, 0}, at::kLong)), floats({-kInf, -0.9740769863128662, -3.7051730155944824}));
  expect_near(d.entropy(), floats({0.7915551662445068, 0.6628473401069641, 1.1105220317840576}));
  EXPECT_EQ(d.name(), "MaskedCategorical");
}

TEST(MaskedCategorical, NegInfAndGatheredLogProb) {
  MaskedCategorical d({}, logits(), mask(), MaskedCategoricalOptions{-1e9, /*use_cross_entropy=*/false});
  expect_near(d.log_prob(at::tensor({1, 2, 0}, at::kLong)), floats({-1e9, -0.9740769863128662, -3.7051730155944824}));
}

TEST(MaskedCategorical, FromProbs) {
  const at::Tensor probs =
      at::tensor({0.1, 0.2, 0.3, 0.4, 0.25, 0.25, 0.25, 0.25, 0.7, 0.1, 0.1, 0.1}, at::kFloat).reshape({3, 4});
  MaskedCategorical d(probs, {}, mask());
  expect_near(d.log_prob(at::tensor({0, 1, 0}, at::kLong)),
              floats({-2.079441547393799, -0.6931471824645996, -0.35667505860328674}));
  expect_near(d.probs(), floats({0.125, 0.0, 0.375, 0.5, 0.0, 0.5, 0.5, 0.0, 0.6999999284744263, 0.09999999403953552,
                                 0.09999999403953552, 0.09999999403953552})
                             .reshape({3, 4}));
}

TEST(MaskedCategorical, SamplesAsTorchFromTheSameGenerator) {
  MaskedCategorical d({}, logits(), mask());
  at::Generator generator = at::detail::createCPUGenerator(0);
  EXPECT_TRUE(d.sample({5}, generator)
                  .equal(at::tensor({3, 2, 1, 2, 1, 1, 2, 1, 1, 3, 1, 2, 2, 1, 1}, at::kLong).reshape({5, 3})));
  // Only allowed actions, over many draws.
  const at::Tensor drawn = d.sample({2000}, generator);
  EXPECT_TRUE(mask().expand({2000, 3, 4}).gather(-1, drawn.unsqueeze(-1)).all().item<bool>());
}

TEST(MaskedOneHotCategorical, MatchesTorchRL) {
  MaskedOneHotCategorical d({}, logits(), mask());
  EXPECT_TRUE(d.mode().equal(at::tensor({0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0}, at::kLong).reshape({3, 4})));
  expect_near(d.log_prob(at::one_hot(at::tensor({1, 2, 0}, at::kLong), 4)),
              floats({-kInf, -0.9740769863128662, -3.7051730155944824}));
  at::Generator generator = at::detail::createCPUGenerator(0);
  const at::Tensor sample = d.sample({5}, generator);
  EXPECT_EQ(sample.scalar_type(), at::kLong);
  EXPECT_TRUE(
      sample.argmax(-1).equal(at::tensor({3, 2, 1, 2, 1, 1, 2, 1, 1, 3, 1, 2, 2, 1, 1}, at::kLong).reshape({5, 3})));
}

TEST(MaskedCategorical, FromTheRegistryByName) {
  auto d = make_distribution("masked_categorical", {{"logits", logits()}, {"mask", mask()}}, {{"neg_inf", -1e9}});
  EXPECT_EQ(d->name(), "MaskedCategorical");
  expect_near(d->log_prob(at::tensor({1, 2, 0}, at::kLong)), floats({-1e9, -0.9740769863128662, -3.7051730155944824}));
  auto o = make_distribution("masked_one_hot_categorical", {{"logits", logits()}, {"mask", mask()}});
  EXPECT_EQ(o->name(), "MaskedOneHotCategorical");
  EXPECT_THAT(error_of<std::invalid_argument>([&] {
                make_distribution("masked_categorical", {{"logits", logits()}});
              }),
              HasSubstr("mask"));
}

TEST(MaskedCategorical, RefusesWhatIsNotADenseBooleanMask) {
  EXPECT_THAT(error_of<std::invalid_argument>([&] {
                MaskedCategorical({}, logits(), at::tensor({0, 2}, at::kLong));
              }),
              HasSubstr("MaskedCategorical: the mask must be a boolean tensor (true: allowed), got Long; TorchRL's "
                        "sparse forms (`indices`, sparse_mask, padding_value) are not supported"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { MaskedOneHotCategorical(logits(), logits(), mask()); }),
              HasSubstr("MaskedOneHotCategorical: either `probs` or `logits` must be specified, but not both."));
}

}  // namespace
}  // namespace tdp::dist
