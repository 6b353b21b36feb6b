// Actor::act_into: the outputs of act() written into the caller's TensorDict, in place where its
// tensors can take them, on every CPU backend: the same values as act() for the same stream, the
// same tensors from call to call, what it replaces and what it leaves alone, and that a call that
// fails leaves the caller's tensors as they were. And act()'s own reuse on the fused plan: a
// tensor it returned is written again only once the caller has dropped every reference to it.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sdk/actor/actor.h"
#include "tests/actor/actor_specs.h"
#include "tests/testing/error_of.h"
#include "tests/testing/files.h"
#include "tests/testing/status_matchers.h"

namespace tdp::actor {
namespace {

using ::testing::HasSubstr;
using nn::InteractionType;
using test_specs::kRecurrent;

absl::StatusOr<std::unique_ptr<Actor>> load(const char* text, ActorOptions options) {
  const std::string path = test_util::temp_path("act_into.pbtxt");
  test_util::write_file(path, text);
  return Actor::load(path, options);
}

TensorDict observations(int64_t n, int seed) {
  at::manual_seed(seed);
  return TensorDict({{"observation", at::randn({n, 4})}}, {n});
}

void expect_same_entries(const TensorDict& got, const TensorDict& want) {
  ASSERT_EQ(got.keys(), want.keys());
  for (const NestedKey& key : want.keys()) {
    EXPECT_TRUE(got.get(key).equal(want.get(key))) << key.to_string();
  }
}

// Two actors of the same seed, one called with act() and one with act_into(): their streams stay
// in step, so every call returns the same draws. From the second call on, out's tensors are the
// ones the first call put there.
TEST(ActIntoTest, GivesActsOutputsIntoTheSameTensorsOnEveryCpuBackend) {
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    SCOPED_TRACE(backend == Backend::kFused ? "fused" : "libtorch");
    for (int64_t batch : {1, 7, 300}) {
      ASSERT_OK_AND_ASSIGN(auto acting, load(test_specs::kCategorical, ActorOptions().backend(backend).seed(4)));
      ASSERT_OK_AND_ASSIGN(auto writing, load(test_specs::kCategorical, ActorOptions().backend(backend).seed(4)));
      TensorDict out;
      std::vector<const void*> data;
      for (int call = 0; call < 3; ++call) {
        const TensorDict obs = observations(batch, call);
        const TensorDict want = acting->act(obs);
        writing->act_into(obs, out);
        EXPECT_EQ(out.batch_size(), obs.batch_size());
        expect_same_entries(out, want);
        std::vector<const void*> now;
        for (const NestedKey& key : out.keys()) now.push_back(out.get(key).const_data_ptr());
        if (call > 0) {
          EXPECT_EQ(now, data) << "call " << call << " at batch " << batch;
        }
        data = now;
      }
      // Deterministic calls too, by the per-call type.
      const TensorDict obs = observations(batch, 9);
      writing->act_into(obs, out, InteractionType::kDeterministic);
      expect_same_entries(out, acting->act(obs, InteractionType::kDeterministic));
    }
  }
}

TEST(ActIntoTest, ActWritesIntoATensorItReturnedOnlyOnceNothingElseRefersToIt) {
  ASSERT_OK_AND_ASSIGN(auto actor, load(test_specs::kCategorical, ActorOptions().backend(Backend::kFused).seed(4)));
  ASSERT_OK_AND_ASSIGN(auto reference, load(test_specs::kCategorical, ActorOptions().backend(Backend::kFused).seed(4)));
  std::vector<TensorDict> wants;
  auto call = [&](int seed) {
    const TensorDict obs = observations(1, seed);
    TensorDict want = reference->act(obs);
    wants.push_back(want);  // kept: the reference actor never recycles these
    TensorDict got = actor->act(obs);
    expect_same_entries(got, want);
    return got;
  };
  auto data = [](const TensorDict& td) { return td.get("action").const_data_ptr(); };
  TensorDict first = call(0);
  const void* first_action = data(first);
  TensorDict second = call(1);  // `first` is held: a new tensor
  EXPECT_NE(data(second), first_action);
  // A view of the first call's action outlives it: its memory is never written again.
  const at::Tensor view = first.get("action").view({-1});
  const at::Tensor view_value = view.clone();
  first = TensorDict();
  for (int i = 2; i < 6; ++i) {
    const TensorDict later = call(i);
    EXPECT_NE(data(later), first_action);
  }
  EXPECT_TRUE(view.equal(view_value));
  // A tensor kept alone (its TensorDict dropped) is not written either.
  const at::Tensor kept = second.get("action_log_prob");
  const at::Tensor kept_value = kept.clone();
  second = TensorDict();
  for (int i = 6; i < 10; ++i) call(i);
  EXPECT_TRUE(kept.equal(kept_value));
  // Dropped entirely: the next call writes into the returned tensors, with the right values (on
  // a thread of its own: what a thread's calls returned is reused by that thread's calls only).
  std::thread([&] {
    const TensorDict obs_a = observations(1, 10), obs_b = observations(1, 11);
    const TensorDict want_a = reference->act(obs_a), want_b = reference->act(obs_b);  // held
    TensorDict a = actor->act(obs_a);
    expect_same_entries(a, want_a);
    const void* a_action = data(a);
    a = TensorDict();
    const TensorDict b = actor->act(obs_b);
    EXPECT_EQ(data(b), a_action);
    expect_same_entries(b, want_b);
  }).join();
  // At another batch size: the right shapes, nothing of batch 1 reused.
  const TensorDict obs = observations(5, 13);
  const TensorDict big = actor->act(obs);
  expect_same_entries(big, reference->act(obs));
  // What a thread keeps (the two actors' streams no longer in step): a small output until later
  // calls push it out, a large one not at all.
  std::thread([&] {
    auto kept_after_drop = [&](int64_t batch) {
      TensorDict got = actor->act(observations(batch, 14));
      const c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> weak(
          got.get("action").getIntrusivePtr());
      got = TensorDict();
      return !weak.expired();
    };
    EXPECT_TRUE(kept_after_drop(1));
    EXPECT_FALSE(kept_after_drop(4096));  // 32 KiB of int64 actions
  }).join();
}

// An entry that cannot take its output in place (another dtype, another shape, not contiguous,
// recording a gradient) is replaced, the caller's tensor untouched; an entry the call does not
// return stays. A tensor made outside inference mode and written in place counts the write.
TEST(ActIntoTest, ReplacesWhatCannotTakeTheOutputAndLeavesTheRestAlone) {
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    SCOPED_TRACE(backend == Backend::kFused ? "fused" : "libtorch");
    ASSERT_OK_AND_ASSIGN(auto actor, load(test_specs::kCategorical, ActorOptions().backend(backend)));
    const TensorDict obs = observations(3, 1);
    const TensorDict want = actor->act(obs, InteractionType::kDeterministic);
    const at::Tensor extra = at::full({3, 2}, 5.0);
    for (const at::Tensor& unfit : {at::full({3}, 7.0), at::full({3, 1}, 7L), at::full({3, 2}, 7L).select(1, 0),
                                    at::full({3}, 7.0).to(at::kLong).requires_grad_(false)}) {
      const bool fits = unfit.scalar_type() == at::kLong && unfit.dim() == 1 && unfit.is_contiguous();
      const at::Tensor log_prob = at::zeros({3});  // a normal tensor: written in place
      const auto version = log_prob._version();
      TensorDict out({{"action", unfit}, {"action_log_prob", log_prob}, {"extra", extra}}, {3});
      actor->act_into(obs, out, InteractionType::kDeterministic);
      EXPECT_TRUE(out.get("action").equal(want.get("action")));
      EXPECT_EQ(out.get("action").is_same(unfit), fits);
      if (!fits) {
        EXPECT_TRUE((unfit == 7).all().item<bool>()) << "the caller's tensor was written";
      }
      EXPECT_TRUE(out.get("action_log_prob").is_same(log_prob));
      EXPECT_TRUE(log_prob.equal(want.get("action_log_prob")));
      EXPECT_GT(log_prob._version(), version);
      EXPECT_TRUE(out.get("extra").is_same(extra));
    }
    const at::Tensor grad = at::zeros({3}).requires_grad_(true);
    TensorDict out({{"action_log_prob", grad}}, {3});
    actor->act_into(obs, out, InteractionType::kDeterministic);
    EXPECT_FALSE(out.get("action_log_prob").is_same(grad));
    EXPECT_TRUE((grad == 0).all().item<bool>());
    // A TensorDict where an output goes is an error naming the key, before anything is written.
    TensorDict nested({{"action_log_prob", at::zeros({3})}}, {3});
    nested.set("action", TensorDict({{"x", at::zeros({3})}}, {3}));
    EXPECT_THAT(test_util::error_of<std::invalid_argument>(
                    [&] { actor->act_into(obs, nested, InteractionType::kDeterministic); }),
                HasSubstr("action"));
    EXPECT_TRUE((nested.get("action_log_prob") == 0).all().item<bool>());
  }
}

