// CompositeDistribution against tensordict.nn.CompositeDistribution, at float32 and float64, as
// written by tests/golden/make_distribution_golden.py: a Normal written elsewhere by name_map, a
// nested Categorical, a OneHotCategorical and a bounded TanhNormal, batch shape [3], scored on a
// sample of batch shape [2, 3]. Each TensorDict the reference produced is stored one leaf per
// record, keyed by its flattened key ("agent.action_log_prob"), so the key names the C++ writes
// are checked against tensordict's as well as the values.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "sdk/distributions/composite_distribution.h"
#include "sdk/distributions/composite_lp_aggregate.h"
#include "tests/distributions/golden.h"
#include "tests/testing/random.h"

namespace tdp::dist {
namespace {

using testing::Golden;
using testing::TensorsClose;
using test_util::seeded;

NestedKey unflatten(const std::string& flat) {
  return NestedKey(std::vector<std::string>(absl::StrSplit(flat, '.')));
}

// The TensorDict whose leaves are the records under `prefix`.
TensorDict from_records(const std::string& prefix, std::vector<int64_t> batch_size) {
  std::vector<std::pair<NestedKey, Entry>> entries;
  for (const auto& [key, tensor] : Golden::get().with_prefix(prefix)) {
    entries.emplace_back(unflatten(key), tensor);
  }
  if (entries.empty()) throw std::out_of_range("no golden records under " + prefix);
  return TensorDict(entries, std::move(batch_size));
}

// Same leaf keys as the records under `prefix`, each leaf close to its record.
::testing::AssertionResult MatchesRecords(const TensorDict& actual, const std::string& prefix) {
  const std::map<std::string, at::Tensor> expected = Golden::get().with_prefix(prefix);
  if (expected.empty()) {
    return ::testing::AssertionFailure() << "no golden records under " << prefix;
  }
  std::map<std::string, at::Tensor> leaves;
  for (const NestedKey& key : actual.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    leaves.emplace(key.join("."), actual.get(key));
  }
  std::vector<std::string> actual_keys, expected_keys;
  for (const auto& item : leaves) actual_keys.push_back(item.first);
  for (const auto& item : expected) expected_keys.push_back(item.first);
  if (actual_keys != expected_keys) {
    return ::testing::AssertionFailure()
           << prefix << ": keys [" << absl::StrJoin(actual_keys, ", ") << "] vs tensordict's ["
           << absl::StrJoin(expected_keys, ", ") << "]";
  }
  for (const auto& [key, tensor] : expected) {
    ::testing::AssertionResult close = TensorsClose(leaves.at(key), tensor);
    if (!close) return ::testing::AssertionFailure() << prefix << key << ": " << close.message();
  }
  return ::testing::AssertionSuccess();
}

class CompositeGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string prefix(const std::string& what) const {
    return "composite/" + GetParam() + "/" + what + "/";
  }
  at::Tensor g(const std::string& field) const {
    return Golden::get().at("composite", GetParam(), field);
  }
  TensorDict params() const { return from_records(prefix("params"), {3}); }
  TensorDict sample() const { return from_records(prefix("sample"), {2, 3}); }

  // The reference's distribution_map and name_map; `with_tanh_normal` false drops the
  // TanhNormal part (its entropy has no closed form, so the reference's entropy records come
  // from the other three parts).
  CompositeDistribution make(bool with_tanh_normal = true) const {
    std::vector<std::pair<NestedKey, DistributionBuilder>> parts = {
        {"cont", "normal"},
        {{"nested", "disc"}, "categorical"},
        {"onehot", "one_hot_categorical"}};
    TensorDict p = params();
    if (with_tanh_normal) {
      parts.emplace_back("squashed", "tanh_normal");
    } else {
      p = p.exclude({"squashed"});
    }
    return CompositeDistribution(
        p, parts, CompositeDistributionOptions().name_map({{"cont", {"agent", "action"}}}));
  }
};

TEST_P(CompositeGoldenTest, LogProbPerPart) {
  CompositeDistribution dist = make();
  CompositeLpAggregateGuard per_part(false);
  auto lp = dist.log_prob(sample());
  ASSERT_TRUE(std::holds_alternative<TensorDict>(lp));
  EXPECT_TRUE(MatchesRecords(std::get<TensorDict>(lp), prefix("log_prob")));
  EXPECT_TRUE(MatchesRecords(dist.log_prob_composite(sample(), /*include_sum=*/true),
                             prefix("log_prob_composite_sum")));
}

TEST_P(CompositeGoldenTest, LogProbAggregated) {
  CompositeDistribution dist = make();
  CompositeLpAggregateGuard aggregate(true);
  auto lp = dist.log_prob(sample());
  ASSERT_TRUE(std::holds_alternative<at::Tensor>(lp));
  EXPECT_TRUE(TensorsClose(std::get<at::Tensor>(lp), g("log_prob_aggregate")));
  // Aggregating, log_prob_composite writes into the sample it is given and returns it.
  TensorDict s = sample();
  TensorDict written = dist.log_prob_composite(s);
  EXPECT_TRUE(written.is_same(s));
  EXPECT_TRUE(MatchesRecords(written, prefix("log_prob_composite_aggregate")));
}

TEST_P(CompositeGoldenTest, Entropy) {
  CompositeDistribution dist = make(/*with_tanh_normal=*/false);
  {
    CompositeLpAggregateGuard per_part(false);
    auto e = dist.entropy();
    ASSERT_TRUE(std::holds_alternative<TensorDict>(e));
    EXPECT_TRUE(MatchesRecords(std::get<TensorDict>(e), prefix("entropy")));
    EXPECT_TRUE(MatchesRecords(dist.entropy_composite(1, /*include_sum=*/true),
                               prefix("entropy_composite_sum")));
  }
  {
    CompositeLpAggregateGuard aggregate(true);
    auto e = dist.entropy();
    ASSERT_TRUE(std::holds_alternative<at::Tensor>(e));
    EXPECT_TRUE(TensorsClose(std::get<at::Tensor>(e), g("entropy_aggregate")));
  }
}

TEST_P(CompositeGoldenTest, ModeAndDeterministicSample) {
  // tensordict falls back on its register for parts without deterministic_sample (Normal:
  // mean, Categorical: mode); TanhNormal's is TorchRL's transformed loc.
  EXPECT_TRUE(MatchesRecords(make().deterministic_sample(), prefix("deterministic_sample")));
  EXPECT_TRUE(MatchesRecords(make(/*with_tanh_normal=*/false).mode(), prefix("mode")));
}

TEST_P(CompositeGoldenTest, SeededSampleMatchesTheReferenceDraw) {
  // One generator feeds the parts in distribution_map order, as the global one does in Python.
  TensorDict drawn = make().sample({2}, seeded(20));
  EXPECT_TRUE(MatchesRecords(drawn, "samples_composite/" + GetParam() + "/"));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CompositeGoldenTest, ::testing::Values("f32", "f64"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tdp::dist
