// TensorDict: entries, nested keys, batch-size rules, exact error texts, atomic failures,
// copies, conversions and printing. Indexing and shape ops are in tensordict_batch_test.cc.
#include "sdk/tensordict/tensordict.h"
#include "tests/testing/error_of.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tdp {
namespace {

using ::testing::ElementsAre;
using ::tdp::test_util::error_of;
using ::testing::HasSubstr;

// Builds {"a": [3, 4], "nested": {"b": [3, 4, 5]}} with batch_size [3, 4].
TensorDict make_nested() {
  TensorDict td({{"a", at::arange(12, at::kFloat).reshape({3, 4})},
                 {{"nested", "b"}, at::ones({3, 4, 5})}},
                {3, 4});
  return td;
}

TEST(TensorDictTest, DefaultIsEmptyWithScalarBatch) {
  TensorDict td;
  EXPECT_TRUE(td.batch_size().empty());
  EXPECT_EQ(td.ndim(), 0);
  EXPECT_EQ(td.numel(), 1);
  EXPECT_FALSE(td.device().has_value());
  EXPECT_TRUE(td.is_empty());
  EXPECT_TRUE(td.keys().empty());
}

TEST(TensorDictTest, NegativeBatchSizeIsRejected) {
  EXPECT_THROW(TensorDict({2, -1}), std::invalid_argument);
}

TEST(TensorDictTest, SetAndGetRoundTrip) {
  TensorDict td({4});
  at::Tensor obs = at::randn({4, 17});
  td.set("obs", obs);
  EXPECT_TRUE(td.get("obs").is_same(obs));
  EXPECT_TRUE(td.contains("obs"));
  EXPECT_FALSE(td.contains("missing"));
  EXPECT_EQ(td.numel(), 4);
  EXPECT_EQ(td.shape(), at::IntArrayRef({4}));
}

TEST(TensorDictTest, SetOfAnRvalueTakesOverItsReference) {
  TensorDict td({4});
  at::Tensor obs = at::randn({4, 17});
  const at::Tensor alias = obs;  // a second reference, to count against
  td.set("obs", std::move(obs));
  EXPECT_FALSE(obs.defined());  // NOLINT(bugprone-use-after-move): what a move leaves is the point
  EXPECT_TRUE(td.get("obs").is_same(alias));
  EXPECT_EQ(alias.use_count(), 2);  // alias and the entry: no copy left behind
  // Replacing the entry drops the TensorDict's reference.
  td.set("obs", at::zeros({4, 17}));
  EXPECT_EQ(alias.use_count(), 1);
  // A refused rvalue write changes nothing, as a refused copy does.
  at::Tensor wrong = at::zeros({3});
  EXPECT_THROW(td.set("other", std::move(wrong)), std::invalid_argument);
  EXPECT_FALSE(td.contains("other"));
}

TEST(TensorDictTest, OverwritingAnEntryChecksTheValueAsAFirstWriteDoes) {
  TensorDict td({2});
  const at::Tensor x = at::zeros({2, 3});
  td.set("x", x);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.set("x", at::zeros({3})); }),
            "TensorDict.set: key 'x' has shape [3], whose leading dims do not match batch_size [2]");
  EXPECT_THROW(td.set("x", at::Tensor()), std::invalid_argument);
  EXPECT_TRUE(td.get("x").is_same(x));  // refused writes left the entry as it was
  const at::Tensor y = at::ones({2, 5});
  td.set("x", y);
  EXPECT_TRUE(td.get("x").is_same(y));
  // A tensor over a nested TensorDict replaces it.
  td.set({"sub", "a"}, at::zeros({2}));
  td.set("sub", y);
  EXPECT_FALSE(td.is_tensordict("sub"));
  EXPECT_TRUE(td.get("sub").is_same(y));
  // A TensorDict with a device moves an overwriting tensor there too.
  TensorDict placed({2}, c10::Device(c10::kMeta));
  placed.set("x", at::zeros({2}));
  placed.set("x", at::ones({2}));
  EXPECT_EQ(placed.get("x").device(), c10::Device(c10::kMeta));
}

