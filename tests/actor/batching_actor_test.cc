// BatchingActor: many threads' requests merged into few calls of one Actor, each caller getting
// exactly its rows of what a direct call computes; the merge rule's limits; interaction types
// kept apart; bad requests failing alone; recurrent state kept per environment id; shutdown
// leaving no future unanswered. No timing is asserted: waits are bounded by wait_for so a bug
// fails a test instead of hanging it.
#include "sdk/actor/batching_actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "tdpolicy/spec.pb.h"
#include "tests/testing/error_of.h"

namespace tdp::actor {
namespace {

using nn::InteractionType;
using test_util::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kCartPole = "policies/cartpole_categorical.pbtxt";
constexpr const char* kPendulum = "policies/pendulum_tanh_gaussian.pbtxt";
constexpr const char* kGru = "policies/recurrent_gru.pbtxt";
constexpr auto kNoHang = std::chrono::seconds(30);

std::shared_ptr<Actor> load_actor(const std::string& spec, ActorOptions options = {}) {
  auto actor = Actor::load(spec, options);
  if (!actor.ok()) {
    ADD_FAILURE() << actor.status();
    return nullptr;
  }
  return std::shared_ptr<Actor>(std::move(*actor));
}

int64_t observation_size(const Actor& actor) { return actor.spec().inputs(0).shape(0); }

TensorDict observation(const at::Tensor& obs) { return TensorDict({{"observation", obs}}, {obs.size(0)}); }

at::Tensor random_obs(int64_t rows, int64_t width, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return at::randn({rows, width}, gen);
}

bool ready(std::future<TensorDict>& future) { return future.wait_for(kNoHang) == std::future_status::ready; }

// Deterministic types: every entry within 1e-6 of the reference.
void expect_rows_equal(const TensorDict& got, const TensorDict& expected, const std::string& where) {
  constexpr double tolerance = 1e-6;
  for (const NestedKey& key : expected.keys(true, true)) {
    ASSERT_TRUE(got.contains(key)) << where << ": " << key.to_string();
    const at::Tensor a = got.get(key).to(at::kDouble);
    const at::Tensor b = expected.get(key).to(at::kDouble);
    ASSERT_EQ(a.sizes(), b.sizes()) << where << ": " << key.to_string();
    EXPECT_LE((a - b).abs().max().item<double>(), tolerance) << where << ": " << key.to_string();
  }
}

TEST(BatchingActorTest, HeaderExampleRuns) {
  auto batcher = BatchingActor::load(kCartPole);
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  std::future<TensorDict> next = (*batcher)->submit(observation(at::zeros({3, 4})));
  TensorDict action = next.get();
  EXPECT_EQ(action.get("action").sizes(), (std::vector<int64_t>{3}));
  TensorDict greedy = (*batcher)->act(observation(at::zeros({1, 4})),
                                      BatchingRequest().interaction_type(InteractionType::kDeterministic));
  EXPECT_EQ(greedy.batch_size(), c10::IntArrayRef({1}));
}

// 8 threads x 4 requests x 2 rows: 64 rows in all, so the direct call is on the same path (the
// fused plan under kAuto) as every merged one.
TEST(BatchingActorTest, DeterministicResultsEqualOneDirectCallOnTheConcatenatedBatchFromManyThreads) {
  for (const char* spec : {kCartPole, kPendulum}) {
    SCOPED_TRACE(spec);
    auto actor = load_actor(spec);
    ASSERT_NE(actor, nullptr);
    const int64_t width = observation_size(*actor);
    constexpr int kThreads = 8, kRequests = 4, kRows = 2;
    const at::Tensor all = random_obs(kThreads * kRequests * kRows, width, 7);
    BatchingActor batcher(actor, BatchingActorOptions().max_delay(std::chrono::milliseconds(2)));
    std::vector<std::vector<TensorDict>> got(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int r = 0; r < kRequests; ++r) {
          const int64_t start = (t * kRequests + r) * kRows;
          got[t].push_back(batcher.act(observation(all.narrow(0, start, kRows)),
                                       BatchingRequest().interaction_type(InteractionType::kDeterministic)));
        }
      });
    }
    for (auto& thread : threads) thread.join();
    const TensorDict direct = actor->act(observation(all), InteractionType::kDeterministic);
    for (int t = 0; t < kThreads; ++t) {
      for (int r = 0; r < kRequests; ++r) {
        const int64_t start = (t * kRequests + r) * kRows;
        expect_rows_equal(got[t][r], direct.narrow(0, start, kRows), "thread " + std::to_string(t));
      }
    }
    const BatchingStats stats = batcher.stats();
    EXPECT_EQ(stats.requests, kThreads * kRequests);
    EXPECT_EQ(stats.rows, kThreads * kRequests * kRows);
    EXPECT_EQ(stats.rejected, 0);
  }
}

