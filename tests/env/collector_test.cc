#include "sdk/env/collector.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "samples/envs/cartpole.h"
#include "samples/envs/pendulum.h"
#include "sdk/actor/actor.h"
#include "sdk/nn/tensordict_module_base.h"
#include "tests/testing/error_of.h"
#include "tests/testing/files.h"

namespace tdp::env {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;

std::shared_ptr<actor::Actor> load(const std::string& name, uint64_t seed = 0) {
  auto actor = actor::Actor::load(test_util::runfile("policies/" + name), actor::ActorOptions().seed(seed));
  if (!actor.ok()) throw std::runtime_error(std::string(actor.status().message()));
  return std::move(*actor);
}

std::shared_ptr<BatchedEnv> cartpole(int64_t n, int64_t max_steps = 0) {
  return std::make_shared<CartPole>(EnvOptions(n).max_episode_steps(max_steps));
}

TEST(CollectorTest, BatchesHaveTorchRLsKeysAndShapes) {
  Collector collector(cartpole(4), load("cartpole_categorical.pbtxt"), CollectorOptions(40).total_frames(100));
  EXPECT_EQ(collector.num_batches(), 3);
  std::optional<TensorDict> batch = collector.next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->batch_size().vec(), (std::vector<int64_t>{4, 10}));
  EXPECT_EQ(batch->get("observation").sizes().vec(), (std::vector<int64_t>{4, 10, 4}));
  EXPECT_EQ(batch->get("action").sizes().vec(), (std::vector<int64_t>{4, 10}));
  EXPECT_TRUE(batch->contains("action_log_prob"));
  for (const char* flag : {"done", "terminated", "truncated"}) {
    EXPECT_EQ(batch->get(flag).sizes().vec(), (std::vector<int64_t>{4, 10, 1})) << flag;
    EXPECT_FALSE(batch->get(flag).any().item<bool>()) << flag;
    EXPECT_EQ(batch->get({"next", flag}).sizes().vec(), (std::vector<int64_t>{4, 10, 1})) << flag;
    EXPECT_EQ(batch->get({"next", flag}).scalar_type(), at::kBool) << flag;
  }
  EXPECT_EQ(batch->get({"next", "observation"}).sizes().vec(), (std::vector<int64_t>{4, 10, 4}));
  EXPECT_EQ(batch->get({"next", "reward"}).sizes().vec(), (std::vector<int64_t>{4, 10, 1}));
  EXPECT_EQ(batch->get({"collector", "traj_ids"}).sizes().vec(), (std::vector<int64_t>{4, 10}));
  EXPECT_TRUE(at::equal(batch->get({"collector", "traj_ids"}).select(1, 0), at::arange(4, at::kLong)));
  EXPECT_TRUE(collector.next());
  EXPECT_TRUE(collector.next());
  EXPECT_FALSE(collector.next());
  EXPECT_EQ(collector.frames(), 120);
}

TEST(CollectorTest, StepsChainAndResetsStartNewTrajectories) {
  // A short limit truncates every episode at step 7: ids change there, and only there.
  Collector collector(cartpole(3, 7), load("cartpole_categorical.pbtxt"), CollectorOptions(3 * 20));
  TensorDict batch = *collector.next();
  at::Tensor done = batch.get({"next", "done"}).squeeze(-1);
  at::Tensor ids = batch.get({"collector", "traj_ids"});
  at::Tensor obs = batch.get("observation");
  at::Tensor next_obs = batch.get({"next", "observation"});
  EXPECT_TRUE(batch.get({"next", "truncated"}).squeeze(-1).select(1, 6).all().item<bool>());
  for (int64_t t = 0; t + 1 < 20; ++t) {
    for (int64_t i = 0; i < 3; ++i) {
      if (done[i][t].item<bool>()) {
        // A new trajectory: a larger id, and the observation is the reset's, not ("next", "observation").
        EXPECT_GT(ids[i][t + 1].item<int64_t>(), ids[i][t].item<int64_t>());
        EXPECT_FALSE(at::equal(obs[i][t + 1], next_obs[i][t]));
      } else {
        EXPECT_EQ(ids[i][t + 1].item<int64_t>(), ids[i][t].item<int64_t>());
        EXPECT_TRUE(at::equal(obs[i][t + 1], next_obs[i][t]));
      }
    }
  }
  // Ids are unique across environments: 3 initial ones plus one per reset.
  EXPECT_EQ(ids.max().item<int64_t>() + 1, 3 + done.sum().item<int64_t>() - done.select(1, 19).sum().item<int64_t>());
  // The next batch continues where this one stopped.
  TensorDict second = *collector.next();
  at::Tensor last_done = done.select(1, 19);
  for (int64_t i = 0; i < 3; ++i) {
    if (!last_done[i].item<bool>()) {
      EXPECT_TRUE(at::equal(second.get("observation")[i][0], next_obs[i][19]));
    }
  }
}