TEST(TensorDictTest, NamesOfEveryLengthThatDifferInOneLetterAreTwoEntries) {
  // Names are compared a word at a time; each length class must still see every letter.
  TensorDict td({1});
  const std::vector<std::string> stems = {"a", "abc", "abcd", "abcdefg", "abcdefgh", "sample_log_pro",
                                          "sample_log_prob", "abcdefghijklmnop", "a_name_longer_than_sixteen"};
  int64_t value = 0;
  for (const std::string& stem : stems) {
    for (const std::string& name : {stem + "x", stem + "y", "x" + stem, "y" + stem}) {
      td.set(name, at::full({1}, value++));
    }
  }
  value = 0;
  for (const std::string& stem : stems) {
    for (const std::string& name : {stem + "x", stem + "y", "x" + stem, "y" + stem}) {
      EXPECT_EQ(td.get(name).item<int64_t>(), value++) << name;
    }
  }
  EXPECT_FALSE(td.contains("abcdefghx_"));
  EXPECT_FALSE(td.contains("sample_log_proz"));
}

TEST(TensorDictTest, SetWithWrongLeadingDimsThrowsNamingKeyAndShapes) {
  TensorDict td({4});
  std::string message = error_of<std::invalid_argument>([&] { td.set("obs", at::zeros({3, 17})); });
  EXPECT_EQ(message,
            "TensorDict.set: key 'obs' has shape [3, 17], whose leading dims do not match batch_size [4]");
  message = error_of<std::invalid_argument>([&] { TensorDict({2, 3}).set({"x", "y"}, at::zeros({2})); });
  EXPECT_EQ(message,
            "TensorDict.set: key ('x', 'y') has shape [2], whose leading dims do not match batch_size [2, 3]");
  EXPECT_FALSE(td.contains("obs"));
}

TEST(TensorDictTest, SetUndefinedTensorThrows) {
  TensorDict td({2});
  EXPECT_THROW(td.set("x", at::Tensor()), std::invalid_argument);
}

TEST(TensorDictTest, NestedSetCreatesIntermediateTensorDicts) {
  TensorDict td({3});
  td.set({"next", "obs", "pixels"}, at::zeros({3, 8}));
  ASSERT_TRUE(td.is_tensordict("next"));
  ASSERT_TRUE(td.is_tensordict({"next", "obs"}));
  EXPECT_EQ(td.get_tensordict({"next", "obs"}).batch_size(), at::IntArrayRef({3}));
  EXPECT_EQ(td.get({"next", "obs", "pixels"}).sizes(), at::IntArrayRef({3, 8}));
}

TEST(TensorDictTest, FailedNestedSetLeavesTensorDictUnchanged) {
  TensorDict td = make_nested();
  const std::string before = td.to_string();
  EXPECT_THROW(td.set({"new", "deep", "x"}, at::zeros({2, 4})), std::invalid_argument);
  EXPECT_THROW(td.set({"nested", "c"}, at::zeros({3, 5})), std::invalid_argument);
  EXPECT_FALSE(td.contains("new"));
  EXPECT_FALSE(td.contains({"nested", "c"}));
  EXPECT_EQ(td.to_string(), before);
}

TEST(TensorDictTest, SetThroughTensorThrows) {
  TensorDict td = make_nested();
  std::string message = error_of<std::invalid_argument>([&] { td.set({"a", "b"}, at::zeros({3, 4})); });
  EXPECT_EQ(message, "TensorDict.set: cannot write ('a', 'b'): 'a' is a tensor, not a TensorDict");
}

TEST(TensorDictTest, NestedTensorDictBatchMustStartWithParents) {
  TensorDict td({3});
  td.set("sub", TensorDict({3, 2}));
  EXPECT_EQ(td.get_tensordict("sub").batch_size(), at::IntArrayRef({3, 2}));
  std::string message = error_of<std::invalid_argument>([&] { td.set("bad", TensorDict({2})); });
  EXPECT_EQ(message,
            "TensorDict.set: key 'bad' is a TensorDict with batch_size [2], which does not start with "
            "batch_size [3]");
  // Entries of the nested TensorDict are checked against its own, longer batch_size.
  EXPECT_THROW(td.get_tensordict("sub").set("x", at::zeros({3, 5})), std::invalid_argument);
  td.get_tensordict("sub").set("x", at::zeros({3, 2, 5}));
  EXPECT_TRUE(td.contains({"sub", "x"}));
}