TEST(BatchingActorTest, ConcurrentRequestsAreMergedIntoFewerCalls) {
  // A generous min_batch_size and delay: the 8 single-row requests wait for one another.
  BatchingActor batcher(load_actor(kCartPole),
                        BatchingActorOptions().min_batch_size(8).max_delay(std::chrono::seconds(5)));
  constexpr int kThreads = 8;
  std::atomic<int> arrived{0};
  std::vector<std::future<TensorDict>> futures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++arrived;
      while (arrived.load() < kThreads) std::this_thread::yield();
      futures[t] = batcher.submit(observation(random_obs(1, 4, t)));
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& future : futures) {
    ASSERT_TRUE(ready(future));
    EXPECT_EQ(future.get().batch_size(), c10::IntArrayRef({1}));
  }
  const BatchingStats stats = batcher.stats();
  EXPECT_EQ(stats.requests, kThreads);
  EXPECT_LT(stats.batches, stats.requests);
  EXPECT_GT(stats.mean_batch_fill(), 1.0 / 64);
}

TEST(BatchingActorTest, MaxBatchSizeIsNeverExceeded) {
  BatchingActor batcher(load_actor(kCartPole), BatchingActorOptions().max_batch_size(4).min_batch_size(4).max_delay(
                                                   std::chrono::milliseconds(1)));
  constexpr int kThreads = 8, kRequests = 20;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRequests; ++r) {
        const int64_t rows = 1 + (t + r) % 3;
        TensorDict out = batcher.act(observation(random_obs(rows, 4, t * 100 + r)));
        if (out.batch_size()[0] != rows) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  const BatchingStats stats = batcher.stats();
  EXPECT_EQ(stats.requests, kThreads * kRequests);
  EXPECT_LE(stats.largest_batch, 4);
  EXPECT_LE(stats.mean_batch_fill(), 1.0);
  // A request larger than a batch can never run: an error naming the limit.
  auto too_big = batcher.submit(observation(at::zeros({5, 4})));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { too_big.get(); }), HasSubstr("max_batch_size = 4"));
}

TEST(BatchingActorTest, ALoneRequestRunsOnceMaxDelayPasses) {
  // It waits for 7 more rows that never come; max_delay lets it go.
  BatchingActor batcher(load_actor(kCartPole),
                        BatchingActorOptions().min_batch_size(8).max_delay(std::chrono::milliseconds(20)));
  auto future = batcher.submit(observation(at::zeros({1, 4})));
  ASSERT_TRUE(ready(future));
  EXPECT_EQ(future.get().get("action").sizes(), (std::vector<int64_t>{1}));
  EXPECT_EQ(batcher.stats().batches, 1);
  // With the defaults (min_batch_size 1) a lone request runs at once.
  BatchingActor defaults(load_actor(kCartPole));
  auto alone = defaults.submit(observation(at::zeros({1, 4})));
  ASSERT_TRUE(ready(alone));
  EXPECT_NO_THROW(alone.get());
}