// The tensors a call makes are inference tensors on every CPU backend, as LibTorch's path makes
// them under inference mode: act()'s, and those act_into sets beside the caller's own tensors,
// which stay as they were made.
TEST(ActIntoTest, TheTensorsACallMakesAreInferenceTensorsOnEveryCpuBackend) {
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    SCOPED_TRACE(backend == Backend::kFused ? "fused" : "libtorch");
    ASSERT_OK_AND_ASSIGN(auto actor, load(test_specs::kCategorical, ActorOptions().backend(backend)));
    const TensorDict obs = observations(3, 1);
    const TensorDict acted = actor->act(obs);
    for (const NestedKey& key : acted.keys()) EXPECT_TRUE(acted.get(key).is_inference()) << key.to_string();
    const at::Tensor log_prob = at::zeros({3});
    TensorDict out({{"action_log_prob", log_prob}}, {3});
    actor->act_into(obs, out);
    EXPECT_TRUE(out.get("action").is_inference());
    EXPECT_TRUE(out.get("action_log_prob").is_same(log_prob));
    EXPECT_FALSE(log_prob.is_inference());
    EXPECT_FALSE(c10::InferenceMode::is_enabled()) << "the call left inference mode on";
  }
}

// An out tensor that shares memory with the observation is replaced, not written: the
// observation is never modified (also through another view of its memory). The observation given
// as `out` itself receives the outputs beside its own entries (tensordict's in-place style).
TEST(ActIntoTest, NeverWritesTheObservation) {
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    SCOPED_TRACE(backend == Backend::kFused ? "fused" : "libtorch");
    ASSERT_OK_AND_ASSIGN(auto actor, load(test_specs::kCategorical, ActorOptions().backend(backend)));
    // Every other float of a buffer: a non-contiguous observation, and a [3] buffer in its gaps.
    const at::Tensor memory = at::randn({3 * 4 * 2});
    TensorDict obs({{"observation", memory.view({3, 4, 2}).select(2, 0)}}, {3});
    const at::Tensor before = memory.clone();
    for (const at::Tensor& aliasing : {memory.narrow(0, 1, 3), memory.narrow(0, 19, 3)}) {
      TensorDict out({{"action_log_prob", aliasing}}, {3});
      actor->act_into(obs, out, InteractionType::kDeterministic);
      EXPECT_FALSE(out.get("action_log_prob").is_same(aliasing));
      EXPECT_TRUE(memory.equal(before));
    }
    const TensorDict want = actor->act(obs, InteractionType::kDeterministic);
    actor->act_into(obs, obs, InteractionType::kDeterministic);
    EXPECT_EQ(obs.keys(), (std::vector<NestedKey>{"observation", "action", "action_log_prob"}));
    EXPECT_TRUE(memory.equal(before));
    EXPECT_TRUE(obs.get("action").equal(want.get("action")));
  }
}

