// Concurrency soak: 16 threads act for a bounded time (TDP_SOAK_SECONDS, default 5) on actors
// shared by all of them and on actors of their own, loaded from policies/, each call under a
// thread-local interaction-type scope it picks at random (InteractionTypeGuard(type,
// /*thread_local_only=*/true)), at batch sizes on both sides of the fused plan's limit, while
// the recurrent actors' environments are reset. Checked on every call: the thread's scope is
// still its own afterwards, the outputs have the declared keys and batch size, deterministic
// calls on the shared actors repeat what one thread computed before the soak started (bit for
// bit), and a per-thread recurrent actor reset before a deterministic call repeats its first step
// exactly. Run it under --config=tsan (.bazelrc) to look for data races (LibTorch is not
// instrumented: .bazelrc's tsan config says what TSan ignores there and why).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/policy/keys.h"
#include "tdpolicy/spec.pb.h"
#include "tests/testing/status_matchers.h"

namespace tdp::actor {
namespace {

using nn::InteractionType;

constexpr int kThreads = 16;
const char* const kStateless[] = {"policies/cartpole_categorical.pbtxt", "policies/pendulum_tanh_gaussian.pbtxt",
                                  "policies/goal_hybrid.pbtxt"};
const char* const kRecurrent = "policies/recurrent_gru.pbtxt";
// The types every policy here has (a categorical has no median, a tanh_normal no mode: act()
// throws for those, as tensordict does).
constexpr InteractionType kTypes[] = {InteractionType::kRandom, InteractionType::kDeterministic};

double soak_seconds() {
  const char* env = std::getenv("TDP_SOAK_SECONDS");
  return env != nullptr && *env != '\0' ? std::atof(env) : 5.0;
}

// An observation of the declared inputs (recurrent state keys left to the actor) at `batch`.
TensorDict observation(const Actor& actor, int64_t batch, at::Generator& generator) {
  const std::vector<NestedKey> state = policy::state_keys(actor.spec());
  TensorDict td(std::vector<int64_t>{batch});
  for (const auto& input : actor.spec().inputs()) {
    auto key = policy::parse_key(input.key());
    EXPECT_TRUE(key.ok()) << input.key();
    if (!key.ok()) continue;
    bool is_state = false;
    for (const NestedKey& s : state) is_state = is_state || s == *key;
    if (is_state) continue;
    std::vector<int64_t> shape{batch};
    shape.insert(shape.end(), input.shape().begin(), input.shape().end());
    td.set(*key, at::randn(shape, generator));
  }
  return td;
}

std::vector<NestedKey> output_keys(const Actor& actor) {
  std::vector<NestedKey> keys;
  for (const auto& key : actor.spec().output_keys()) keys.push_back(*policy::parse_key(key));
  return keys;
}

// Every output key present with the batch in front; false (with a test failure) otherwise.
bool check_outputs(const Actor& actor, const TensorDict& out, int64_t batch, const std::string& what) {
  for (const NestedKey& key : output_keys(actor)) {
    if (!out.contains(key)) {
      ADD_FAILURE() << what << ": output " << key << " missing";
      return false;
    }
    const at::Tensor value = out.get(key);
    if (value.dim() == 0 || value.size(0) != batch) {
      ADD_FAILURE() << what << ": output " << key << " has shape " << value.sizes() << ", batch " << batch;
      return false;
    }
  }
  return true;
}

bool same(const Actor& actor, const TensorDict& a, const TensorDict& b) {
  for (const NestedKey& key : output_keys(actor)) {
    if (!a.get(key).equal(b.get(key))) return false;
  }
  return true;
}

TEST(ActorSoak, SixteenThreadsOnSharedAndOwnActorsWithThreadLocalScopes) {
  at::set_num_threads(1);  // intra-op threads would only add LibTorch's own pool to the picture
  std::vector<std::unique_ptr<Actor>> shared;
  for (const char* path : kStateless) {
    ASSERT_OK_AND_ASSIGN(auto actor, Actor::load(path, ActorOptions().seed(1)));
    shared.push_back(std::move(actor));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Actor> shared_recurrent, Actor::load(kRecurrent, ActorOptions().seed(2)));

  // References, computed by this thread alone: a deterministic call per shared actor on a fixed
  // observation, at a fused batch (4) and a LibTorch one (100).
  struct Reference {
    TensorDict observation;
    TensorDict output;
  };
  std::vector<std::map<int64_t, Reference>> references(shared.size());
  at::Generator reference_generator = at::make_generator<at::CPUGeneratorImpl>(7);
  for (size_t i = 0; i < shared.size(); ++i) {
    for (int64_t batch : {4, 100}) {
      TensorDict obs = observation(*shared[i], batch, reference_generator);
      TensorDict out = shared[i]->act(obs, InteractionType::kDeterministic);
      ASSERT_TRUE(check_outputs(*shared[i], out, batch, kStateless[i]));
      references[i].emplace(batch, Reference{obs, out});
    }
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(soak_seconds());
  std::atomic<int64_t> calls{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(100 + t);
      auto own_or = Actor::load(kStateless[t % 3], ActorOptions().seed(t));
      auto recurrent_or = Actor::load(kRecurrent, ActorOptions().seed(t));
      if (!own_or.ok() || !recurrent_or.ok()) {
        ADD_FAILURE() << "thread " << t << " could not load its actors";
        ++failures;
        return;
      }
      std::unique_ptr<Actor> own = std::move(*own_or);
      std::unique_ptr<Actor> recurrent = std::move(*recurrent_or);
      // This thread's recurrent actor, first step from zeros, deterministic: the reference a
      // reset must bring back.
      const TensorDict recurrent_obs = observation(*recurrent, 4, generator);
      const TensorDict first_step = recurrent->act(recurrent_obs, InteractionType::kDeterministic);
      int64_t n = 0;
      // One call (or reset) of a kind chosen at random; failures are counted, exceptions propagate.
      auto step = [&](const std::string& what, InteractionType type) {
        switch (rng() % 5) {
          case 0: {  // a shared actor, checked against the reference when deterministic
            const size_t i = rng() % shared.size();
            const int64_t batch = rng() % 2 == 0 ? 4 : 100;
            const Reference& ref = references[i].at(batch);
            if (type == InteractionType::kDeterministic) {
              const TensorDict out = shared[i]->act(ref.observation, type);
              if (!same(*shared[i], out, ref.output)) {
                ADD_FAILURE() << what << ": shared " << kStateless[i] << " at batch " << batch
                              << " differs from the single-threaded reference";
                ++failures;
              }
            } else {
              const TensorDict out = shared[i]->act(ref.observation, type);
              if (!check_outputs(*shared[i], out, batch, what)) ++failures;
            }
            break;
          }
          case 1: {  // this thread's stateless actor, at a random batch, under the scope only
            const int64_t batch = 1 + static_cast<int64_t>(rng() % 80);
            const TensorDict out = own->act(observation(*own, batch, generator), std::nullopt, generator);
            if (!check_outputs(*own, out, batch, what)) ++failures;
            break;
          }
          case 2: {  // this thread's recurrent actor: a step, sometimes a reset of some envs
            const TensorDict out = recurrent->act(observation(*recurrent, 4, generator), type);
            if (!check_outputs(*recurrent, out, 4, what)) ++failures;
            if (rng() % 3 == 0) recurrent->reset(at::rand({4}, generator) < 0.5);
            break;
          }
          case 3: {  // reset everything, then the first step again must repeat exactly
            recurrent->reset(at::ones({4}, at::kBool));
            const TensorDict out = recurrent->act(recurrent_obs, InteractionType::kDeterministic);
            if (!same(*recurrent, out, first_step)) {
              ADD_FAILURE() << what << ": the recurrent actor after reset differs from its first step";
              ++failures;
            }
            break;
          }
          default: {  // the shared recurrent actor: steps and resets from every thread
            const TensorDict out = shared_recurrent->act(observation(*shared_recurrent, 4, generator), type);
            if (!check_outputs(*shared_recurrent, out, 4, what)) ++failures;
            if (rng() % 4 == 0) shared_recurrent->reset(at::rand({4}, generator) < 0.5);
            break;
          }
        }
      };
      while (std::chrono::steady_clock::now() < deadline && failures.load() == 0) {
        const InteractionType type = kTypes[rng() % 2];
        nn::InteractionTypeGuard scope(type, /*thread_local_only=*/true);
        const std::string what = "thread " + std::to_string(t) + " call " + std::to_string(n);
        try {
          step(what, type);
        } catch (const std::exception& error) {
          ADD_FAILURE() << what << " threw: " << error.what();
          ++failures;
        }
        // The scope is this thread's: no other thread's guard changed it.
        if (nn::interaction_type() != type) {
          ADD_FAILURE() << what << ": the thread-local interaction type changed under the call";
          ++failures;
        }
        ++n;
      }
      calls += n;
      if (n == 0 && failures.load() == 0) {
        ADD_FAILURE() << "thread " << t << " made no call";
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(calls.load(), kThreads);
  std::printf("soak: %lld calls from %d threads in %.1f s\n", static_cast<long long>(calls.load()), kThreads,
              soak_seconds());
}

// Threads sharing one recurrent actor at different batch sizes: each call's kept state is sized
// for its own batch, so a call that finishes after another batch size took the state over keeps
// its own next state (the last call to finish wins) instead of failing after the policy ran.
TEST(ActorSoak, SharedRecurrentActorAtMixedBatchSizesNeverFailsAfterThePolicyRan) {
  for (const Backend backend : {Backend::kLibTorch, Backend::kFused}) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Actor> shared, Actor::load(kRecurrent, ActorOptions().seed(3).backend(backend)));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        at::Generator generator = at::detail::createCPUGenerator(100 + t);
        const int64_t batch = 1 + t % 3;
        for (int i = 0; i < 400 && failures.load() == 0; ++i) {
          try {
            const TensorDict out = shared->act(observation(*shared, batch, generator), InteractionType::kRandom);
            if (!check_outputs(*shared, out, batch, "shared recurrent")) failures.fetch_add(1);
          } catch (const std::exception& error) {
            ADD_FAILURE() << "thread " << t << " batch " << batch << " call " << i << ": " << error.what();
            failures.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(failures.load(), 0);
  }
}

}  // namespace
}  // namespace tdp::actor