TEST(BatchingActorTest, MixedInteractionTypesInFlightEachGetTheirOwnTypesResult) {
  auto actor = load_actor(kPendulum);
  ASSERT_NE(actor, nullptr);
  BatchingActor batcher(actor, BatchingActorOptions().min_batch_size(16).max_delay(std::chrono::milliseconds(50)));
  const at::Tensor all = random_obs(16, 3, 11);
  std::vector<std::future<TensorDict>> futures;
  for (int64_t i = 0; i < 16; ++i) {  // alternating types, all pending together
    const InteractionType type = i % 2 == 0 ? InteractionType::kDeterministic : InteractionType::kRandom;
    futures.push_back(batcher.submit(observation(all.narrow(0, i, 1)), BatchingRequest().interaction_type(type)));
  }
  const TensorDict deterministic = actor->act(observation(all), InteractionType::kDeterministic);
  int random_differs = 0;
  for (int64_t i = 0; i < 16; ++i) {
    ASSERT_TRUE(ready(futures[i]));
    const TensorDict got = futures[i].get();
    if (i % 2 == 0) {
      expect_rows_equal(got, deterministic.narrow(0, i, 1), "row " + std::to_string(i));
    } else if (!got.get("action").allclose(deterministic.get("action").narrow(0, i, 1))) {
      ++random_differs;
    }
  }
  EXPECT_EQ(random_differs, 8);           // a Normal draw equal to its loc: probability 0
  EXPECT_GE(batcher.stats().batches, 2);  // never one call for both types
}

TEST(BatchingActorTest, ABadRequestFailsAloneWhileGoodOnesInTheSameWindowSucceed) {
  auto actor = load_actor(kCartPole);
  ASSERT_NE(actor, nullptr);
  BatchingActor batcher(actor, BatchingActorOptions().min_batch_size(4).max_delay(std::chrono::seconds(5)));
  std::vector<std::future<TensorDict>> good;
  good.push_back(batcher.submit(observation(random_obs(1, 4, 1))));
  struct Bad {
    std::string what;
    std::future<TensorDict> future;
    std::vector<std::string> message;
  };
  std::vector<Bad> bad;
  bad.push_back({"missing key",
                 batcher.submit(TensorDict({{"obs", at::zeros({1, 4})}}, {1})),
                 {"input \"observation\" is missing", "declared Float [4] per environment, batch_size [1]"}});
  bad.push_back({"trailing shape",
                 batcher.submit(observation(at::zeros({1, 5}))),
                 {"input \"observation\" has shape [1, 5], expected [1, 4]"}});
  bad.push_back({"dtype",
                 batcher.submit(observation(at::zeros({1, 4}, at::kDouble))),
                 {"input \"observation\" has dtype Double, expected Float"}});
  bad.push_back({"batch dims",
                 batcher.submit(TensorDict({{"observation", at::zeros({1, 1, 4})}}, {1, 1})),
                 {"batch_size [1, 1]", "exactly one batch dim"}});
  bad.push_back({"env_ids length",
                 batcher.submit(observation(at::zeros({2, 4})), BatchingRequest().env_ids(at::arange(3))),
                 {"env_ids must be int64 [2]", "not Long [3]"}});
  bad.push_back({"no rows", batcher.submit(observation(at::zeros({0, 4}))), {"0 rows"}});
  for (Bad& b : bad) {
    SCOPED_TRACE(b.what);
    // Failed at submit(), before any batch: ready although the good requests still wait.
    ASSERT_EQ(b.future.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    const std::string message = error_of<std::invalid_argument>([&] { b.future.get(); });
    for (const std::string& part : b.message) EXPECT_THAT(message, HasSubstr(part));
  }
  for (uint64_t seed = 2; seed <= 4; ++seed) good.push_back(batcher.submit(observation(random_obs(1, 4, seed))));
  for (auto& future : good) {
    ASSERT_TRUE(ready(future));
    EXPECT_NO_THROW(future.get());
  }
  const BatchingStats stats = batcher.stats();
  EXPECT_EQ(stats.rejected, static_cast<int64_t>(bad.size()));
  EXPECT_EQ(stats.requests, 4);
  EXPECT_EQ(stats.batches, 1);
}

TEST(BatchingActorTest, AThrowingCallFailsEveryRequestOfItsBatchAndTheBatcherGoesOn) {
  // MEAN has no closed form for a categorical: the call itself throws.
  BatchingActor batcher(load_actor(kCartPole),
                        BatchingActorOptions().min_batch_size(3).max_delay(std::chrono::seconds(5)));
  std::vector<std::future<TensorDict>> futures;
  for (int i = 0; i < 3; ++i) {
    futures.push_back(
        batcher.submit(observation(at::zeros({1, 4})), BatchingRequest().interaction_type(InteractionType::kMean)));
  }
  std::vector<std::string> messages;
  for (auto& future : futures) {
    ASSERT_TRUE(ready(future));
    try {
      future.get();
      ADD_FAILURE() << "expected the call's error";
    } catch (const std::exception& error) {
      messages.push_back(error.what());
    }
  }
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_FALSE(messages[0].empty());
  EXPECT_EQ(messages[1], messages[0]);
  EXPECT_EQ(messages[2], messages[0]);
  EXPECT_EQ(batcher.stats().failed_batches, 1);
  // The worker survives: 3 more rows make a batch that succeeds.
  auto next = batcher.submit(observation(at::zeros({3, 4})));
  ASSERT_TRUE(ready(next));
  EXPECT_EQ(next.get().batch_size(), c10::IntArrayRef({3}));
}

TEST(BatchingActorTest, RefreshingTheWrappedActorWhileItsWorkerActsGivesTheOldOrTheNewWeights) {
  std::shared_ptr<Actor> actor = load_actor(kPendulum);
  ASSERT_NE(actor, nullptr);
  std::vector<at::Tensor> params = actor->module()->parameters();
  std::vector<at::Tensor> a, b;
  for (const at::Tensor& p : params) {
    a.push_back(p.detach().clone());
    b.push_back(p.detach() * -0.5 + 0.125);
  }
  auto use = [&](const std::vector<at::Tensor>& weights) {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(weights[i]);
  };
  const at::Tensor obs = random_obs(1, observation_size(*actor), 7);
  const auto deterministic = BatchingRequest().interaction_type(InteractionType::kDeterministic);
  // The fused plan runs batch 1 here; the answers of each weight set, exactly.
  const at::Tensor answer_a = actor->act(observation(obs), InteractionType::kDeterministic).get("action");
  use(b);
  ASSERT_TRUE(actor->refresh_parameters().ok());
  const at::Tensor answer_b = actor->act(observation(obs), InteractionType::kDeterministic).get("action");
  ASSERT_FALSE(answer_a.equal(answer_b));

  BatchingActor batcher(actor);
  std::atomic<bool> done{false};
  std::atomic<int64_t> mixed{0}, calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!done.load()) {
        const at::Tensor got = batcher.act(observation(obs), deterministic).get("action");
        // Merged rows may round differently from a batch-1 call: within 1e-5 of one answer.
        if (!at::allclose(got, answer_a, 0, 1e-5) && !at::allclose(got, answer_b, 0, 1e-5)) ++mixed;
        ++calls;
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    use(i % 2 == 0 ? a : b);
    ASSERT_TRUE(batcher.actor().refresh_parameters().ok());
  }
  while (calls.load() < 200) std::this_thread::yield();
  done = true;
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mixed.load(), 0) << "of " << calls.load() << " calls";
}

