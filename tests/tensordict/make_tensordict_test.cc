// make_tensordict: the inferred batch sizes are those tensordict 0.13's
// make_tensordict(..., auto_batch_size=True) gives for the same shapes (checked in its venv).
#include "sdk/tensordict/make_tensordict.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "tests/testing/error_of.h"

namespace tdp {
namespace {

using ::testing::HasSubstr;
using ::tdp::test_util::error_of;

std::vector<int64_t> inferred(const std::vector<std::pair<NestedKey, at::Tensor>>& entries) {
  return make_tensordict(entries).batch_size().vec();
}

TEST(MakeTensorDict, InfersTheLongestLeadingShapeEveryEntryShares) {
  EXPECT_EQ(inferred({{"a", at::zeros({3, 4, 5})}, {"b", at::zeros({3, 4})}}), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(inferred({{"a", at::zeros({3, 4, 5})}}), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(inferred({{"a", at::zeros({3, 4, 5})}, {"b", at::zeros({2})}}), std::vector<int64_t>{});
  EXPECT_EQ(inferred({{"a", at::zeros({3})}}), std::vector<int64_t>{3});
  EXPECT_EQ(inferred({{"a", at::zeros({})}}), std::vector<int64_t>{});
  EXPECT_EQ(inferred({}), std::vector<int64_t>{});
}

TEST(MakeTensorDict, NestedKeysBuildTheNestingAndCountTowardTheBatchSize) {
  TensorDict td = make_tensordict({{"a", at::zeros({3, 4, 5})}, {{"b", "c"}, at::zeros({3, 4, 2})}});
  EXPECT_EQ(td.batch_size().vec(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(td.get({"b", "c"}).sizes(), at::IntArrayRef({3, 4, 2}));
  EXPECT_EQ(inferred({{"a", at::zeros({3, 4, 5})}, {{"b", "c"}, at::zeros({3, 5})}}), std::vector<int64_t>{3});
  EXPECT_EQ(inferred({{"a", at::zeros({3, 4})}, {{"b", "c"}, at::zeros({3, 4, 1})}, {{"b", "d"}, at::zeros({3, 4, 2})}}),
            (std::vector<int64_t>{3, 4}));
}

TEST(MakeTensorDict, AGivenBatchSizeIsKeptAndCheckedAgainstEveryEntry) {
  EXPECT_EQ(make_tensordict({{"a", at::zeros({3, 4, 5})}}, std::vector<int64_t>{3}).batch_size().vec(),
            std::vector<int64_t>{3});
  EXPECT_THAT(error_of<std::exception>([] { make_tensordict({{"obs", at::zeros({3, 4})}}, std::vector<int64_t>{4}); }),
              HasSubstr("obs"));
}

TEST(MakeTensorDict, CommonLeadingShapeOfNoShapesIsEmpty) {
  EXPECT_TRUE(common_leading_shape({}).empty());
  const std::vector<int64_t> a{2, 3}, b{2, 3, 4};
  EXPECT_EQ(common_leading_shape({a, b}), (std::vector<int64_t>{2, 3}));
}

}  // namespace
}  // namespace tdp