TEST(TensorDictTest, TensorDictCannotContainItself) {
  TensorDict td({2});
  EXPECT_THROW(td.set("self", td), std::invalid_argument);
}

TEST(TensorDictTest, MissingKeyThrowsKeyErrorListingKeys) {
  TensorDict td = make_nested();
  EXPECT_EQ(error_of<KeyError>([&] { td.get("c"); }),
            "key 'c' not found in TensorDict with keys ['a', 'nested']");
  EXPECT_EQ(error_of<KeyError>([&] { td.get({"nested", "c"}); }),
            "key ('nested', 'c') not found in TensorDict with keys [('nested', 'b')]");
  EXPECT_EQ(error_of<KeyError>([&] { td.get({"a", "x"}); }),
            "key ('a', 'x') not found: 'a' is a tensor, not a TensorDict");
  EXPECT_THROW(td.get(NestedKey()), KeyError);
  // KeyError is an out_of_range, so generic handlers catch it too.
  EXPECT_THROW(td.get("c"), std::out_of_range);
}

TEST(TensorDictTest, GetWithDefault) {
  TensorDict td = make_nested();
  at::Tensor fallback = at::zeros({1});
  EXPECT_TRUE(td.get("missing", fallback).is_same(fallback));
  EXPECT_TRUE(td.get({"nested", "missing"}, fallback).is_same(fallback));
  EXPECT_FALSE(td.get("missing", at::Tensor()).defined());
  EXPECT_TRUE(td.get("a", fallback).is_same(td.get("a")));
}

TEST(TensorDictTest, GetOfNestedTensorDictAsTensorThrows) {
  TensorDict td = make_nested();
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.get("nested"); }),
            "TensorDict.get: key 'nested' holds a TensorDict; use get_tensordict()");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.get_tensordict("a"); }),
            "TensorDict.get_tensordict: key 'a' holds a tensor, not a TensorDict");
  EXPECT_TRUE(td.get_entry("nested").is_tensordict());
  EXPECT_TRUE(td.get_entry("a").is_tensor());
  EXPECT_THROW(td.get_entry("a").tensordict(), std::invalid_argument);
  EXPECT_THROW(td.get_entry("nested").tensor(), std::invalid_argument);
}

TEST(TensorDictTest, HandlesShareEntriesLikeTensors) {
  TensorDict td = make_nested();
  TensorDict alias = td;
  alias.set("z", at::zeros({3, 4}));
  EXPECT_TRUE(td.contains("z"));
  EXPECT_TRUE(td.is_same(alias));
  // A nested TensorDict taken out writes through to its parent.
  td.get_tensordict("nested").set("c", at::zeros({3, 4, 1}));
  EXPECT_TRUE(td.contains({"nested", "c"}));
}

TEST(TensorDictTest, SetInPlaceCopiesIntoExistingStorage) {
  TensorDict td = make_nested();
  at::Tensor original = td.get("a");
  td.set_("a", at::full({3, 4}, 7.0));
  EXPECT_TRUE(td.get("a").is_same(original));
  EXPECT_TRUE(original.eq(7).all().item<bool>());
  td.set_("a", at::full({4}, 1.0));  // broadcasts as copy_
  EXPECT_TRUE(original.eq(1).all().item<bool>());
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.set_("a", at::zeros({2, 4})); }),
            "TensorDict.set_: key 'a' holds shape [3, 4], which a value of shape [2, 4] cannot fill");
  EXPECT_THROW(td.set_("missing", at::zeros({3, 4})), KeyError);
}