// The reference: one environment stepped alone through Actor::act with its state passed in.
struct SequentialEnv {
  at::Tensor hidden = at::zeros({1, 32});
  TensorDict step(Actor& actor, const at::Tensor& obs) {
    TensorDict td({{"observation", obs}, {"hidden", hidden}}, {1});
    TensorDict out = actor.act(td, InteractionType::kDeterministic);
    hidden = out.get("hidden");
    return out;
  }
};

TEST(BatchingActorTest, RecurrentStatePerEnvironmentEqualsSequentialPerEnvironmentCalls) {
  auto actor = load_actor(kGru);
  ASSERT_NE(actor, nullptr);
  auto reference = load_actor(kGru);
  ASSERT_NE(reference, nullptr);
  constexpr int kThreads = 4, kEnvsPerThread = 2, kSteps = 6;
  constexpr int kEnvs = kThreads * kEnvsPerThread;
  const at::Tensor obs = at::randn({kSteps, kEnvs, 4}, at::detail::createCPUGenerator(3));
  BatchingActor batcher(actor, BatchingActorOptions().max_delay(std::chrono::milliseconds(2)));
  std::vector<std::vector<TensorDict>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Env ids 100 + ..., not row numbers: any int64 names an environment.
      const at::Tensor ids = at::arange(100 + t * kEnvsPerThread, 100 + (t + 1) * kEnvsPerThread);
      for (int s = 0; s < kSteps; ++s) {
        got[t].push_back(batcher.act(observation(obs[s].narrow(0, t * kEnvsPerThread, kEnvsPerThread)),
                                     BatchingRequest().env_ids(ids).interaction_type(InteractionType::kDeterministic)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<SequentialEnv> envs(kEnvs);
  for (int s = 0; s < kSteps; ++s) {
    for (int e = 0; e < kEnvs; ++e) {
      const TensorDict expected = envs[e].step(*reference, obs[s].narrow(0, e, 1));
      const int t = e / kEnvsPerThread;
      expect_rows_equal(got[t][s].narrow(0, e % kEnvsPerThread, 1), expected,
                        "step " + std::to_string(s) + " env " + std::to_string(e));
    }
  }
}

TEST(BatchingActorTest, ResetZeroesTheKeptStateOfTheNamedEnvironmentsOnly) {
  auto reference = load_actor(kGru);
  ASSERT_NE(reference, nullptr);
  BatchingActor batcher(load_actor(kGru));
  const at::Tensor obs = at::randn({4, 2, 4}, at::detail::createCPUGenerator(9));
  const at::Tensor ids = at::tensor(std::vector<int64_t>{5, 6}, at::kLong);
  const BatchingRequest request = BatchingRequest().env_ids(ids).interaction_type(InteractionType::kDeterministic);
  SequentialEnv env5, env6;
  for (int s = 0; s < 2; ++s) {
    batcher.act(observation(obs[s]), request);
    env5.step(*reference, obs[s].narrow(0, 0, 1));
    env6.step(*reference, obs[s].narrow(0, 1, 1));
  }
  batcher.reset(at::tensor(std::vector<int64_t>{5, 77}, at::kLong));  // 77 was never seen: ignored
  env5 = SequentialEnv();
  TensorDict out = batcher.act(observation(obs[2]), request);
  expect_rows_equal(out.narrow(0, 0, 1), env5.step(*reference, obs[2].narrow(0, 0, 1)), "env 5 after reset");
  expect_rows_equal(out.narrow(0, 1, 1), env6.step(*reference, obs[2].narrow(0, 1, 1)), "env 6 kept");
  batcher.reset();  // forgets both
  env5 = SequentialEnv();
  env6 = SequentialEnv();
  out = batcher.act(observation(obs[3]), request);
  expect_rows_equal(out.narrow(0, 0, 1), env5.step(*reference, obs[3].narrow(0, 0, 1)), "env 5 after reset()");
  expect_rows_equal(out.narrow(0, 1, 1), env6.step(*reference, obs[3].narrow(0, 1, 1)), "env 6 after reset()");
  EXPECT_THAT(error_of<std::invalid_argument>([&] { batcher.reset(at::zeros({2})); }), HasSubstr("int64"));
}

TEST(BatchingActorTest, RecurrentRequestsNameTheirEnvironmentsOrCarryTheirState) {
  auto actor = load_actor(kGru);
  ASSERT_NE(actor, nullptr);
  BatchingActor batcher(actor);
  auto no_ids = batcher.submit(observation(at::zeros({2, 4})));
  const std::string message = error_of<std::invalid_argument>([&] { no_ids.get(); });
  EXPECT_THAT(message, HasSubstr("recurrent (state hidden)"));
  EXPECT_THAT(message, HasSubstr("env_ids"));
  auto twice = batcher.submit(observation(at::zeros({2, 4})),
                              BatchingRequest().env_ids(at::tensor(std::vector<int64_t>{3, 3}, at::kLong)));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { twice.get(); }), HasSubstr("environment 3 twice"));
  // The stateless form: the state in the observation, no ids, nothing kept; also merged with a
  // kept-state request in one batch.
  BatchingActor merging(actor, BatchingActorOptions().min_batch_size(3).max_delay(std::chrono::seconds(5)));
  const at::Tensor obs = at::randn({3, 4}, at::detail::createCPUGenerator(4));
  const at::Tensor hidden = at::randn({2, 32}, at::detail::createCPUGenerator(5));
  const BatchingRequest deterministic = BatchingRequest().interaction_type(InteractionType::kDeterministic);
  auto kept = merging.submit(observation(obs.narrow(0, 0, 1)),
                             BatchingRequest(deterministic).env_ids(at::tensor(std::vector<int64_t>{1}, at::kLong)));
  auto given =
      merging.submit(TensorDict({{"observation", obs.narrow(0, 1, 2)}, {"hidden", hidden}}, {2}), deterministic);
  ASSERT_TRUE(ready(kept));
  ASSERT_TRUE(ready(given));
  EXPECT_EQ(merging.stats().batches, 1);
  const TensorDict direct =
      actor->act(TensorDict({{"observation", obs}, {"hidden", at::cat({at::zeros({1, 32}), hidden})}}, {3}),
                 InteractionType::kDeterministic);
  expect_rows_equal(kept.get(), direct.narrow(0, 0, 1), "kept");
  expect_rows_equal(given.get(), direct.narrow(0, 1, 2), "given");
  auto partial = batcher.submit(TensorDict({{"observation", at::zeros({1, 4})}, {"hidden", at::zeros({1, 5})}}, {1}));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { partial.get(); }),
              HasSubstr("input \"hidden\" has shape [1, 5], expected [1, 32]"));
}

