// TensorDict batch operations: indexing (ints, slices, masks, index tensors, None, Ellipsis),
// shape ops over batch dims, stack/cat/split/unbind, and their errors. Mirrors the relevant
// cases of tensordict's test/tensordict/test_generic.py.
#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sdk/tensordict/tensordict.h"
#include "tests/testing/error_of.h"

namespace tdp {
namespace {

using at::indexing::Ellipsis;
using at::indexing::None;
using at::indexing::Slice;
using ::testing::ElementsAre;
using ::tdp::test_util::error_of;

// batch_size [4, 3]; "x" [4, 3, 2] counts 0..23; "nested" has batch [4, 3, 5] and "y" [4, 3, 5].
TensorDict make_batched() {
  TensorDict td({4, 3});
  td.set("x", at::arange(24, at::kFloat).reshape({4, 3, 2}));
  td.set("nested", TensorDict({4, 3, 5}));
  td.set({"nested", "y"}, at::arange(60, at::kLong).reshape({4, 3, 5}));
  return td;
}

std::vector<int64_t> sizes(const at::Tensor& t) { return t.sizes().vec(); }
std::vector<int64_t> batch(const TensorDict& td) { return td.batch_size().vec(); }

TEST(TensorDictBatchTest, IntegerIndexDropsFirstBatchDim) {
  TensorDict td = make_batched();
  TensorDict row = td[1];
  EXPECT_THAT(batch(row), ElementsAre(3));
  EXPECT_TRUE(row.get("x").equal(td.get("x")[1]));
  EXPECT_THAT(batch(row.get_tensordict("nested")), ElementsAre(3, 5));
  EXPECT_TRUE(td[-1].get("x").equal(td.get("x")[3]));
  // Indexing returns views: writing through them reaches the original storage.
  row.get("x").fill_(-1);
  EXPECT_EQ(td.get("x")[1].sum().item<float>(), -6.0f);
}

TEST(TensorDictBatchTest, OutOfRangeIndexThrows) {
  TensorDict td = make_batched();
  EXPECT_EQ(error_of<std::out_of_range>([&] { td[4]; }),
            "TensorDict: index 4 is out of range for batch dim 0 of size 4");
  EXPECT_THROW(td[-5], std::out_of_range);
  EXPECT_EQ(error_of<std::out_of_range>([&] { td.index({0, 3}); }),
            "TensorDict.index: index 3 is out of range for batch dim 1 of size 3");
  EXPECT_EQ(error_of<std::out_of_range>([&] { TensorDict()[0]; }),
            "TensorDict: cannot index a TensorDict with batch_size []");
  EXPECT_EQ(error_of<std::out_of_range>([&] { td.index({0, 0, 0}); }),
            "TensorDict.index: 3 indices for batch_size [4, 3] (2 batch dims)");
  EXPECT_THROW(td.index({at::tensor({0, 7}, at::kLong)}), std::out_of_range);
}

TEST(TensorDictBatchTest, SlicesAndSteps) {
  TensorDict td = make_batched();
  TensorDict sliced = td.index({Slice(1, 3)});
  EXPECT_THAT(batch(sliced), ElementsAre(2, 3));
  EXPECT_TRUE(sliced.get("x").equal(td.get("x").slice(0, 1, 3)));
  TensorDict stepped = td.index({Slice(), Slice(None, None, 2)});
  EXPECT_THAT(batch(stepped), ElementsAre(4, 2));
  EXPECT_THAT(sizes(stepped.get({"nested", "y"})), ElementsAre(4, 2, 5));
  TensorDict mixed = td.index({-1, Slice(1)});
  EXPECT_THAT(batch(mixed), ElementsAre(2));
  EXPECT_TRUE(mixed.get("x").equal(td.get("x").index({-1, Slice(1)})));
}

TEST(TensorDictBatchTest, EmptySelectionGivesZeroSizedBatch) {
  TensorDict td = make_batched();
  TensorDict none = td.index({Slice(2, 2)});
  EXPECT_THAT(batch(none), ElementsAre(0, 3));
  EXPECT_THAT(sizes(none.get("x")), ElementsAre(0, 3, 2));
  TensorDict masked = td.index({at::zeros({4}, at::kBool)});
  EXPECT_THAT(batch(masked), ElementsAre(0, 3));
  EXPECT_EQ(masked.numel(), 0);
}

TEST(TensorDictBatchTest, BooleanMaskOverOneOrMoreBatchDims) {
  TensorDict td = make_batched();
  at::Tensor rows = at::tensor({1, 0, 1, 0}).to(at::kBool);
  TensorDict picked = td.index({rows});
  EXPECT_THAT(batch(picked), ElementsAre(2, 3));
  EXPECT_TRUE(picked.get("x").equal(td.get("x").index({rows})));

  at::Tensor cells = td.get("x").select(2, 0).remainder(4).eq(0);  // [4, 3]
  TensorDict flat = td.masked_select(cells);
  const int64_t count = cells.sum().item<int64_t>();
  EXPECT_THAT(batch(flat), ElementsAre(count));
  EXPECT_THAT(sizes(flat.get({"nested", "y"})), ElementsAre(count, 5));
  EXPECT_THAT(batch(flat.get_tensordict("nested")), ElementsAre(count, 5));

  EXPECT_EQ(error_of<std::out_of_range>([&] { td.index({at::ones({3}, at::kBool)}); }),
            "TensorDict.index: boolean mask of shape [3] does not match batch dims [4] starting at dim 0");
  EXPECT_THROW(td.masked_select(at::ones({4, 3})), std::invalid_argument);
}

TEST(TensorDictBatchTest, IndexTensorGathersRows) {
  TensorDict td = make_batched();
  TensorDict gathered = td.index({at::tensor({3, 0, 3}, at::kLong)});
  EXPECT_THAT(batch(gathered), ElementsAre(3, 3));
  EXPECT_TRUE(gathered.get("x")[0].equal(td.get("x")[3]));
  TensorDict grid = td.index({at::tensor({0, 1}, at::kLong), at::tensor({2, 2}, at::kLong)});
  EXPECT_THAT(batch(grid), ElementsAre(2));
  EXPECT_THAT(sizes(grid.get({"nested", "y"})), ElementsAre(2, 5));
}

TEST(TensorDictBatchTest, NoneAndEllipsisStayInBatchDims) {
  TensorDict td = make_batched();
  TensorDict expanded = td.index({None});
  EXPECT_THAT(batch(expanded), ElementsAre(1, 4, 3));
  EXPECT_THAT(sizes(expanded.get("x")), ElementsAre(1, 4, 3, 2));
  // Ellipsis spans the batch dims only: the last *batch* dim is indexed, not the feature dim.
  TensorDict last = td.index({Ellipsis, 0});
  EXPECT_THAT(batch(last), ElementsAre(4));
  EXPECT_THAT(sizes(last.get("x")), ElementsAre(4, 2));
  EXPECT_TRUE(last.get("x").equal(td.get("x").select(1, 0)));
  EXPECT_THAT(batch(td.index({Ellipsis})), ElementsAre(4, 3));
  EXPECT_THROW(td.index({Ellipsis, 0, Ellipsis}), std::invalid_argument);
}

TEST(TensorDictBatchTest, ZeroDimBatchHoldsAnyShape) {
  TensorDict td;
  td.set("scalar", at::tensor(1.0));
  td.set("vector", at::zeros({5}));
  EXPECT_EQ(td.numel(), 1);
  EXPECT_THAT(batch(td.unsqueeze(0)), ElementsAre(1));
  EXPECT_THAT(sizes(td.unsqueeze(0).get("vector")), ElementsAre(1, 5));
  EXPECT_THAT(batch(TensorDict::stack({td, td})), ElementsAre(2));
}

TEST(TensorDictBatchTest, UnsqueezeAndSqueeze) {
  TensorDict td = make_batched();
  TensorDict u = td.unsqueeze(-1);
  EXPECT_THAT(batch(u), ElementsAre(4, 3, 1));
  EXPECT_THAT(sizes(u.get("x")), ElementsAre(4, 3, 1, 2));
  EXPECT_THAT(batch(u.get_tensordict("nested")), ElementsAre(4, 3, 1, 5));
  EXPECT_THAT(batch(td.unsqueeze(0)), ElementsAre(1, 4, 3));
  EXPECT_THAT(batch(u.squeeze()), ElementsAre(4, 3));
  EXPECT_THAT(sizes(u.squeeze().get("x")), ElementsAre(4, 3, 2));
  EXPECT_THAT(batch(u.squeeze(2)), ElementsAre(4, 3));
  EXPECT_THAT(batch(u.squeeze(0)), ElementsAre(4, 3, 1));  // size 4: a no-op, as torch
  EXPECT_EQ(error_of<std::out_of_range>([&] { td.unsqueeze(3); }),
            "TensorDict.unsqueeze: dim 3 is out of range for 3 batch dims");
  // A feature dim of size 1 is not a batch dim and survives squeeze().
  TensorDict single({2, 1});
  single.set("f", at::zeros({2, 1, 1}));
  EXPECT_THAT(sizes(single.squeeze().get("f")), ElementsAre(2, 1));
}

TEST(TensorDictBatchTest, ReshapeAndView) {
  TensorDict td = make_batched();
  TensorDict flat = td.reshape({-1});
  EXPECT_THAT(batch(flat), ElementsAre(12));
  EXPECT_THAT(sizes(flat.get("x")), ElementsAre(12, 2));
  EXPECT_THAT(batch(flat.get_tensordict("nested")), ElementsAre(12, 5));
  TensorDict viewed = td.view({2, 6});
  EXPECT_THAT(sizes(viewed.get({"nested", "y"})), ElementsAre(2, 6, 5));
  EXPECT_EQ(viewed.get("x").data_ptr(), td.get("x").data_ptr());
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.reshape({5, -1}); }),
            "TensorDict.reshape: batch_size [4, 3] cannot be reshaped to [5, -1]");
  EXPECT_THROW(td.reshape({-1, -1}), std::invalid_argument);
  EXPECT_THROW(td.permute({1, 0}).view({12}), std::invalid_argument);  // not contiguous
}