TEST(TensorDictTest, UpdateMergesNestedEntries) {
  TensorDict td = make_nested();
  TensorDict other({3, 4});
  other.set({"nested", "c"}, at::zeros({3, 4, 2}));
  other.set("d", at::zeros({3, 4}));
  td.update(other);
  EXPECT_TRUE(td.contains({"nested", "b"}));
  EXPECT_TRUE(td.contains({"nested", "c"}));
  EXPECT_TRUE(td.contains("d"));
}

TEST(TensorDictTest, UpdateFromListAndInPlace) {
  TensorDict td = make_nested();
  at::Tensor a = td.get("a");
  td.update({{"a", at::zeros({3, 4})}, {{"x", "y"}, at::ones({3, 4})}}, /*inplace=*/true);
  EXPECT_TRUE(td.get("a").is_same(a));
  EXPECT_EQ(a.sum().item<float>(), 0.0f);
  EXPECT_TRUE(td.contains({"x", "y"}));
  td.update({{"a", at::ones({3, 4})}});
  EXPECT_FALSE(td.get("a").is_same(a));
}

TEST(TensorDictTest, FailedUpdateWritesNothing) {
  TensorDict td = make_nested();
  td.set("sub", TensorDict({3, 4, 2}));
  const TensorDict snapshot = td.clone();
  const std::string before = td.to_string();

  // The in-place copy into "a" would succeed on its own; the later "z" does not fit.
  EXPECT_THROW(td.update({{"a", at::full({3, 4}, 5.0)}, {"z", at::zeros({2})}}, /*inplace=*/true),
               std::invalid_argument);
  EXPECT_THROW(td.update({{"ok", at::zeros({3, 4})}, {"late", at::zeros({3})}}), std::invalid_argument);

  // "new" comes first and fits; ('sub', 'x') has batch [3, 4] but td's "sub" needs [3, 4, 2].
  TensorDict other({3, 4});
  other.set("new", at::zeros({3, 4}));
  other.set({"sub", "x"}, at::zeros({3, 4}));
  EXPECT_THROW(td.update(other), std::invalid_argument);

  EXPECT_EQ(td.to_string(), before);
  EXPECT_TRUE(td.equal(snapshot));
}

TEST(TensorDictTest, EraseAndPop) {
  TensorDict td = make_nested();
  at::Tensor b = td.pop({"nested", "b"});
  EXPECT_EQ(b.sizes(), at::IntArrayRef({3, 4, 5}));
  EXPECT_FALSE(td.contains({"nested", "b"}));
  EXPECT_TRUE(td.contains("nested"));
  td.erase("nested");
  EXPECT_THAT(td.keys(), ElementsAre(NestedKey("a")));
  EXPECT_EQ(error_of<KeyError>([&] { td.erase("nested"); }),
            "key 'nested' not found in TensorDict with keys ['a']");
}

TEST(TensorDictTest, RenameKeyKeepsPositionAndChecksSafe) {
  TensorDict td = make_nested();
  td.set("c", at::zeros({3, 4}));
  td.rename_key("a", "z");
  EXPECT_THAT(td.keys(), ElementsAre(NestedKey("z"), NestedKey("nested"), NestedKey("c")));
  td.rename_key("z", {"nested", "z"});
  EXPECT_TRUE(td.contains({"nested", "z"}));
  EXPECT_FALSE(td.contains("z"));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { td.rename_key("c", {"nested", "b"}, /*safe=*/true); }),
            "TensorDict.rename_key: key ('nested', 'b') already exists and safe=true");
  td.rename_key("c", {"nested", "b"});
  EXPECT_EQ(td.get({"nested", "b"}).sizes(), at::IntArrayRef({3, 4}));
  EXPECT_THROW(td.rename_key("missing", "x"), KeyError);
}

