// Batch buckets: the bucket choice, chunking and padding a GPU actor uses to map any batch size
// onto its captured graphs. Pure tensor logic, checked on the CPU.
#include "sdk/actor/batch_buckets.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "tests/testing/error_of.h"

namespace tdp::actor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<int64_t> kBuckets = {1, 16, 64};

TEST(BatchBucketsTest, ACallRunsInTheSmallestBucketThatFits) {
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 1), ElementsAre(BucketChunk{0, 1, 1}));
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 2), ElementsAre(BucketChunk{0, 2, 16}));
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 16), ElementsAre(BucketChunk{0, 16, 16}));
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 17), ElementsAre(BucketChunk{0, 17, 64}));
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 64), ElementsAre(BucketChunk{0, 64, 64}));
}

TEST(BatchBucketsTest, ALargerCallIsSplitIntoChunksOfTheLargestBucket) {
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 128), ElementsAre(BucketChunk{0, 64, 64}, BucketChunk{64, 64, 64}));
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 150),
              ElementsAre(BucketChunk{0, 64, 64}, BucketChunk{64, 64, 64}, BucketChunk{128, 22, 64}));
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 65), ElementsAre(BucketChunk{0, 64, 64}, BucketChunk{64, 1, 1}));
  EXPECT_THAT(plan_bucket_chunks(kBuckets, 70), ElementsAre(BucketChunk{0, 64, 64}, BucketChunk{64, 6, 16}));
  int64_t covered = 0;
  for (const BucketChunk& chunk : plan_bucket_chunks(kBuckets, 10007)) {
    EXPECT_EQ(chunk.offset, covered);
    EXPECT_LE(chunk.rows, chunk.bucket);
    covered += chunk.rows;
  }
  EXPECT_EQ(covered, 10007);
}

TEST(BatchBucketsTest, NoRowsNoChunksAndBadArgumentsAreErrors) {
  EXPECT_TRUE(plan_bucket_chunks(kBuckets, 0).empty());
  EXPECT_THAT(test_util::error_of<std::invalid_argument>([] { plan_bucket_chunks({}, 3); }), HasSubstr("no batch buckets"));
  EXPECT_THAT(test_util::error_of<std::invalid_argument>([] { plan_bucket_chunks(kBuckets, -1); }),
              HasSubstr("negative row count -1"));
}

TEST(BatchBucketsTest, PaddedRowsAreTheChunksRowsThenZeros) {
  TensorDict td({{"obs", at::arange(10, at::kFloat).view({5, 2}) + 1}, {"h", at::ones({5, 3, 2}, at::kLong)}}, {5});
  TensorDict padded = padded_rows(td, {"obs", "h"}, BucketChunk{1, 3, 4});
  EXPECT_EQ(padded.batch_size().vec(), (std::vector<int64_t>{4}));
  EXPECT_TRUE(at::equal(padded.get("obs").narrow(0, 0, 3), td.get("obs").narrow(0, 1, 3)));
  EXPECT_TRUE(at::equal(padded.get("obs")[3], at::zeros({2})));
  EXPECT_EQ(padded.get("h").sizes().vec(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(padded.get("h").scalar_type(), at::kLong);
  EXPECT_EQ(padded.get("h").sum().item<int64_t>(), 18);
  EXPECT_FALSE(padded.contains("other"));
  // A chunk that fills its bucket is a view: no copy.
  TensorDict exact = padded_rows(td, {"obs"}, BucketChunk{2, 3, 3});
  EXPECT_EQ(exact.get("obs").data_ptr<float>(), td.get("obs").data_ptr<float>() + 4);
}

}  // namespace
}  // namespace tdp::actor