TEST(TensorDictBatchTest, ExpandAddsLeadingDimsAndBroadcastsOnes) {
  TensorDict td({1, 3});
  td.set("x", at::arange(6, at::kFloat).reshape({1, 3, 2}));
  TensorDict e = td.expand({5, 4, 3});
  EXPECT_THAT(batch(e), ElementsAre(5, 4, 3));
  EXPECT_THAT(sizes(e.get("x")), ElementsAre(5, 4, 3, 2));
  EXPECT_THAT(batch(td.expand({2, -1})), ElementsAre(2, 3));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.expand({2, 4}); }),
            "TensorDict.expand: batch_size [1, 3] cannot be expanded to [2, 4]");
}

TEST(TensorDictBatchTest, PermuteMovesFeatureDimsAlong) {
  TensorDict td = make_batched();
  TensorDict p = td.permute({1, 0});
  EXPECT_THAT(batch(p), ElementsAre(3, 4));
  EXPECT_THAT(sizes(p.get("x")), ElementsAre(3, 4, 2));
  EXPECT_THAT(batch(p.get_tensordict("nested")), ElementsAre(3, 4, 5));
  EXPECT_TRUE(p.get("x")[2][1].equal(td.get("x")[1][2]));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.permute({0, 0}); }),
            "TensorDict.permute: [0, 0] is not a permutation of the 2 batch dims");
}