TEST(BatchingActorTest, AnEnvironmentPendingTwiceIsSerializedIntoALaterBatch) {
  auto reference = load_actor(kGru);
  ASSERT_NE(reference, nullptr);
  BatchingActor batcher(load_actor(kGru),
                        BatchingActorOptions().min_batch_size(2).max_delay(std::chrono::milliseconds(100)));
  const at::Tensor obs = at::randn({2, 1, 4}, at::detail::createCPUGenerator(6));
  const BatchingRequest request = BatchingRequest()
                                      .env_ids(at::tensor(std::vector<int64_t>{7}, at::kLong))
                                      .interaction_type(InteractionType::kDeterministic);
  auto first = batcher.submit(observation(obs[0]), request);
  auto second = batcher.submit(observation(obs[1]), request);
  ASSERT_TRUE(ready(first));
  ASSERT_TRUE(ready(second));
  SequentialEnv env;
  expect_rows_equal(first.get(), env.step(*reference, obs[0]), "step 1");
  expect_rows_equal(second.get(), env.step(*reference, obs[1]), "step 2 sees step 1's state");
  EXPECT_EQ(batcher.stats().batches, 2);
}

TEST(BatchingActorTest, AnEnvironmentsStepsKeepTheirOrderAcrossInteractionTypes) {
  // Pending in this order: env 2 (deterministic), env 1 (random), env 1 (deterministic). The
  // deterministic batch must not take env 1's second step before its random first one.
  auto reference = load_actor(kGru);
  ASSERT_NE(reference, nullptr);
  BatchingActor batcher(load_actor(kGru),
                        BatchingActorOptions().min_batch_size(3).max_delay(std::chrono::milliseconds(100)));
  const at::Tensor obs = at::randn({3, 1, 4}, at::detail::createCPUGenerator(8));
  auto on = [](int64_t env, InteractionType type) {
    return BatchingRequest().env_ids(at::tensor(std::vector<int64_t>{env}, at::kLong)).interaction_type(type);
  };
  auto env2 = batcher.submit(observation(obs[0]), on(2, InteractionType::kDeterministic));
  auto env1_first = batcher.submit(observation(obs[1]), on(1, InteractionType::kRandom));
  auto env1_second = batcher.submit(observation(obs[2]), on(1, InteractionType::kDeterministic));
  ASSERT_TRUE(ready(env2));
  ASSERT_TRUE(ready(env1_first));
  ASSERT_TRUE(ready(env1_second));
  // The hidden state does not depend on the sampled action, so the reference steps env 1 twice.
  SequentialEnv env1;
  env1.step(*reference, obs[1]);
  expect_rows_equal(env1_second.get(), env1.step(*reference, obs[2]), "env 1, second step");
  SequentialEnv other;
  expect_rows_equal(env2.get(), other.step(*reference, obs[0]), "env 2");
  EXPECT_NO_THROW(env1_first.get());
}

