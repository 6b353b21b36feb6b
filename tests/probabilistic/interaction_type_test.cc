// InteractionType scopes: parsing, nesting, the decorator form, and thread-local settings that
// win over the process-wide one in their own thread only.
#include "sdk/probabilistic/interaction_type.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/testing/error_of.h"

namespace tdp::nn {
namespace {

TEST(InteractionTypeTest, FromStrIsCaseInsensitive) {
  EXPECT_EQ(interaction_type_from_str("mode"), InteractionType::kMode);
  EXPECT_EQ(interaction_type_from_str("MEDIAN"), InteractionType::kMedian);
  EXPECT_EQ(interaction_type_from_str("Mean"), InteractionType::kMean);
  EXPECT_EQ(interaction_type_from_str("rAnDoM"), InteractionType::kRandom);
  EXPECT_EQ(interaction_type_from_str("DETERMINISTIC"), InteractionType::kDeterministic);
  for (InteractionType type : {InteractionType::kMode, InteractionType::kMedian, InteractionType::kMean,
                               InteractionType::kRandom, InteractionType::kDeterministic}) {
    EXPECT_EQ(interaction_type_from_str(to_string(type)), type);
  }
  EXPECT_EQ(test_util::error_of<std::invalid_argument>([] { interaction_type_from_str("greedy"); }),
            "unknown InteractionType 'greedy'; expected one of mode, median, mean, random, deterministic");
}

TEST(InteractionTypeTest, NoneOutsideAnyScope) { EXPECT_FALSE(interaction_type().has_value()); }

TEST(InteractionTypeTest, GuardsNestAndRestore) {
  {
    InteractionTypeGuard outer(InteractionType::kRandom);
    EXPECT_EQ(interaction_type(), InteractionType::kRandom);
    {
      InteractionTypeGuard inner(InteractionType::kMode);
      EXPECT_EQ(interaction_type(), InteractionType::kMode);
      {
        InteractionTypeGuard cleared(std::nullopt);
        EXPECT_FALSE(interaction_type().has_value());
      }
      EXPECT_EQ(interaction_type(), InteractionType::kMode);
    }
    EXPECT_EQ(interaction_type(), InteractionType::kRandom);
  }
  EXPECT_FALSE(interaction_type().has_value());
}

TEST(InteractionTypeTest, DecoratorFormAppliesToEachCall) {
  auto observed = set_interaction_type(InteractionType::kMean, [](int x) {
    return std::make_pair(x + 1, interaction_type());
  });
  auto [value, type] = observed(41);
  EXPECT_EQ(value, 42);
  EXPECT_EQ(type, InteractionType::kMean);
  EXPECT_FALSE(interaction_type().has_value());
}

TEST(InteractionTypeTest, ThreadLocalSettingWinsInItsThreadOnly) {
  InteractionTypeGuard process(InteractionType::kDeterministic);
  std::optional<InteractionType> seen_by_other;
  {
    InteractionTypeGuard mine(InteractionType::kRandom, /*thread_local_only=*/true);
    EXPECT_EQ(interaction_type(), InteractionType::kRandom);
    std::thread other([&] { seen_by_other = interaction_type(); });
    other.join();
  }
  EXPECT_EQ(seen_by_other, InteractionType::kDeterministic);
  EXPECT_EQ(interaction_type(), InteractionType::kDeterministic);
}

TEST(InteractionTypeTest, TwoThreadsHoldDifferentTypesAtOnce) {
  std::atomic<int> ready{0};
  std::atomic<bool> mismatch{false};
  auto worker = [&](InteractionType type) {
    InteractionTypeGuard guard(type, /*thread_local_only=*/true);
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    for (int i = 0; i < 10000; ++i) {
      if (interaction_type() != type) mismatch = true;
    }
  };
  std::thread explore(worker, InteractionType::kRandom);
  std::thread evaluate(worker, InteractionType::kMode);
  explore.join();
  evaluate.join();
  EXPECT_FALSE(mismatch.load());
  EXPECT_FALSE(interaction_type().has_value());
}

}  // namespace
}  // namespace tdp::nn