TEST(TensorDictBatchTest, UnbindAndSplit) {
  TensorDict td = make_batched();
  std::vector<TensorDict> rows = td.unbind(0);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_TRUE(rows[2].get("x").equal(td.get("x")[2]));
  std::vector<TensorDict> cols = td.unbind(-1);
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_THAT(batch(cols[0]), ElementsAre(4));
  EXPECT_THAT(batch(cols[0].get_tensordict("nested")), ElementsAre(4, 5));

  std::vector<TensorDict> parts = td.split(3);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_THAT(batch(parts[0]), ElementsAre(3, 3));
  EXPECT_THAT(batch(parts[1]), ElementsAre(1, 3));
  std::vector<TensorDict> uneven = td.split(std::vector<int64_t>{1, 2}, 1);
  EXPECT_THAT(batch(uneven[1]), ElementsAre(4, 2));
  EXPECT_TRUE(uneven[1].get("x").equal(td.get("x").narrow(1, 1, 2)));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.split(std::vector<int64_t>{1, 1}, 0); }),
            "TensorDict.split: sizes [1, 1] do not add up to batch dim 0 of size 4");
  EXPECT_THROW(td.split(0), std::invalid_argument);
  EXPECT_TRUE(TensorDict::cat(parts, 0).equal(td));
}