TEST(BatchingActorTest, ShutdownRunsPendingRequestsAndLaterSubmitsFail) {
  auto actor = load_actor(kCartPole);
  ASSERT_NE(actor, nullptr);
  // They would wait a minute for 64 rows; shutdown runs them now.
  BatchingActor batcher(actor, BatchingActorOptions().min_batch_size(64).max_delay(std::chrono::seconds(60)));
  std::vector<std::future<TensorDict>> pending;
  for (int i = 0; i < 5; ++i) pending.push_back(batcher.submit(observation(at::zeros({2, 4}))));
  batcher.shutdown();
  for (auto& future : pending) {
    ASSERT_EQ(future.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    EXPECT_EQ(future.get().batch_size(), c10::IntArrayRef({2}));
  }
  auto late = batcher.submit(observation(at::zeros({1, 4})));
  ASSERT_EQ(late.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_THAT(error_of<std::runtime_error>([&] { late.get(); }), HasSubstr("shut down"));
  batcher.shutdown();  // idempotent
  // The destructor does the same.
  std::future<TensorDict> orphan;
  {
    BatchingActor scoped(actor, BatchingActorOptions().min_batch_size(64).max_delay(std::chrono::seconds(60)));
    orphan = scoped.submit(observation(at::zeros({1, 4})));
  }
  ASSERT_EQ(orphan.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_NO_THROW(orphan.get());
}

TEST(BatchingActorTest, AFullQueueFailsTheRequestNamingTheLimit) {
  BatchingActor batcher(
      load_actor(kCartPole),
      BatchingActorOptions().max_batch_size(4).min_batch_size(4).max_queue_rows(4).max_delay(std::chrono::seconds(60)));
  auto accepted = batcher.submit(observation(at::zeros({3, 4})));
  auto refused = batcher.submit(observation(at::zeros({2, 4})));
  EXPECT_THAT(error_of<std::runtime_error>([&] { refused.get(); }), HasSubstr("max_queue_rows = 4"));
  batcher.shutdown();
  EXPECT_NO_THROW(accepted.get());
}

TEST(BatchingActorTest, WhenAMergedCallThrowsOnlyTheRequestsThatFailAloneFail) {
  // LibTorch's categorical sampling rejects NaN logits: without the finite check at submit, a
  // NaN row makes the merged call throw.
  auto actor = load_actor(kCartPole, ActorOptions().backend(Backend::kLibTorch).check_finite(false));
  ASSERT_NE(actor, nullptr);
  BatchingActor batcher(actor, BatchingActorOptions().min_batch_size(3).max_delay(std::chrono::seconds(5)));
  const auto random = BatchingRequest().interaction_type(InteractionType::kRandom);
  auto good1 = batcher.submit(observation(random_obs(1, 4, 1)), random);
  auto guilty = batcher.submit(observation(at::full({1, 4}, std::numeric_limits<float>::quiet_NaN())), random);
  auto good2 = batcher.submit(observation(random_obs(1, 4, 2)), random);
  ASSERT_TRUE(ready(good1) && ready(guilty) && ready(good2));
  EXPECT_NO_THROW(good1.get());
  EXPECT_NO_THROW(good2.get());
  EXPECT_ANY_THROW(guilty.get());
  const BatchingStats stats = batcher.stats();
  EXPECT_EQ(stats.failed_batches, 1);
  EXPECT_EQ(stats.retried_requests, 3);
}

TEST(BatchingActorTest, SubmitCopiesTheInputsSoTheCallerMayReuseItsBuffer) {
  auto actor = load_actor(kPendulum);
  ASSERT_NE(actor, nullptr);
  BatchingActor batcher(actor, BatchingActorOptions().min_batch_size(2).max_delay(std::chrono::seconds(5)));
  const auto deterministic = BatchingRequest().interaction_type(InteractionType::kDeterministic);
  at::Tensor buffer = random_obs(1, observation_size(*actor), 5);
  const at::Tensor expected = actor->act(observation(buffer.clone()), InteractionType::kDeterministic).get("action");
  auto first = batcher.submit(observation(buffer), deterministic);
  buffer.fill_(100);  // the simulator steps on before the batch runs
  auto second = batcher.submit(observation(random_obs(1, observation_size(*actor), 6)), deterministic);
  ASSERT_TRUE(ready(first) && ready(second));
  EXPECT_TRUE(at::allclose(first.get().get("action"), expected, 0, 1e-6));
}

TEST(BatchingActorTest, SparseAndMetaInputsAreRejectedAtSubmitNamingTheKey) {
  BatchingActor batcher(load_actor(kCartPole));
  auto sparse = batcher.submit(observation(at::zeros({1, 4}).to_sparse()));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { sparse.get(); }),
              AllOf(HasSubstr("input observation"), HasSubstr("expected a dense (strided) tensor")));
  auto meta = batcher.submit(observation(at::empty({1, 4}, at::TensorOptions().device(at::kMeta))));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { meta.get(); }),
              AllOf(HasSubstr("input observation"), HasSubstr("meta device")));
  EXPECT_EQ(batcher.stats().rejected, 2);
  EXPECT_EQ(batcher.stats().batches, 0);
}