// One buffer given for two outputs is written as one of them at most: the other gets a tensor
// of its own, and both hold act()'s values (Pendulum: action [n, 1] and its log-prob [n]).
TEST(ActIntoTest, OneBufferGivenForTwoOutputsTakesOneOfThem) {
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    SCOPED_TRACE(backend == Backend::kFused ? "fused" : "libtorch");
    auto actor = Actor::load("policies/pendulum_tanh_gaussian.pbtxt",
                             ActorOptions().backend(backend).interaction_type(InteractionType::kDeterministic));
    ASSERT_TRUE(actor.ok()) << actor.status();
    at::manual_seed(8);
    const TensorDict obs({{"observation", at::randn({5, 3})}}, {5});
    const TensorDict want = (*actor)->act(obs);
    const at::Tensor buffer = at::zeros({5});
    TensorDict out({{"action", buffer.view({5, 1})}, {"action_log_prob", buffer}}, {5});
    (*actor)->act_into(obs, out);
    expect_same_entries(out, want);
    EXPECT_NE(out.get("action").const_data_ptr(), out.get("action_log_prob").const_data_ptr());
  }
}

// A wrong batch size, a bad observation and a call that cannot draw are errors that leave out's
// entries and their values as they were.
TEST(ActIntoTest, ACallThatFailsLeavesOutAsItWas) {
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    SCOPED_TRACE(backend == Backend::kFused ? "fused" : "libtorch");
    ASSERT_OK_AND_ASSIGN(auto actor, load(test_specs::kCategorical, ActorOptions().backend(backend)));
    TensorDict out;
    actor->act_into(observations(3, 3), out);
    const at::Tensor action = out.get("action"), log_prob = out.get("action_log_prob");
    const at::Tensor action_before = action.clone(), log_prob_before = log_prob.clone();
    auto unchanged = [&] {
      EXPECT_EQ(out.keys(), (std::vector<NestedKey>{"action", "action_log_prob"}));
      EXPECT_TRUE(out.get("action").is_same(action) && out.get("action_log_prob").is_same(log_prob));
      EXPECT_TRUE(action.equal(action_before) && log_prob.equal(log_prob_before));
    };
    EXPECT_THAT(test_util::error_of<std::invalid_argument>([&] { actor->act_into(observations(2, 4), out); }),
                HasSubstr("Actor.act_into: out has batch size [3] but the observation has [2]"));
    unchanged();
    TensorDict bad = observations(3, 5);
    bad.get("observation")[1][2] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THAT(test_util::error_of<std::invalid_argument>([&] { actor->act_into(bad, out); }),
                HasSubstr("Actor.act_into: input \"observation\" has nan in row 1"));
    unchanged();
    TensorDict wrong({{"observation", at::randn({3, 5})}}, {3});
    EXPECT_THROW(actor->act_into(wrong, out), std::invalid_argument);
    unchanged();
  }
}