TEST(TensorDictBatchTest, StackAddsBatchDimAndRoundTripsWithUnbind) {
  TensorDict td = make_batched();
  std::vector<TensorDict> rows = td.unbind(0);
  TensorDict restacked = TensorDict::stack(rows, 0);
  EXPECT_TRUE(restacked.equal(td));
  EXPECT_THAT(batch(restacked.get_tensordict("nested")), ElementsAre(4, 3, 5));
  TensorDict last = TensorDict::stack({td, td}, -1);
  EXPECT_THAT(batch(last), ElementsAre(4, 3, 2));
  EXPECT_THAT(sizes(last.get("x")), ElementsAre(4, 3, 2, 2));
  EXPECT_THAT(batch(last.get_tensordict("nested")), ElementsAre(4, 3, 2, 5));
}

TEST(TensorDictBatchTest, StackAndCatRejectMismatchedInputs) {
  TensorDict a = make_batched();
  TensorDict missing = a.exclude({{"nested", "y"}});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { TensorDict::stack({a, missing}); }),
            "TensorDict.stack: key ('nested', 'y') is in tensordict 0 but not in tensordict 1");
  TensorDict extra = a.clone();
  extra.set("z", at::zeros({4, 3}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { TensorDict::stack({a, extra}); }),
            "TensorDict.stack: key 'z' is in tensordict 1 but not in tensordict 0");
  TensorDict wider = a.clone();
  wider.set("x", at::zeros({4, 3, 7}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { TensorDict::stack({a, wider}); }),
            "TensorDict.stack: key 'x' has shape [4, 3, 2] in tensordict 0 but [4, 3, 7] in tensordict 1");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { TensorDict::stack({a, a[0]}); }),
            "TensorDict.stack: tensordict 1 has batch_size [3] but tensordict 0 has [4, 3]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { TensorDict::stack({}); }),
            "TensorDict.stack: the list is empty");
  // cat allows a different size along its dim, and nothing else.
  TensorDict joined = TensorDict::cat({a, a.index({Slice(0, 1)})}, 0);
  EXPECT_THAT(batch(joined), ElementsAre(5, 3));
  EXPECT_THAT(batch(joined.get_tensordict("nested")), ElementsAre(5, 3, 5));
  EXPECT_THROW(TensorDict::cat({a, a.index({Slice(), Slice(0, 1)})}, 0), std::invalid_argument);
}

TEST(TensorDictBatchTest, StackKeepsCommonDeviceOnly) {
  const c10::Device meta(c10::kMeta);
  TensorDict a({2}, meta);
  a.set("x", at::zeros({2}));
  EXPECT_EQ(TensorDict::stack({a, a}).device(), meta);
  TensorDict b({2});
  b.set("x", at::zeros({2}, at::TensorOptions().device(meta)));
  EXPECT_FALSE(TensorDict::stack({a, b}).device().has_value());
}

TEST(TensorDictBatchTest, SetInPlaceThroughAnIndexedViewReachesTheOriginal) {
  // test_tensordict_indexing: td[0].set_ and td[:, 0].set_ write into td.
  TensorDict td({3, 4});
  td.set("key1", at::zeros({3, 4, 5}));
  at::Tensor x = at::randn({4, 5});
  td[0].set_("key1", x);
  EXPECT_TRUE(td.get("key1")[0].equal(x));
  at::Tensor y = at::randn({3, 5});
  td.index({Slice(), 0}).set_("key1", y);
  EXPECT_TRUE(td.get("key1").select(1, 0).equal(y));
  // Rebuilding from rows and from rows of rows gives the same TensorDict.
  std::vector<TensorDict> rows;
  for (int64_t i = 0; i < 3; ++i) rows.push_back(td[i]);
  EXPECT_TRUE(TensorDict::stack(rows).equal(td));
}

