// NestedKey: flattening, Python-style printing, hashing and ordering.
#include "sdk/tensordict/nested_key.h"

#include <absl/container/flat_hash_set.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <unordered_set>

namespace tdp {
namespace {

TEST(NestedKeyTest, StringConvertsToSingleElementPath) {
  NestedKey key = "obs";
  EXPECT_EQ(key.path(), std::vector<std::string>({"obs"}));
  EXPECT_FALSE(key.is_nested());
  EXPECT_EQ(key.leaf(), "obs");
  EXPECT_TRUE(key.parent().empty());
}

TEST(NestedKeyTest, NestedPathsFlatten) {
  NestedKey flat = {"a", "b", "c"};
  NestedKey nested = {"a", {"b", "c"}};
  NestedKey from_key = {NestedKey{"a", "b"}, "c"};
  EXPECT_EQ(nested, flat);
  EXPECT_EQ(from_key, flat);
  EXPECT_EQ(NestedKey({"a"}), NestedKey("a"));
  EXPECT_EQ((NestedKey{"a", "b"} + "c"), flat);
}

TEST(NestedKeyTest, PrintsLikePythonKeys) {
  EXPECT_EQ(NestedKey("a").to_string(), "'a'");
  EXPECT_EQ(NestedKey({"next", "obs"}).to_string(), "('next', 'obs')");
  EXPECT_EQ(NestedKey("it's").to_string(), "'it\\'s'");
  std::ostringstream out;
  out << NestedKey({"a", "b"});
  EXPECT_EQ(out.str(), "('a', 'b')");
  EXPECT_EQ(keys_to_string({"a", {"b", "c"}}), "['a', ('b', 'c')]");
  EXPECT_EQ(keys_to_string({}), "[]");
}

TEST(NestedKeyTest, JoinParentAndPrefix) {
  NestedKey key = {"a", "b", "c"};
  EXPECT_EQ(key.join("."), "a.b.c");
  EXPECT_EQ(key.join("_"), "a_b_c");
  EXPECT_EQ(key.parent(), NestedKey({"a", "b"}));
  EXPECT_TRUE(key.starts_with({"a", "b"}));
  EXPECT_TRUE(key.starts_with(key));
  EXPECT_FALSE(key.starts_with({"a", "c"}));
  EXPECT_FALSE(NestedKey("a").starts_with(key));
}

TEST(NestedKeyTest, HashableAndOrdered) {
  std::unordered_set<NestedKey> std_set = {"a", {"a", "b"}, {"a", "b"}};
  EXPECT_EQ(std_set.size(), 2u);
  absl::flat_hash_set<NestedKey> absl_set = {"a", {"a", "b"}, "a"};
  EXPECT_EQ(absl_set.size(), 2u);
  EXPECT_TRUE(absl_set.contains(NestedKey({"a", "b"})));
  std::map<NestedKey, int> ordered = {{"b", 1}, {{"a", "z"}, 2}, {"a", 3}};
  std::vector<NestedKey> order;
  for (const auto& [key, value] : ordered) order.push_back(key);
  EXPECT_EQ(order, (std::vector<NestedKey>{"a", {"a", "z"}, "b"}));
  EXPECT_LT(NestedKey("a"), NestedKey({"a", "b"}));
  EXPECT_NE(NestedKey("a"), NestedKey({"a", "b"}));
}

}  // namespace
}  // namespace tdp