TEST(CollectorTest, ABatchHoldsEveryStepOfTheSameRolloutRunByHand) {
  // The same seeded environment and actor stepped by hand, one TensorDict per step: the batch
  // must hold each of those steps at [i, t], the episode ends (a limit of 7) included.
  constexpr int64_t kEnvs = 3;
  constexpr int64_t kSteps = 20;
  Collector collector(cartpole(kEnvs, 7), load("cartpole_categorical.pbtxt", 11),
                      CollectorOptions(kEnvs * kSteps).seed(4));
  TensorDict batch = *collector.next();
  std::shared_ptr<BatchedEnv> env = cartpole(kEnvs, 7);
  std::shared_ptr<actor::Actor> actor = load("cartpole_categorical.pbtxt", 11);
  at::Tensor observation = env->reset(4).get("observation");
  for (int64_t t = 0; t < kSteps; ++t) {
    TensorDict out = actor->act(TensorDict({{"observation", observation}}, {kEnvs}));
    TensorDict result = env->step(out);
    auto at_step = [&](const NestedKey& key) { return batch.get(key).select(1, t); };
    EXPECT_TRUE(at::equal(at_step("observation"), observation)) << "step " << t;
    EXPECT_TRUE(at::equal(at_step("action"), out.get("action"))) << "step " << t;
    EXPECT_TRUE(at::equal(at_step("action_log_prob"), out.get("action_log_prob"))) << "step " << t;
    EXPECT_TRUE(at::equal(at_step({"next", "observation"}), result.get("final_observation"))) << "step " << t;
    EXPECT_TRUE(at::equal(at_step({"next", "reward"}), result.get("reward"))) << "step " << t;
    EXPECT_TRUE(at::equal(at_step({"next", "terminated"}), result.get("terminated"))) << "step " << t;
    EXPECT_TRUE(at::equal(at_step({"next", "truncated"}), result.get("truncated"))) << "step " << t;
    EXPECT_TRUE(at::equal(at_step({"next", "done"}), result.get("terminated") | result.get("truncated")))
        << "step " << t;
    observation = result.get("observation");
  }
  EXPECT_EQ(batch.keys(/*include_nested=*/true, /*leaves_only=*/true),
            (std::vector<NestedKey>{"observation", "action", "action_log_prob", "done", "terminated", "truncated",
                                    {"collector", "traj_ids"}, {"next", "observation"}, {"next", "reward"},
                                    {"next", "done"}, {"next", "terminated"}, {"next", "truncated"}}));
  for (const auto& [key, entry] : batch.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    EXPECT_FALSE(entry.tensor().is_inference()) << key.to_string();
    EXPECT_TRUE(entry.tensor().is_contiguous()) << key.to_string();
  }
}

// Four numbers that count steps, observed as a transposed (non-contiguous) tensor of its own, with
// CartPole's action space: entries the batch cannot take by plain copies.
class TransposedCounter : public BatchedEnv {
 public:
  explicit TransposedCounter(int64_t n) : BatchedEnv(EnvOptions(n), /*default_max_episode_steps=*/5) {}
  std::string name() const override { return "TransposedCounter"; }
  std::vector<EntrySpec> observation_spec() const override {
    EntrySpec spec;
    spec.key = "observation";
    spec.shape = {4};
    spec.dtype = at::kFloat;
    spec.low.assign(4, -1e9);
    spec.high.assign(4, 1e9);
    return {spec};
  }
  std::vector<EntrySpec> action_spec() const override {
    EntrySpec spec;
    spec.key = "action";
    spec.dtype = at::kLong;
    spec.num_categories = 2;
    return {spec};
  }
  int64_t state_dim() const override { return 4; }

 protected:
  at::Tensor initial_state(int64_t n) override { return at::arange(4 * n, at::kFloat).view({n, 4}); }
  at::Tensor observe(const at::Tensor& state) const override { return state.t().contiguous().t(); }
  Transition transition(const at::Tensor& state, const TensorDict& /*action_td*/) override {
    return {state + 1, at::ones({num_envs(), 1}), at::zeros({num_envs(), 1}, at::kBool)};
  }
};

TEST(CollectorTest, NonContiguousEntriesAreCopiedIntoTheBatch) {
  Collector collector(std::make_shared<TransposedCounter>(3), load("cartpole_categorical.pbtxt"),
                      CollectorOptions(3 * 8));
  TensorDict batch = *collector.next();
  const at::Tensor start = at::arange(12, at::kFloat).view({3, 1, 4});
  const at::Tensor steps = at::arange(8, at::kFloat).view({1, 8, 1});
  // Episodes of 5 steps: the observation counts 0-4, then starts again.
  const at::Tensor expected = start + at::remainder(steps, 5);
  EXPECT_TRUE(at::equal(batch.get("observation"), expected)) << batch.get("observation");
  EXPECT_TRUE(at::equal(batch.get({"next", "observation"}), start + at::remainder(steps, 5) + 1));
}