TEST(TensorDictBatchTest, IndexPutPreallocatesNestedBuffer) {
  // test_tensordict_prealloc_nested: writing steps into an empty buffer allocates its entries.
  constexpr int64_t N = 3, B = 5, T = 4;
  TensorDict buffer({B, N});
  TensorDict step({{"env.time", at::rand({N, 1})},
                   {"agent.obs", TensorDict({{"image", at::rand({N, T, 64})}, {"state", at::rand({N, T, 3, 8, 8})}},
                                            {N, T})}},
                  {N});
  buffer.index_put_({0}, step);
  buffer.index_put_({1}, step.clone());
  EXPECT_THAT(batch(buffer), ElementsAre(B, N));
  EXPECT_THAT(batch(buffer.get_tensordict("agent.obs")), ElementsAre(B, N, T));
  EXPECT_THAT(sizes(buffer.get({"agent.obs", "state"})), ElementsAre(B, N, T, 3, 8, 8));
  EXPECT_TRUE(buffer[1].get({"agent.obs", "image"}).equal(step.get({"agent.obs", "image"})));
  EXPECT_EQ(buffer[2].get("env.time").abs().sum().item<float>(), 0.0f);
}

TEST(TensorDictBatchTest, IndexPutFillsRowsAndMasks) {
  // test_filling_empty_tensordict: td[i] = other for each row.
  TensorDict td({16}, c10::Device(c10::kCPU));
  for (int64_t i = 0; i < 16; ++i) {
    TensorDict row({{"a", at::randn({10})}, {"b", at::ones({1})}}, {});
    td.index_put_({i}, row);
  }
  EXPECT_THAT(sizes(td.get("a")), ElementsAre(16, 10));
  EXPECT_TRUE(td.get("b").eq(1).all().item<bool>());

  at::Tensor mask = at::tensor({1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}).to(at::kBool);
  TensorDict three({{"b", at::full({3, 1}, 7.0)}}, {3});
  td.index_put_({mask}, three);
  EXPECT_EQ(td.get("b").sum().item<float>(), 13.0f + 21.0f);
  // dtype follows the destination.
  td.index_put_({Slice(0, 2)}, TensorDict({{"b", at::zeros({2, 1}, at::kDouble)}}, {2}));
  EXPECT_EQ(td.get("b").scalar_type(), at::kFloat);
}

TEST(TensorDictBatchTest, IndexPutChecksEverythingBeforeWriting) {
  TensorDict td = make_batched();
  TensorDict before = td.clone();
  TensorDict wrong_batch({{"x", at::zeros({2, 2})}}, {2});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.index_put_({0}, wrong_batch); }),
            "TensorDict.index_put_: the value has batch_size [2] but the indexed batch shape is [3]");
  TensorDict wrong_feature({{"new", at::ones({3})}, {"x", at::zeros({3, 7})}}, {3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.index_put_({0}, wrong_feature); }),
            "TensorDict.index_put_: key 'x' has shape [4, 3, 2] here, so the value's [3, 7] does not fit "
            "(expected [4, 3, 7])");
  EXPECT_FALSE(td.contains("new"));
  EXPECT_TRUE(td.equal(before));
  EXPECT_THROW(td.index_put_({7}, TensorDict({3})), std::out_of_range);
}

TEST(TensorDictBatchTest, Narrow) {
  TensorDict td = make_batched();
  TensorDict n = td.narrow(1, 1, 2);
  EXPECT_THAT(batch(n), ElementsAre(4, 2));
  EXPECT_TRUE(n.get("x").equal(td.get("x").narrow(1, 1, 2)));
  EXPECT_THAT(batch(td.narrow(0, -2, 2)), ElementsAre(2, 3));
  EXPECT_EQ(error_of<std::out_of_range>([&] { td.narrow(0, 3, 2); }),
            "TensorDict.narrow: start 3 and length 2 do not fit batch dim 0 of size 4");
}

TEST(TensorDictBatchTest, CatNamesKeyOfTensorsOnDifferentDevices) {
  TensorDict sub1({{"a", at::randn({2, 3})}}, {2});
  TensorDict sub2({{"a", at::randn({2, 3}, at::TensorOptions().device(c10::kMeta))}}, {2});
  TensorDict td1({{"sub", sub1}}, {2});
  TensorDict td2({{"sub", sub2}}, {2});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { TensorDict::cat({td1, td2}, 0); }),
            "TensorDict.cat: tensors on different devices at key ('sub', 'a'): cpu in tensordict 0, meta in "
            "tensordict 1");
}

}  // namespace
}  // namespace tdp