TEST(BatchingActorTest, MaxEnvsBoundsTheKeptStateAndResetEvicts) {
  BatchingActor batcher(load_actor(kGru), BatchingActorOptions().max_envs(2));
  auto step = [&](int64_t id) {
    return batcher.submit(observation(at::zeros({1, 4})), BatchingRequest().env_ids(at::full({1}, id, at::kLong)));
  };
  auto first = step(0);
  auto second = step(1);
  ASSERT_TRUE(ready(first) && ready(second));
  EXPECT_NO_THROW(first.get());
  EXPECT_NO_THROW(second.get());
  auto third = step(2);
  ASSERT_TRUE(ready(third));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { third.get(); }),
              AllOf(HasSubstr("environment 2 is new"), HasSubstr("max_envs = 2"), HasSubstr("reset(env_ids)")));
  auto known = step(1);  // a kept environment still steps
  ASSERT_TRUE(ready(known));
  EXPECT_NO_THROW(known.get());
  batcher.reset(at::full({1}, int64_t{0}, at::kLong));
  auto after_reset = step(2);
  ASSERT_TRUE(ready(after_reset));
  EXPECT_NO_THROW(after_reset.get());
}

TEST(BatchingActorTest, TheLargestMaxDelayWaitsForMinBatchSize) {
  BatchingActor batcher(load_actor(kCartPole),
                        BatchingActorOptions().min_batch_size(2).max_delay(std::chrono::microseconds::max()));
  auto first = batcher.submit(observation(at::zeros({1, 4})));
  // Waits for a second row (a max_delay that overflowed ran it at once).
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  auto second = batcher.submit(observation(at::zeros({1, 4})));
  ASSERT_TRUE(ready(first) && ready(second));
  EXPECT_EQ(batcher.stats().batches, 1);
}