TEST(TensorDictTest, KeysValuesItemsWithNestedAndLeavesOnly) {
  TensorDict td = make_nested();
  td.set({"nested", "deeper", "c"}, at::zeros({3, 4}));
  EXPECT_THAT(td.keys(), ElementsAre(NestedKey("a"), NestedKey("nested")));
  EXPECT_THAT(td.keys(true),
              ElementsAre(NestedKey("a"), NestedKey("nested"), NestedKey({"nested", "b"}),
                          NestedKey({"nested", "deeper"}), NestedKey({"nested", "deeper", "c"})));
  EXPECT_THAT(td.keys(true, true),
              ElementsAre(NestedKey("a"), NestedKey({"nested", "b"}), NestedKey({"nested", "deeper", "c"})));
  EXPECT_THAT(td.keys(false, true), ElementsAre(NestedKey("a")));
  auto values = td.values(true, true);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_TRUE(values[1].tensor().is_same(td.get({"nested", "b"})));
  auto items = td.items(false, false);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_TRUE(items[1].second.is_tensordict());
}

TEST(TensorDictTest, IsEmptyIgnoresEmptyNestedTensorDicts) {
  TensorDict td({2});
  td.set("sub", TensorDict({2}));
  EXPECT_TRUE(td.is_empty());
  td.set({"sub", "x"}, at::zeros({2}));
  EXPECT_FALSE(td.is_empty());
}

TEST(TensorDictTest, SelectAndExcludeNestedKeys) {
  TensorDict td = make_nested();
  td.set({"nested", "c"}, at::zeros({3, 4}));
  TensorDict selected = td.select({{"nested", "b"}});
  EXPECT_THAT(selected.keys(true), ElementsAre(NestedKey("nested"), NestedKey({"nested", "b"})));
  EXPECT_TRUE(selected.get({"nested", "b"}).is_same(td.get({"nested", "b"})));
  EXPECT_FALSE(selected.get_tensordict("nested").is_same(td.get_tensordict("nested")));
  EXPECT_EQ(error_of<KeyError>([&] { td.select({"a", "zz"}); }),
            "TensorDict.select: key 'zz' not found in TensorDict with keys ['a', 'nested']");
  TensorDict lenient = td.select({"a", "zz"}, /*strict=*/false);
  EXPECT_THAT(lenient.keys(), ElementsAre(NestedKey("a")));
  TensorDict whole = td.select({"nested"});
  EXPECT_THAT(whole.keys(true, true), ElementsAre(NestedKey({"nested", "b"}), NestedKey({"nested", "c"})));

  TensorDict excluded = td.exclude({{"nested", "b"}, "missing"});
  EXPECT_THAT(excluded.keys(true, true), ElementsAre(NestedKey("a"), NestedKey({"nested", "c"})));
  EXPECT_TRUE(td.contains({"nested", "b"}));  // the original keeps it
}

TEST(TensorDictTest, SelectKeepsNestedBatchSize) {
  TensorDict td({2});
  td.set("sub", TensorDict({2, 3}));
  td.set({"sub", "x"}, at::zeros({2, 3}));
  TensorDict selected = td.select({{"sub", "x"}});
  EXPECT_EQ(selected.get_tensordict("sub").batch_size(), at::IntArrayRef({2, 3}));
}

TEST(TensorDictTest, CloneDeepAndShallow) {
  TensorDict td = make_nested();
  TensorDict deep = td.clone();
  TensorDict shallow = td.clone(/*deep=*/false);
  EXPECT_TRUE(deep.equal(td));
  EXPECT_FALSE(deep.get("a").is_same(td.get("a")));
  EXPECT_NE(deep.get("a").data_ptr(), td.get("a").data_ptr());
  EXPECT_TRUE(shallow.get("a").is_same(td.get("a")));
  shallow.set("new", at::zeros({3, 4}));
  shallow.get_tensordict("nested").set("new", at::zeros({3, 4}));
  EXPECT_FALSE(td.contains("new"));
  EXPECT_FALSE(td.contains({"nested", "new"}));
}

TEST(TensorDictTest, EmptyKeepsBatchAndDevice) {
  TensorDict td = make_nested();
  TensorDict empty = td.empty();
  EXPECT_TRUE(empty.keys().empty());
  EXPECT_EQ(empty.batch_size(), td.batch_size());
  TensorDict recursed = td.empty(/*recurse=*/true);
  EXPECT_THAT(recursed.keys(true), ElementsAre(NestedKey("nested")));
  TensorDict on_meta = TensorDict({2}, c10::Device(c10::kMeta)).empty();
  EXPECT_EQ(on_meta.device(), c10::Device(c10::kMeta));
}