// The kept recurrent state moves on as with act(). The actor keeps its own copy: out's tensors
// are the caller's, to overwrite (or, from the C API, to free) after the call.
TEST(ActIntoTest, KeepsTheRecurrentStateAsActDoes) {
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    SCOPED_TRACE(backend == Backend::kFused ? "fused" : "libtorch");
    ASSERT_OK_AND_ASSIGN(auto acting, load(kRecurrent, ActorOptions().backend(backend)));
    ASSERT_OK_AND_ASSIGN(auto writing, load(kRecurrent, ActorOptions().backend(backend)));
    const at::Tensor hidden = at::zeros({5, 8});
    TensorDict out({{"action", at::zeros({5, 2})}, {"hidden", hidden}}, {5});
    for (int call = 0; call < 4; ++call) {
      const TensorDict obs = observations(5, 10 + call);
      const TensorDict want = acting->act(obs);
      writing->act_into(obs, out);
      expect_same_entries(out, want);
      EXPECT_TRUE(out.get("hidden").is_same(hidden));
      hidden.fill_(123.0f);
    }
  }
}

// With return_all_entries, out receives every entry act() returns: the observation's too.
TEST(ActIntoTest, ReturnAllEntriesGivesActsEntries) {
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    SCOPED_TRACE(backend == Backend::kFused ? "fused" : "libtorch");
    ASSERT_OK_AND_ASSIGN(auto actor,
                         load(test_specs::kCategorical, ActorOptions().backend(backend).return_all_entries(true)));
    const TensorDict obs = observations(4, 6);
    const TensorDict want = actor->act(obs, InteractionType::kDeterministic);
    TensorDict out;
    actor->act_into(obs, out, InteractionType::kDeterministic);
    expect_same_entries(out, want);
    EXPECT_TRUE(out.get("observation").is_same(obs.get("observation")));
  }
}

}  // namespace
}  // namespace tdp::actor