TEST(BatchingActorTest, ANonFiniteRowIsRejectedAtSubmitNamingTheKeyAndRow) {
  BatchingActor batcher(load_actor(kCartPole));
  at::Tensor obs = at::zeros({3, 4});
  obs[2][1] = std::numeric_limits<float>::infinity();
  auto bad = batcher.submit(observation(obs));
  ASSERT_EQ(bad.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_THAT(error_of<std::invalid_argument>([&] { bad.get(); }),
              AllOf(HasSubstr("BatchingActor.submit: input \"observation\" has inf in row 2"),
                    HasSubstr("expected finite values")));
  EXPECT_EQ(batcher.stats().rejected, 1);
}

TEST(BatchingActorTest, BadOptionsAndANullActorAreErrors) {
  auto actor = load_actor(kCartPole);
  EXPECT_THAT(error_of<std::invalid_argument>([&] { BatchingActor(nullptr); }), HasSubstr("null"));
  EXPECT_THAT(error_of<std::invalid_argument>(
                  [&] { BatchingActor(actor, BatchingActorOptions().max_batch_size(8).min_batch_size(9)); }),
              HasSubstr("min_batch_size must be in [1, max_batch_size = 8], not 9"));
  EXPECT_THAT(error_of<std::invalid_argument>(
                  [&] { BatchingActor(actor, BatchingActorOptions().max_batch_size(8).max_queue_rows(4)); }),
              HasSubstr("max_queue_rows (4) must be at least max_batch_size (8)"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { BatchingActor(actor, BatchingActorOptions().max_envs(0)); }),
              HasSubstr("max_envs must be at least 1, not 0"));
  auto bad = BatchingActor::load(kCartPole, {}, BatchingActorOptions().max_batch_size(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("max_batch_size must be at least 1"));
  EXPECT_FALSE(BatchingActor::load("policies/missing.pbtxt").ok());
}

}  // namespace
}  // namespace tdp::actor