TEST(TensorDictTest, DetachDropsGradHistory) {
  TensorDict td({2});
  td.set("w", at::ones({2}).requires_grad_() * 2);
  EXPECT_TRUE(td.get("w").requires_grad());
  EXPECT_FALSE(td.detach().get("w").requires_grad());
}

TEST(TensorDictTest, ToDtypeCastsEveryLeaf) {
  TensorDict td = make_nested().to(at::kDouble);
  EXPECT_EQ(td.get("a").scalar_type(), at::kDouble);
  EXPECT_EQ(td.get({"nested", "b"}).scalar_type(), at::kDouble);
}

TEST(TensorDictTest, DeviceMovesTensorsOnSetAndTo) {
  // The meta device stands in for an accelerator: it changes placement without memory.
  const c10::Device meta(c10::kMeta);
  TensorDict td({2}, meta);
  td.set("x", at::zeros({2, 3}));
  td.set({"sub", "y"}, at::zeros({2}));
  EXPECT_EQ(td.get("x").device(), meta);
  EXPECT_EQ(td.get({"sub", "y"}).device(), meta);
  EXPECT_EQ(td.get_tensordict("sub").device(), meta);

  TensorDict cpu = make_nested();
  TensorDict moved = cpu.to(meta);
  EXPECT_EQ(moved.device(), meta);
  EXPECT_EQ(moved.get({"nested", "b"}).device(), meta);
  EXPECT_EQ(moved.get_tensordict("nested").device(), meta);
  EXPECT_EQ(cpu.get("a").device(), c10::Device(c10::kCPU));

  TensorDict holder({3, 4}, meta);
  holder.set("sub", make_nested());
  EXPECT_EQ(holder.get({"sub", "a"}).device(), meta);
}

TEST(TensorDictTest, ApplyAndNamedApply) {
  TensorDict td = make_nested();
  TensorDict doubled = td.apply([](const at::Tensor& t) { return t * 2; });
  EXPECT_TRUE(doubled.get("a").equal(td.get("a") * 2));
  EXPECT_TRUE(doubled.get({"nested", "b"}).equal(td.get({"nested", "b"}) * 2));

  TensorDict filtered = td.named_apply([](const NestedKey& key, const at::Tensor& t) {
    return key == NestedKey("a") ? at::Tensor() : t;
  });
  EXPECT_THAT(filtered.keys(true, true), ElementsAre(NestedKey({"nested", "b"})));

  TensorDict summed = td.apply([](const at::Tensor& t) { return t.sum(1); }, std::vector<int64_t>{3});
  EXPECT_EQ(summed.batch_size(), at::IntArrayRef({3}));
  EXPECT_EQ(summed.get({"nested", "b"}).sizes(), at::IntArrayRef({3, 5}));
  EXPECT_EQ(summed.get_tensordict("nested").batch_size(), at::IntArrayRef({3}));

  EXPECT_THROW(td.apply([](const at::Tensor& t) { return t.sum(0); }), std::invalid_argument);
}

TEST(TensorDictTest, FlattenAndUnflattenKeys) {
  TensorDict td = make_nested();
  td.set({"nested", "deep", "c"}, at::zeros({3, 4}));
  TensorDict flat = td.flatten_keys();
  EXPECT_THAT(flat.keys(true), ElementsAre(NestedKey("a"), NestedKey("nested.b"), NestedKey("nested.deep.c")));
  EXPECT_TRUE(flat.get("nested.b").is_same(td.get({"nested", "b"})));
  EXPECT_THAT(td.flatten_keys("_").keys(), ElementsAre(NestedKey("a"), NestedKey("nested_b"), NestedKey("nested_deep_c")));
  TensorDict back = flat.unflatten_keys();
  EXPECT_TRUE(back.equal(td));
  EXPECT_THAT(back.keys(true, true), ElementsAre(NestedKey("a"), NestedKey({"nested", "b"}),
                                                 NestedKey({"nested", "deep", "c"})));

  TensorDict collide({2});
  collide.set("a.b", at::zeros({2}));
  collide.set({"a", "b"}, at::ones({2}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { collide.flatten_keys(); }),
            "TensorDict.flatten_keys: key ('a', 'b') flattens to 'a.b', which already exists");
}