TEST(CollectorTest, RecurrentStateIsCarriedAndZeroedAtResets) {
  Collector collector(cartpole(2, 5), load("recurrent_gru.pbtxt"), CollectorOptions(2 * 12));
  TensorDict batch = *collector.next();
  at::Tensor hidden = batch.get("hidden");
  at::Tensor next_hidden = batch.get({"next", "hidden"});
  at::Tensor done = batch.get({"next", "done"}).squeeze(-1);
  EXPECT_TRUE(at::equal(hidden.select(1, 0), at::zeros_like(hidden.select(1, 0))));
  for (int64_t t = 0; t + 1 < 12; ++t) {
    for (int64_t i = 0; i < 2; ++i) {
      if (done[i][t].item<bool>()) {
        EXPECT_TRUE(at::equal(hidden[i][t + 1], at::zeros_like(hidden[i][t + 1])));
      } else {
        EXPECT_TRUE(at::equal(hidden[i][t + 1], next_hidden[i][t]));
      }
    }
  }
}

TEST(CollectorTest, ContinuousActions) {
  Collector collector(std::make_shared<Pendulum>(EnvOptions(2)), load("pendulum_tanh_gaussian.pbtxt"),
                      CollectorOptions(8));
  TensorDict batch = *collector.next();
  EXPECT_EQ(batch.get("action").sizes().vec(), (std::vector<int64_t>{2, 4, 1}));
}

TEST(CollectorTest, SeedsMakeRunsReproducible) {
  auto run = [](uint64_t seed) {
    Collector collector(cartpole(2), load("cartpole_categorical.pbtxt", 5), CollectorOptions(16).seed(seed));
    return collector.next()->get({"next", "observation"});
  };
  EXPECT_TRUE(at::equal(run(1), run(1)));
  EXPECT_FALSE(at::equal(run(1), run(2)));
}

TEST(CollectorTest, PrefetchGivesTheSameBatches) {
  for (bool prefetch : {false, true}) {
    Collector plain(cartpole(2, 9), load("cartpole_categorical.pbtxt"), CollectorOptions(20).total_frames(60));
    Collector fetched(cartpole(2, 9), load("cartpole_categorical.pbtxt"),
                      CollectorOptions(20).total_frames(60).prefetch(prefetch));
    int batches = 0;
    while (std::optional<TensorDict> a = plain.next()) {
      std::optional<TensorDict> b = fetched.next();
      ASSERT_TRUE(b);
      EXPECT_TRUE(a->equal(*b));
      ++batches;
    }
    EXPECT_FALSE(fetched.next());
    EXPECT_EQ(batches, 3);
  }
}

TEST(CollectorTest, UpdatesTakeEffectOnTheDocumentedBatch) {
  for (bool prefetch : {false, true}) {
    auto actor = load("cartpole_categorical.pbtxt");
    Collector collector(cartpole(4), actor,
                        CollectorOptions(64).interaction_type(nn::InteractionType::kDeterministic).prefetch(prefetch));
    TensorDict first = *collector.next();
    // Zero weights and an output bias favouring the action the first step did not take make
    // that action the deterministic one everywhere.
    const int64_t target = 1 - first.get("action")[0][0].item<int64_t>();
    auto all_target = [&](const TensorDict& batch) { return batch.get("action").eq(target).all().item<bool>(); };
    EXPECT_FALSE(all_target(first));
    collector.update_actor([&](actor::Actor& a) {
      torch::NoGradGuard no_grad;
      std::vector<at::Tensor> parameters = a.module()->parameters();
      for (at::Tensor& p : parameters) p.zero_();
      parameters.back()[target] = 1.0;
      ASSERT_TRUE(a.refresh_parameters().ok());
    });
    if (prefetch) {
      EXPECT_FALSE(all_target(*collector.next()));  // collected in the background before the update
    }
    EXPECT_TRUE(all_target(*collector.next())) << "prefetch " << prefetch;
  }
}

TEST(CollectorTest, ShutdownEndsIterationAndJoins) {
  Collector collector(cartpole(2), load("cartpole_categorical.pbtxt"), CollectorOptions(8).prefetch(true));
  EXPECT_TRUE(collector.next());
  collector.shutdown();
  collector.shutdown();
  EXPECT_FALSE(collector.next());
}

TEST(CollectorTest, BadOptionsAreNamed) {
  auto actor = load("cartpole_categorical.pbtxt");
  EXPECT_THAT(error_of<std::invalid_argument>([&] { Collector(cartpole(3), actor, CollectorOptions(10)); }),
              HasSubstr("frames_per_batch=10"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { Collector(cartpole(2), actor, CollectorOptions(10).total_frames(0)); }),
              HasSubstr("total_frames=0"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] {
                Collector(std::make_shared<Pendulum>(EnvOptions(2)), actor, CollectorOptions(10));
              }),
              HasSubstr("observation of shape [4]"));
}

}  // namespace
}  // namespace tdp::env