TEST(TensorDictTest, SetBatchSizeValidatesFirst) {
  TensorDict td = make_nested();
  td.set_batch_size({3});
  EXPECT_EQ(td.batch_size(), at::IntArrayRef({3}));
  EXPECT_THROW(td.set_batch_size({3, 4, 5}), std::invalid_argument);
  EXPECT_EQ(td.batch_size(), at::IntArrayRef({3}));
  td.set_batch_size({});
  EXPECT_EQ(td.ndim(), 0);
}

TEST(TensorDictTest, EqualAndAllclose) {
  TensorDict td = make_nested();
  TensorDict same = td.clone();
  EXPECT_TRUE(td.equal(same));
  same.set_({"nested", "b"}, at::full({3, 4, 5}, 1.0 + 1e-7));
  EXPECT_FALSE(td.equal(same));
  EXPECT_TRUE(td.allclose(same));
  EXPECT_FALSE(td.allclose(same, 0.0, 0.0));
  same.set("extra", at::zeros({3, 4}));
  EXPECT_FALSE(td.allclose(same));
  TensorDict other_batch = td.clone();
  other_batch.set_batch_size({3});
  EXPECT_FALSE(td.equal(other_batch));
}

TEST(TensorDictTest, PrintsLikePythonRepr) {
  TensorDict td = make_nested();
  td.set("done", at::zeros({3, 4, 1}, at::kBool));
  EXPECT_EQ(td.to_string(),
            "TensorDict(\n"
            "    fields={\n"
            "        a: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32),\n"
            "        nested: TensorDict(\n"
            "            fields={\n"
            "                b: Tensor(shape=torch.Size([3, 4, 5]), device=cpu, dtype=torch.float32)},\n"
            "            batch_size=torch.Size([3, 4]),\n"
            "            device=None),\n"
            "        done: Tensor(shape=torch.Size([3, 4, 1]), device=cpu, dtype=torch.bool)},\n"
            "    batch_size=torch.Size([3, 4]),\n"
            "    device=None)");
  EXPECT_EQ(TensorDict({}, c10::Device(c10::kMeta)).to_string(),
            "TensorDict(\n    fields={},\n    batch_size=torch.Size([]),\n    device=meta)");
}

TEST(TensorDictTest, SetNestedTensorDictReplacesIt) {
  // test_setitem_nested: a nested TensorDict is stored by handle and can be replaced.
  TensorDict td({4});
  TensorDict sub({4, 5});
  TensorDict inner({{"c", at::randn({4, 5, 6, 7})}}, {4, 5, 6});
  TensorDict inner2({{"c", at::ones({4, 5, 6, 7})}}, {4, 5, 6});
  sub.set("b", inner);
  td.set("a", sub);
  EXPECT_TRUE(td.get_tensordict({"a", "b"}).is_same(inner));
  td.set({"a", "b"}, inner2);
  EXPECT_TRUE(td.get_tensordict({"a", "b"}).is_same(inner2));
  EXPECT_TRUE(td.get({"a", "b", "c"}).eq(1).all().item<bool>());
}

TEST(TensorDictTest, SetdefaultReturnsExistingOrSetsDefault) {
  TensorDict td({4});
  at::Tensor existing = at::randn({4, 5});
  at::Tensor fallback = at::ones({4, 5});
  td.set({"a", "b", "c"}, existing);
  EXPECT_TRUE(td.setdefault({"a", "b", "c"}, fallback).is_same(existing));
  EXPECT_TRUE(td.setdefault({"a", "b", "d"}, fallback).is_same(fallback));
  EXPECT_TRUE(td.get({"a", "b", "d"}).is_same(fallback));
  EXPECT_THROW(td.setdefault("bad", at::ones({3})), std::invalid_argument);
}

}  // namespace
}  // namespace tdp
