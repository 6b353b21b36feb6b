// The fused CPU plan (sdk/fused) against the LibTorch path: the same outputs for deterministic
// interaction types, the right sampling statistics, reproducible seeded streams on any thread
// count, no heap allocation per flat call, and load errors that name the module.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/fused/math.h"
#include "sdk/fused/philox.h"
#include "sdk/fused/plan.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/probabilistic_sequential.h"
#include "sdk/policy/policy.h"
#include "tdpolicy/spec.pb.h"
#include "tests/testing/files.h"
#include "tests/testing/status_matchers.h"

// ---- a heap-allocation counter for this binary --------------------------------------------
namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace
void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace tdp::fused {
namespace {

using actor::Actor;
using actor::ActorOptions;
using actor::Backend;
using nn::InteractionType;

std::string policy_path(const std::string& name) { return tdp::test_util::runfile("policies/" + name); }

// The float32 inputs of a call: {key, width} (the observation, a recurrent state...).
using Inputs = std::vector<std::pair<NestedKey, int64_t>>;

std::unique_ptr<Actor> load_spec_text(const std::string& text, ActorOptions options) {
  tdpolicy::PolicySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  // Built under the actor's aggregation mode, as Actor::load does.
  std::optional<nn::CompositeLpAggregateGuard> mode;
  if (options.composite_lp_aggregate()) mode.emplace(*options.composite_lp_aggregate(), /*thread_local_only=*/true);
  auto policy = policy::build_policy(spec, "test", ".");
  EXPECT_TRUE(policy.ok()) << policy.status();
  if (!policy.ok()) return nullptr;
  return std::make_unique<Actor>(*std::move(policy), options);
}

// A policy file's spec with its init_seed replaced: the same policy with other random weights.
std::string reseeded(const std::string& name, uint64_t seed) {
  std::ifstream file(policy_path(name));
  std::stringstream text;
  text << file.rdbuf();
  std::string spec = text.str();
  const size_t at = spec.find("init_seed: 0");
  EXPECT_NE(at, std::string::npos) << name;
  if (at != std::string::npos) spec.replace(at, 12, "init_seed: " + std::to_string(seed));
  return spec;
}

// A recurrent (LSTM) Gaussian policy: (observation [5], h [8], c [8]) -> LstmCell -> h, c;
// Mlp(16) -> NormalParamExtractor -> Normal [2].
std::string lstm_spec(uint64_t seed) {
  return "name: 'lstm' inputs { key: 'observation' shape: 5 }\n"
         "inputs { key: 'h' shape: 8 } inputs { key: 'c' shape: 8 }\n"
         "output_keys: 'action' output_keys: 'action_log_prob' output_keys: 'h' output_keys: 'c'\n"
         "module { sequential {\n"
         "  modules { network { in_keys: ['observation', 'h', 'c'] out_keys: ['h', 'c'] network { lstm_cell { "
         "input_size: 5 hidden_size: 8 } } } overwrite_keys: ['h', 'c'] }\n"
         "  modules { network { in_keys: 'h' out_keys: 'params' network { mlp { in_features: 8 hidden_sizes: [16] "
         "out_features: 4 activation: 'tanh' } } } }\n"
         "  modules { network { in_keys: 'params' out_keys: ['loc', 'scale'] network { normal_param_extractor { } } "
         "} }\n"
         "  modules { probabilistic { in_keys: ['loc', 'scale'] out_keys: 'action' distribution: 'normal' "
         "return_log_prob: true log_prob_key: 'action_log_prob' } }\n"
         "} }\ninit_seed: " +
         std::to_string(seed);
}

const Inputs kGruInputs = {{"observation", 4}, {"hidden", 32}};
const Inputs kLstmInputs = {{"observation", 5}, {"h", 8}, {"c", 8}};

// A random-weight spec: obs [5] -> network modules -> head.
std::string mlp_spec(const std::string& activation, bool layer_norm, const std::string& head_modules,
                     int64_t out_features, uint64_t seed) {
  return "name: 'random' inputs { key: 'observation' shape: 5 }\n"
         "output_keys: 'action' output_keys: 'action_log_prob'\n"
         "module { probabilistic_sequential {\n"
         "  modules { network { in_keys: 'observation' out_keys: 'params' network { mlp { in_features: 5 "
         "hidden_sizes: [16, 8] out_features: " +
         std::to_string(out_features) + " activation: '" + activation + "' layer_norm: " +
         (layer_norm ? "true" : "false") + " } } } }\n" + head_modules + "} }\ninit_seed: " + std::to_string(seed);
}

const char* kCategoricalHead =
    "modules { probabilistic { in_keys_map { name: 'logits' key: 'params' } out_keys: 'action' distribution: "
    "'categorical' return_log_prob: true "
    "log_prob_key: 'action_log_prob' } }";
const char* kOneHotHead =
    "modules { probabilistic { in_keys_map { name: 'logits' key: 'params' } out_keys: 'action' distribution: "
    "'one_hot_categorical' return_log_prob: true log_prob_key: 'action_log_prob' } }";
const char* kBernoulliHead =
    "modules { network { in_keys: 'params' out_keys: 'probs' network { mapping { name: 'biased_softplus_0.3_0.1' } } } }\n"
    "modules { network { in_keys: 'probs' out_keys: 'p' network { linear { in_features: 3 out_features: 3 } } } }\n"
    "modules { probabilistic { in_keys_map { name: 'logits' key: 'p' } out_keys: 'action' distribution: "
    "'bernoulli' return_log_prob: true log_prob_key: 'action_log_prob' } }";
const char* kNormalHead =
    "modules { network { in_keys: 'params' out_keys: ['loc', 'scale'] network { normal_param_extractor { "
    "scale_mapping: 'softplus' } } } }\n"
    "modules { probabilistic { in_keys: ['loc', 'scale'] out_keys: 'action' distribution: 'normal' "
    "return_log_prob: true log_prob_key: 'action_log_prob' } }";
const char* kIndependentNormalHead =
    "modules { network { in_keys: 'params' out_keys: ['loc', 'scale'] network { add_state_independent_normal_scale { "
    "scale_shape: 4 init_value: 0.3 } } } }\n"
    "modules { probabilistic { in_keys: ['loc', 'scale'] out_keys: 'action' distribution: 'independent_normal' "
    "distribution_kwargs { key: 'tanh_loc' value { bool_value: true } } return_log_prob: true log_prob_key: "
    "'action_log_prob' } }";
const char* kTanhNormalHead =
    "modules { network { in_keys: 'params' out_keys: ['loc', 'scale'] network { normal_param_extractor { "
    "scale_mapping: 'biased_softplus_0.5_0.05' } } } }\n"
    "modules { probabilistic { in_keys: ['loc', 'scale'] out_keys: 'action' distribution: 'tanh_normal' "
    "distribution_kwargs { key: 'low' value { double_value: -3.0 } } "
    "distribution_kwargs { key: 'high' value { double_value: 1.0 } } return_log_prob: true log_prob_key: "
    "'action_log_prob' } }";
const char* kDeltaHead =
    "modules { network { in_keys: 'params' out_keys: 'mapped' network { mapping { name: 'expln' } } } }\n"
    "modules { probabilistic { in_keys_map { name: 'param' key: 'mapped' } out_keys: 'action' "
    "distribution: 'delta' return_log_prob: true log_prob_key: 'action_log_prob' } }";

void expect_close(const at::Tensor& fused, const at::Tensor& reference, const std::string& what) {
  ASSERT_EQ(fused.sizes(), reference.sizes()) << what;
  ASSERT_EQ(fused.scalar_type(), reference.scalar_type()) << what;
  if (!fused.is_floating_point()) {
    EXPECT_TRUE(fused.equal(reference)) << what;
    return;
  }
  at::Tensor f = fused.to(at::kDouble), r = reference.to(at::kDouble);
  at::Tensor both_inf = f.isinf().logical_and(r.isinf()).logical_and(f.eq(r));
  at::Tensor ok = (f - r).abs().le(1e-5 + 1e-5 * r.abs()).logical_or(both_inf);
  EXPECT_TRUE(ok.all().item<bool>()) << what << ": max abs diff " << (f - r).abs().nan_to_num(0).max().item<double>()
                                     << "\nfused " << fused.flatten().slice(0, 0, 6) << "\nlibtorch "
                                     << reference.flatten().slice(0, 0, 6);
}

TensorDict random_inputs(const Inputs& inputs, int64_t batch) {
  TensorDict td({batch});
  for (const auto& [key, width] : inputs) td.set(key, at::randn({batch, width}) * 2);
  return td;
}

// The fused actor's act() equals the LibTorch actor's for every deterministic type it runs.
void expect_parity(const std::function<std::unique_ptr<Actor>(ActorOptions)>& make, const Inputs& inputs,
                   const std::string& name, ActorOptions options = ActorOptions()) {
  auto fused = make(ActorOptions(options).backend(Backend::kFused).run_self_tests(false));
  auto reference = make(ActorOptions(options).backend(Backend::kLibTorch).run_self_tests(false));
  ASSERT_TRUE(fused && reference);
  ASSERT_OK(fused->describe().fused_status);
  int checked = 0;
  for (int64_t batch : {1, 7, 64, 1000}) {
    at::manual_seed(batch);
    TensorDict obs = random_inputs(inputs, batch);
    for (InteractionType type : {InteractionType::kDeterministic, InteractionType::kMode, InteractionType::kMean,
                                 InteractionType::kMedian}) {
      if (!fused->describe().runs_fused(batch, type)) continue;
      ++checked;
      TensorDict a = fused->act(obs, type);
      TensorDict b = reference->act(obs, type);
      ASSERT_EQ(a.keys().size(), b.keys().size()) << name;
      for (const auto& key : b.keys()) {
        expect_close(a.get(key), b.get(key),
                     name + " batch " + std::to_string(batch) + " " + std::string(nn::to_string(type)) + " " +
                         key.to_string());
      }
    }
  }
  EXPECT_GT(checked, 0) << name;
}

TEST(FusedMath, FastTanhExpLogMatchStdTo1e6RelativeOverADenseRange) {
  double worst_tanh = 0, worst_exp = 0, worst_log = 0;
  for (float x = -30.0f; x < 30.0f; x += 3e-4f) {
    const double r = std::tanh(static_cast<double>(x));
    if (r != 0) worst_tanh = std::max(worst_tanh, std::abs(fast_tanh(x) - r) / std::abs(r));
  }
  for (float x = -87.0f; x < 88.0f; x += 1e-3f) {
    const double r = std::exp(static_cast<double>(x));
    worst_exp = std::max(worst_exp, std::abs(fast_exp(x) - r) / r);
  }
  for (float x = 1e-30f; x < 1e30f; x *= 1.0001f) {
    const double r = std::log(static_cast<double>(x));
    if (r != 0) worst_log = std::max(worst_log, std::abs(fast_log(x) - r) / std::abs(r));
  }
  EXPECT_LT(worst_tanh, 1e-6);
  EXPECT_LT(worst_exp, 1e-6);
  EXPECT_LT(worst_log, 1e-6);
  EXPECT_EQ(fast_tanh(0.0f), 0.0f);
  EXPECT_EQ(fast_tanh(100.0f), 1.0f);
}

TEST(FusedPhilox, MatchesTheRandom123KnownAnswer) {
  const auto zero = Philox4x32(0)({0, 0, 0, 0});
  EXPECT_EQ(zero[0], 0x6627e8d5u);
  EXPECT_EQ(zero[1], 0xe169c58du);
  EXPECT_EQ(zero[2], 0xbc57ac4cu);
  EXPECT_EQ(zero[3], 0x9b00dbd8u);
}

TEST(FusedParity, CartpoleCategoricalEqualsLibTorchAtBatch1_7_64_1000) {
  expect_parity([](ActorOptions o) { return Actor::load(policy_path("cartpole_categorical.pbtxt"), o).value(); },
                {{"observation", 4}}, "cartpole");
  // Aggregated, the log-prob goes to "sample_log_prob" and the spec's "action_log_prob" is not written.
  expect_parity([](ActorOptions o) { return Actor::load(policy_path("cartpole_categorical.pbtxt"), o).value(); },
                {{"observation", 4}}, "cartpole, aggregated", ActorOptions().composite_lp_aggregate(true));
}

TEST(FusedParity, PendulumTanhGaussianEqualsLibTorchAtBatch1_7_64_1000) {
  expect_parity([](ActorOptions o) { return Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt"), o).value(); },
                {{"observation", 3}}, "pendulum");
}

TEST(FusedParity, EveryActivationWithAndWithoutLayerNormEqualsLibTorch) {
  uint64_t seed = 1;
  for (const std::string activation : {"tanh", "relu", "elu", "gelu", "leaky_relu", "sigmoid", "softplus", "identity"}) {
    for (bool layer_norm : {false, true}) {
      const std::string text = mlp_spec(activation, layer_norm, kCategoricalHead, 3, seed++);
      expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, {{"observation", 5}},
                    activation + (layer_norm ? "+layer_norm" : ""));
    }
  }
}

TEST(FusedParity, EveryHeadEqualsLibTorch) {
  const std::vector<std::pair<std::string, std::pair<const char*, int64_t>>> heads = {
      {"categorical", {kCategoricalHead, 4}},
      {"one_hot_categorical", {kOneHotHead, 4}},
      {"bernoulli", {kBernoulliHead, 3}},
      {"normal", {kNormalHead, 6}},
      {"independent_normal", {kIndependentNormalHead, 4}},
      {"tanh_normal", {kTanhNormalHead, 4}},
      {"delta", {kDeltaHead, 3}}};
  uint64_t seed = 100;
  for (const auto& [name, head] : heads) {
    const std::string text = mlp_spec("tanh", false, head.first, head.second, seed++);
    expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, {{"observation", 5}}, name);
  }
}

TEST(FusedParity, LinearPolicyEqualsLibTorch) {
  const std::string text =
      "name: 'linear' inputs { key: 'observation' shape: 5 } output_keys: 'action' output_keys: 'action_log_prob'\n"
      "module { probabilistic_sequential {\n"
      "  modules { network { in_keys: 'observation' out_keys: 'params' network { linear { in_features: 5 "
      "out_features: 3 } } } }\n" +
      std::string(kCategoricalHead) +
      "} }\ninit_seed: 3";
  expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, {{"observation", 5}}, "linear");
}

// TorchRL's DQN actor (QValueActor: an MLP's action values, then the greedy action), optionally
// followed by its EGreedyModule.
std::string dqn_spec(const std::string& action_space, bool explore) {
  std::string text =
      "name: 'dqn' inputs { key: 'observation' shape: 5 }\n"
      "output_keys: 'action' output_keys: 'action_value' output_keys: 'chosen_action_value'\n"
      "module { sequential {\n"
      "  modules { network { in_keys: 'observation' out_keys: 'action_value' network { mlp { in_features: 5 "
      "hidden_sizes: [16] out_features: 4 activation: 'relu' } } } }\n"
      "  modules { q_value { action_space: '" +
      action_space + "' } }\n";
  if (explore) {
    text += "  modules { egreedy { eps: 0.5 spec { " + std::string(action_space == "one_hot" ? "one_hot" : "categorical") +
            " { n: 4 } } } }\n";
  }
  return text + "} }\ninit_seed: 9";
}

TEST(FusedParity, QValueActorsEqualLibTorch) {
  for (const std::string space : {"one_hot", "categorical"}) {
    for (bool explore : {false, true}) {
      const std::string text = dqn_spec(space, explore);
      expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, {{"observation", 5}},
                    "dqn " + space + (explore ? " egreedy" : ""));
    }
  }
}

TEST(FusedLowering, EGreedyLeavesRandomAndUntypedCallsToLibTorch) {
  auto actor = load_spec_text(dqn_spec("categorical", true), ActorOptions().run_self_tests(false));
  ASSERT_TRUE(actor);
  ASSERT_OK(actor->describe().fused_status);
  EXPECT_TRUE(actor->describe().runs_fused(1, InteractionType::kDeterministic));
  EXPECT_FALSE(actor->describe().runs_fused(1, InteractionType::kRandom));
  TensorDict obs = random_inputs({{"observation", 5}}, 2000);
  const at::Tensor greedy = actor->act(obs, InteractionType::kDeterministic).get("action");
  const at::Tensor explored = actor->act(obs, InteractionType::kRandom).get("action");
  // eps 0.5, a uniform action among 4: about 3/8 of the rows change.
  EXPECT_NEAR((explored != greedy).to(at::kDouble).mean().item<double>(), 0.375, 0.05);
}

// Recurrent policies in the stateless form (the state given with the observation): every
// output, the next state included, with the file's weights and random ones.
TEST(FusedParity, RecurrentGruEqualsLibTorchAtBatch1_7_64_1000) {
  for (uint64_t seed : {0, 5, 6}) {
    const std::string text = reseeded("recurrent_gru.pbtxt", seed);
    expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, kGruInputs,
                  "gru, init_seed " + std::to_string(seed));
  }
}

TEST(FusedParity, LstmEqualsLibTorchAtBatch1_7_64_1000) {
  for (uint64_t seed : {1, 2}) {
    const std::string text = lstm_spec(seed);
    expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, kLstmInputs,
                  "lstm, init_seed " + std::to_string(seed));
  }
}

// Composite heads write each part's sample and log-prob (and, aggregated, their sum) as LibTorch does.
TEST(FusedParity, GoalHybridCompositeEqualsLibTorchPerPartAndAggregated) {
  for (bool aggregate : {false, true}) {
    for (uint64_t seed : {0, 3}) {
      const std::string text = reseeded("goal_hybrid.pbtxt", seed);
      expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, {{"observation", 4}},
                    std::string("goal_hybrid, aggregate ") + (aggregate ? "true" : "false") + ", init_seed " +
                        std::to_string(seed),
                    ActorOptions().composite_lp_aggregate(aggregate));
    }
  }
}

// A composite of every lowerable kind, with part kwargs and a sample key other than the part's.
const char* kWideComposite = R"pb(
  name: 'wide'
  inputs { key: 'observation' shape: 5 }
  output_keys: [ 'a', 'b', 'c', 'd', 'e', 'f_action', 'g' ]
  output_keys: [ 'a_log_prob', 'b_log_prob', 'c_log_prob', 'd_log_prob', 'e_log_prob', 'f_action_log_prob' ]
  output_keys: 'g_log_prob'
  module {
    probabilistic_sequential {
      modules { network { in_keys: 'observation' out_keys: 'params/a/logits'
                          network { linear { in_features: 5 out_features: 3 } } } }
      modules { network { in_keys: 'observation' out_keys: 'params/b/logits'
                          network { linear { in_features: 5 out_features: 4 } } } }
      modules { network { in_keys: 'observation' out_keys: 'params/c/logits'
                          network { linear { in_features: 5 out_features: 2 } } } }
      modules { network { in_keys: 'observation' out_keys: 'dn'
                          network { mlp { in_features: 5 hidden_sizes: [ 8 ] out_features: 4 } } } }
      modules { network { in_keys: 'dn' out_keys: [ 'params/d/loc', 'params/d/scale' ]
                          network { normal_param_extractor {} } } }
      modules { network { in_keys: 'observation' out_keys: 'en'
                          network { linear { in_features: 5 out_features: 6 } } } }
      modules { network { in_keys: 'en' out_keys: [ 'params/e/loc', 'params/e/scale' ]
                          network { normal_param_extractor {} } } }
      modules { network { in_keys: 'observation' out_keys: 'params/f/param'
                          network { linear { in_features: 5 out_features: 2 } } } }
      modules { network { in_keys: 'observation' out_keys: 'gn'
                          network { linear { in_features: 5 out_features: 4 } } } }
      modules { network { in_keys: 'gn' out_keys: [ 'params/g/loc', 'params/g/scale' ]
                          network { normal_param_extractor {} } } }
      modules {
        probabilistic {
          in_keys: 'params'
          composite {
            parts { key: 'a' distribution: 'categorical' }
            parts { key: 'b' distribution: 'one_hot_categorical' }
            parts { key: 'c' distribution: 'bernoulli' }
            parts { key: 'd' distribution: 'normal' }
            parts {
              key: 'e'
              distribution: 'tanh_normal'
              kwargs { key: 'low' value { double_value: -2.0 } }
              kwargs { key: 'high' value { double_value: 3.0 } }
            }
            parts { key: 'f' distribution: 'delta' sample_key: 'f_action' }
            parts { key: 'g' distribution: 'independent_normal' }
          }
          return_log_prob: true
        }
      }
    }
  }
  init_seed: 4
)pb";

TEST(FusedParity, ACompositeOfEveryKindEqualsLibTorch) {
  for (bool aggregate : {false, true}) {
    expect_parity([&](ActorOptions o) { return load_spec_text(kWideComposite, o); }, {{"observation", 5}},
                  std::string("wide composite, aggregate ") + (aggregate ? "true" : "false"),
                  ActorOptions().composite_lp_aggregate(aggregate));
  }
}

// The kept state: a sequence of calls without the state, with resets in between, gives the
// same actions and states as the LibTorch actor.
void expect_same_sequence(const std::string& text, const Inputs& observation, const std::string& name) {
  auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused).seed(2));
  auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch).seed(2));
  ASSERT_TRUE(fused && reference);
  const int64_t batch = 7;
  ASSERT_TRUE(fused->describe().runs_fused(batch, InteractionType::kDeterministic)) << fused->describe().fused_status;
  at::manual_seed(11);
  for (int step = 0; step < 20; ++step) {
    if (step == 6 || step == 15) {
      at::Tensor mask = at::tensor({1, 0, 1, 0, 0, 0, 1}).to(at::kBool);
      if (step == 15) mask = mask.logical_not();
      fused->reset(mask);
      reference->reset(mask);
    }
    if (step == 11) {
      fused->reset();
      reference->reset();
    }
    const TensorDict obs = random_inputs(observation, batch);
    const TensorDict a = fused->act(obs, InteractionType::kDeterministic);
    const TensorDict b = reference->act(obs, InteractionType::kDeterministic);
    ASSERT_EQ(a.keys().size(), b.keys().size()) << name;
    for (const auto& key : b.keys()) {
      expect_close(a.get(key), b.get(key), name + " step " + std::to_string(step) + " " + key.to_string());
    }
  }
}

TEST(FusedRecurrent, TwentyStepsWithResetsKeepTheSameStateAsLibTorch) {
  expect_same_sequence(reseeded("recurrent_gru.pbtxt", 0), {{"observation", 4}}, "gru");
  expect_same_sequence(lstm_spec(3), {{"observation", 5}}, "lstm");
}

// A state given with the observation is used as given and leaves the kept one alone; part of
// it is the LibTorch path's error.
TEST(FusedRecurrent, AGivenStateIsUsedAsGivenAndAPartialOneIsAnError) {
  auto fused = load_spec_text(lstm_spec(3), ActorOptions().backend(Backend::kFused));
  auto reference = load_spec_text(lstm_spec(3), ActorOptions().backend(Backend::kLibTorch));
  ASSERT_TRUE(fused && reference);
  at::manual_seed(5);
  const TensorDict first = random_inputs({{"observation", 5}}, 3);
  fused->act(first, InteractionType::kDeterministic);
  reference->act(first, InteractionType::kDeterministic);
  const TensorDict given = random_inputs(kLstmInputs, 3);
  expect_close(fused->act(given, InteractionType::kDeterministic).get("h"),
               reference->act(given, InteractionType::kDeterministic).get("h"), "given state");
  // The kept state is still the one after `first`.
  const TensorDict next = random_inputs({{"observation", 5}}, 3);
  expect_close(fused->act(next, InteractionType::kDeterministic).get("c"),
               reference->act(next, InteractionType::kDeterministic).get("c"), "kept state");
  TensorDict partial = random_inputs({{"observation", 5}, {"h", 8}}, 3);
  EXPECT_THROW(fused->act(partial, InteractionType::kDeterministic), std::invalid_argument);
}

// Statistics of `draws` rows of one observation: per action dim mean and std.
std::pair<at::Tensor, at::Tensor> stats(const at::Tensor& draws) {
  at::Tensor d = draws.to(at::kDouble);
  return {d.mean(0), d.std(0)};
}

TEST(FusedSampling, MeanAndStdOver1e5DrawsMatchLibTorch) {
  const int64_t n = 100000;
  for (const std::string name : {"pendulum_tanh_gaussian.pbtxt", "cartpole_categorical.pbtxt"}) {
    auto fused = Actor::load(policy_path(name), ActorOptions().backend(Backend::kFused).seed(3)).value();
    auto reference = Actor::load(policy_path(name), ActorOptions().backend(Backend::kLibTorch).seed(3)).value();
    const int64_t d = fused->describe().flat_observation_size;
    at::Tensor row = at::linspace(-0.8, 0.6, d).to(at::kFloat);
    TensorDict obs({{"observation", row.expand({n, d}).contiguous()}}, {n});
    at::Tensor a = fused->act(obs, InteractionType::kRandom).get("action");
    at::Tensor b = reference->act(obs, InteractionType::kRandom).get("action");
    auto [ma, sa] = stats(a.reshape({n, -1}));
    auto [mb, sb] = stats(b.reshape({n, -1}));
    // 5 standard errors of the mean; std within 2%.
    EXPECT_TRUE(((ma - mb).abs() <= 5 * sb / std::sqrt(double(n)) + 1e-9).all().item<bool>())
        << name << " mean " << ma << " vs " << mb;
    EXPECT_TRUE(((sa - sb).abs() <= 0.02 * sb + 1e-9).all().item<bool>()) << name << " std " << sa << " vs " << sb;
  }
}

TEST(FusedSampling, NormalDrawsHaveTheHeadsLocAndScale) {
  const std::string text = mlp_spec("tanh", false, kNormalHead, 6, 42);
  auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused).return_all_entries(false));
  auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch).return_all_entries(true));
  const int64_t n = 100000;
  at::Tensor row = at::linspace(-1, 1, 5).to(at::kFloat);
  TensorDict one({{"observation", row.unsqueeze(0)}}, {1});
  TensorDict params = reference->act(one, InteractionType::kDeterministic);
  at::Tensor loc = params.get("loc")[0].to(at::kDouble), scale = params.get("scale")[0].to(at::kDouble);
  TensorDict obs({{"observation", row.expand({n, 5}).contiguous()}}, {n});
  auto [m, s] = stats(fused->act(obs, InteractionType::kRandom).get("action"));
  EXPECT_TRUE(((m - loc).abs() <= 5 * scale / std::sqrt(double(n))).all().item<bool>()) << m << loc;
  EXPECT_TRUE(((s - scale).abs() <= 0.02 * scale).all().item<bool>()) << s << scale;
}

// The log-probs the plan writes beside its random samples are LibTorch's log_prob of those
// samples (tanh_normal: the plan scores the pre-tanh value, LibTorch the action through atanh,
// so they agree where the action is not saturated).
void expect_sampled_log_probs_match(const std::function<std::unique_ptr<Actor>(ActorOptions)>& make,
                                    int64_t obs_size, const std::string& name, double tolerance) {
  auto fused = make(ActorOptions().backend(Backend::kFused).seed(4));
  auto reference = make(ActorOptions().backend(Backend::kLibTorch));
  ASSERT_TRUE(fused && reference);
  at::manual_seed(17);
  const int64_t batch = 1000;
  TensorDict obs({{"observation", at::randn({batch, obs_size})}}, {batch});
  TensorDict sampled = fused->act(obs, InteractionType::kRandom);
  auto* seq = dynamic_cast<nn::ProbabilisticTensorDictSequentialImpl*>(reference->module().get());
  ASSERT_NE(seq, nullptr) << name;
  TensorDict given({{"observation", obs.get("observation")}, {"action", sampled.get("action")}}, {batch});
  at::Tensor expected;
  {
    c10::InferenceMode inference;
    expected = std::get<at::Tensor>(seq->log_prob(given));
  }
  at::Tensor got = sampled.get("action_log_prob");
  ASSERT_EQ(got.sizes(), expected.sizes()) << name;
  at::Tensor ok = (got - expected).abs().le(tolerance + tolerance * expected.abs()).logical_or(got.eq(expected));
  if (name == "tanh_normal" || name == "pendulum") {
    // Only where LibTorch's atanh(action) is well conditioned.
    at::Tensor y = sampled.get("action").abs();
    at::Tensor interior = (y < 1.9).all(-1);  // away from -2/2 (pendulum) and -3 (the test head; its +1 bound is kept)
    ok = ok.logical_or(interior.logical_not());
    EXPECT_GT(interior.to(at::kFloat).mean().item<float>(), 0.5) << name;
  }
  EXPECT_TRUE(ok.all().item<bool>()) << name << ": max diff " << (got - expected).abs().max().item<double>();
}

TEST(FusedSampling, LogProbsOfSampledActionsEqualLibTorchsLogProbOfThoseActions) {
  expect_sampled_log_probs_match(
      [](ActorOptions o) { return Actor::load(policy_path("cartpole_categorical.pbtxt"), o).value(); }, 4, "cartpole", 1e-5);
  expect_sampled_log_probs_match(
      [](ActorOptions o) { return Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt"), o).value(); }, 3, "pendulum",
      1e-4);
  const std::vector<std::pair<std::string, std::pair<const char*, int64_t>>> heads = {
      {"one_hot_categorical", {kOneHotHead, 4}}, {"bernoulli", {kBernoulliHead, 3}},
      {"normal", {kNormalHead, 6}}, {"independent_normal", {kIndependentNormalHead, 4}},
      {"tanh_normal", {kTanhNormalHead, 4}}, {"delta", {kDeltaHead, 3}}};
  uint64_t seed = 200;
  for (const auto& [name, head] : heads) {
    const std::string text = mlp_spec("relu", true, head.first, head.second, seed++);
    expect_sampled_log_probs_match([&](ActorOptions o) { return load_spec_text(text, o); }, 5, name,
                                   name == "tanh_normal" ? 1e-4 : 1e-5);
  }
}

TEST(FusedSampling, BernoulliAndOneHotFrequenciesOver1e5DrawsAreTheProbabilities) {
  const int64_t n = 100000;
  at::Tensor row = at::linspace(-1, 1, 5).to(at::kFloat);
  TensorDict one({{"observation", row.unsqueeze(0)}}, {1});
  TensorDict obs({{"observation", row.expand({n, 5}).contiguous()}}, {n});
  {
    const std::string text = mlp_spec("tanh", false, kBernoulliHead, 3, 77);
    auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused));
    auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch));
    at::Tensor probs = reference->act(one, InteractionType::kMean).get("action")[0].to(at::kDouble);
    at::Tensor freq = fused->act(obs, InteractionType::kRandom).get("action").to(at::kDouble).mean(0);
    EXPECT_TRUE(((freq - probs).abs() <= 5 * (probs * (1 - probs) / n).sqrt() + 1e-9).all().item<bool>())
        << freq << probs;
  }
  {
    const std::string text = mlp_spec("tanh", false, kOneHotHead, 4, 78);
    auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused));
    auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch).return_all_entries(true));
    at::Tensor probs = reference->act(one, InteractionType::kMode).get("params")[0].to(at::kDouble).softmax(-1);
    at::Tensor action = fused->act(obs, InteractionType::kRandom).get("action");
    EXPECT_TRUE(action.sum(-1).eq(1).all().item<bool>());  // one-hot rows
    at::Tensor freq = action.to(at::kDouble).mean(0);
    EXPECT_TRUE(((freq - probs).abs() <= 5 * (probs * (1 - probs) / n).sqrt() + 1e-9).all().item<bool>())
        << freq << probs;
  }
}

TEST(FusedSampling, GoalHybridPartsHaveTheirDistributionsOver1e5Draws) {
  const int64_t n = 100000;
  auto fused = Actor::load(policy_path("goal_hybrid.pbtxt"), ActorOptions().backend(Backend::kFused).seed(3)).value();
  auto reference =
      Actor::load(policy_path("goal_hybrid.pbtxt"), ActorOptions().backend(Backend::kLibTorch).return_all_entries(true))
          .value();
  at::Tensor row = at::linspace(-0.8, 0.6, 4).to(at::kFloat);
  TensorDict one({{"observation", row.unsqueeze(0)}}, {1});
  TensorDict params = reference->act(one, InteractionType::kDeterministic);
  at::Tensor probs = params.get({"params", "action_type", "logits"})[0].to(at::kDouble).softmax(-1);
  const double loc = params.get({"params", "action_param", "loc"})[0][0].item<double>();
  const double scale = params.get({"params", "action_param", "scale"})[0][0].item<double>();
  TensorDict obs({{"observation", row.expand({n, 4}).contiguous()}}, {n});
  TensorDict out = fused->act(obs, InteractionType::kRandom);
  const double p1 = probs[1].item<double>();
  const double freq = out.get("action_type").to(at::kDouble).mean().item<double>();
  EXPECT_LE(std::abs(freq - p1), 5 * std::sqrt(p1 * (1 - p1) / n)) << freq << " vs " << p1;
  auto [m, s] = stats(out.get("action_param"));
  EXPECT_LE(std::abs(m[0].item<double>() - loc), 5 * scale / std::sqrt(double(n))) << m << " vs " << loc;
  EXPECT_LE(std::abs(s[0].item<double>() - scale), 0.02 * scale) << s << " vs " << scale;
  // The parts draw from disjoint Philox blocks: the type and the parameter are uncorrelated.
  at::Tensor t = out.get("action_type").to(at::kDouble), x = out.get("action_param").reshape({n}).to(at::kDouble);
  const double correlation =
      ((t - t.mean()) * (x - x.mean())).mean().item<double>() / (t.std() * x.std()).item<double>();
  EXPECT_LT(std::abs(correlation), 5 / std::sqrt(double(n)));
}

// The log-probs the plan writes beside sampled composite parts are LibTorch's log_prob of those
// samples, per part and (aggregated) summed.
TEST(FusedSampling, GoalHybridLogProbsOfSampledActionsEqualLibTorchs) {
  for (bool aggregate : {false, true}) {
    const ActorOptions options = ActorOptions().composite_lp_aggregate(aggregate).seed(8);
    auto fused = Actor::load(policy_path("goal_hybrid.pbtxt"), ActorOptions(options).backend(Backend::kFused)).value();
    auto reference =
        Actor::load(policy_path("goal_hybrid.pbtxt"), ActorOptions(options).backend(Backend::kLibTorch)).value();
    at::manual_seed(19);
    const int64_t batch = 1000;
    TensorDict obs({{"observation", at::randn({batch, 4})}}, {batch});
    TensorDict sampled = fused->act(obs, InteractionType::kRandom);
    auto* seq = dynamic_cast<nn::ProbabilisticTensorDictSequentialImpl*>(reference->module().get());
    ASSERT_NE(seq, nullptr);
    TensorDict given({{"observation", obs.get("observation")},
                      {"action_type", sampled.get("action_type")},
                      {"action_param", sampled.get("action_param")}},
                     {batch});
    c10::InferenceMode inference;
    nn::CompositeLpAggregateGuard mode(aggregate, /*thread_local_only=*/true);
    nn::LogProb expected = seq->log_prob(given);
    if (aggregate) {
      expect_close(sampled.get("sample_log_prob"), std::get<at::Tensor>(expected), "sample_log_prob");
    } else {
      for (const char* key : {"action_type_log_prob", "action_param_log_prob"}) {
        expect_close(sampled.get(key), std::get<TensorDict>(expected).get(key), key);
      }
    }
  }
}

TEST(FusedSampling, SaturatedTanhNormalSamplesHaveFiniteLogProbs) {
  // A huge scale saturates almost every sample at the bounds.
  std::string head = kTanhNormalHead;
  head.replace(head.find("biased_softplus_0.5_0.05"), 24, "biased_softplus_50.0");
  auto fused = load_spec_text(mlp_spec("tanh", false, head, 4, 9), ActorOptions().backend(Backend::kFused));
  TensorDict obs({{"observation", at::randn({4096, 5})}}, {4096});
  TensorDict out = fused->act(obs, InteractionType::kRandom);
  at::Tensor action = out.get("action");
  EXPECT_GT((action.abs() > 0.999).to(at::kFloat).mean().item<float>(), 0.5);
  EXPECT_TRUE(out.get("action_log_prob").isfinite().all().item<bool>());
}

TEST(FusedRandomness, SeededActorsRepeatTheirSequence) {
  auto a = Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt"), ActorOptions().seed(11)).value();
  auto b = Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt"), ActorOptions().seed(11)).value();
  auto c = Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt"), ActorOptions().seed(12)).value();
  std::vector<float> obs = {1, 0, 0, 0.5f, 0.5f, 1}, xa(2), xb(2), xc(2), la(2), lb(2);
  for (int call = 0; call < 3; ++call) {
    ASSERT_OK(a->act_flat(obs.data(), 2, xa.data(), la.data(), InteractionType::kRandom));
    ASSERT_OK(b->act_flat(obs.data(), 2, xb.data(), lb.data(), InteractionType::kRandom));
    ASSERT_OK(c->act_flat(obs.data(), 2, xc.data(), nullptr, InteractionType::kRandom));
    EXPECT_EQ(xa, xb);
    EXPECT_EQ(la, lb);
    EXPECT_NE(xa, xc);
  }
}

TEST(FusedRandomness, SeededRecurrentAndCompositeActorsRepeatTheirSequence) {
  for (const std::string name : {"recurrent_gru.pbtxt", "goal_hybrid.pbtxt"}) {
    auto a = Actor::load(policy_path(name), ActorOptions().backend(Backend::kFused).seed(11)).value();
    auto b = Actor::load(policy_path(name), ActorOptions().backend(Backend::kFused).seed(11)).value();
    auto c = Actor::load(policy_path(name), ActorOptions().backend(Backend::kFused).seed(12)).value();
    const TensorDict obs({{"observation", at::randn({16, 4})}}, {16});
    bool differs = false;
    for (int call = 0; call < 5; ++call) {
      TensorDict xa = a->act(obs, InteractionType::kRandom);
      TensorDict xb = b->act(obs, InteractionType::kRandom);
      TensorDict xc = c->act(obs, InteractionType::kRandom);
      for (const auto& key : xa.keys()) {
        EXPECT_TRUE(xa.get(key).equal(xb.get(key))) << name << " " << key.to_string();
        differs |= !xa.get(key).equal(xc.get(key));
      }
    }
    EXPECT_TRUE(differs) << name;
  }
}

TEST(FusedRandomness, OneAndFourThreadsDrawTheSameValuesFromOneActor) {
  constexpr int kCalls = 64;
  constexpr int64_t kBatch = 5;
  auto draws = [&](int threads) {
    auto actor = Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt"), ActorOptions().seed(5)).value();
    std::vector<float> obs(kBatch * 3, 0.25f);
    std::vector<float> all(kCalls * kBatch);
    std::atomic<int> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        std::vector<float> action(kBatch);
        for (int i = next++; i < kCalls; i = next++) {
          EXPECT_TRUE(actor->act_flat(obs.data(), kBatch, action.data(), nullptr, InteractionType::kRandom).ok());
          std::copy(action.begin(), action.end(), all.begin() + i * kBatch);
        }
      });
    }
    for (auto& thread : pool) thread.join();
    // Calls are numbered in the order they start: compare the multisets of draws.
    std::sort(all.begin(), all.end());
    return all;
  };
  EXPECT_EQ(draws(1), draws(4));
}

TEST(FusedRandomness, FourThreadsSharingOneActorGetLibTorchsDeterministicOutputs) {
  auto fused = Actor::load(policy_path("cartpole_categorical.pbtxt"), ActorOptions().backend(Backend::kFused)).value();
  auto reference = Actor::load(policy_path("cartpole_categorical.pbtxt"), ActorOptions().backend(Backend::kLibTorch)).value();
  TensorDict obs({{"observation", at::randn({32, 4})}}, {32});
  TensorDict expected = reference->act(obs, InteractionType::kDeterministic);
  std::vector<std::thread> pool;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        TensorDict out = fused->act(obs, InteractionType::kDeterministic);
        if (!out.get("action").equal(expected.get("action")) ||
            !out.get("action_log_prob").allclose(expected.get("action_log_prob"), 1e-5, 1e-5)) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& thread : pool) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(FusedAllocation, FlatCallsAllocateNothingAfterWarmUp) {
  for (const std::string name : {"cartpole_categorical.pbtxt", "pendulum_tanh_gaussian.pbtxt"}) {
    auto actor = Actor::load(policy_path(name), ActorOptions().seed(1)).value();
    std::vector<float> obs(64 * actor->describe().flat_observation_size, 0.1f), action(64 * actor->describe().flat_action_size), lp(64);
    for (InteractionType type : {InteractionType::kRandom, InteractionType::kDeterministic}) {
      ASSERT_OK(actor->act_flat(obs.data(), 64, action.data(), lp.data(), type));  // warm-up
      const int64_t before = g_allocations.load();
      for (int64_t batch : {1, 7, 64}) {
        for (int i = 0; i < 100; ++i) {
          const absl::Status status = actor->act_flat(obs.data(), batch, action.data(), lp.data(), type);
          if (!status.ok()) ADD_FAILURE() << status;
        }
      }
      EXPECT_EQ(g_allocations.load() - before, 0) << name;
    }
  }
}

// Recurrent and composite policies have no flat API: act() allocates its output tensors (and
// the kept state's), as it does for every policy. The plan underneath allocates nothing.
TEST(FusedAllocation, PlanRunsOfRecurrentAndCompositePoliciesAllocateNothingAfterWarmUp) {
  for (const std::string name : {"recurrent_gru.pbtxt", "goal_hybrid.pbtxt"}) {
    ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::load_policy(policy_path(name)));
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<const FusedPlan> plan, FusedPlan::lower(policy));
    std::vector<std::vector<float>> inputs, outputs;
    std::vector<const float*> input_data;
    for (int s : plan->input_slots()) inputs.emplace_back(64 * plan->slot(s).width, 0.1f);
    for (const auto& in : inputs) input_data.push_back(in.data());
    std::vector<FusedPlan::Destination> destinations;
    for (int s : plan->output_slots()) outputs.emplace_back(64 * plan->slot(s).width);
    for (size_t i = 0; i < outputs.size(); ++i) destinations.push_back({plan->output_slots()[i], outputs[i].data()});
    for (InteractionType type : {InteractionType::kRandom, InteractionType::kDeterministic}) {
      ASSERT_OK(plan->check(type));
      plan->run(input_data.data(), 64, type, {1, 0}, destinations.data(), static_cast<int>(destinations.size()));
      const int64_t before = g_allocations.load();
      uint64_t call = 1;
      for (int64_t batch : {1, 7, 64}) {
        for (int i = 0; i < 100; ++i) {
          plan->run(input_data.data(), batch, type, {1, call++}, destinations.data(),
                    static_cast<int>(destinations.size()));
        }
      }
      EXPECT_EQ(g_allocations.load() - before, 0) << name;
    }
  }
}

TEST(FusedLowering, KFusedOnAnAutoregressivePolicyIsALoadErrorNamingTheModule) {
  auto actor = Actor::load(policy_path("goal_autoregressive.pbtxt"), ActorOptions().backend(Backend::kFused));
  ASSERT_FALSE(actor.ok());
  EXPECT_NE(actor.status().message().find("module.probabilistic_sequential.modules[2]"), std::string::npos)
      << actor.status();
  EXPECT_NE(actor.status().message().find("autoregressive"), std::string::npos) << actor.status();
}

TEST(FusedLowering, AutoFallsBackToLibTorchForAnAutoregressivePolicyAndAboveTheBatchThreshold) {
  ASSERT_OK_AND_ASSIGN(auto autoregressive, Actor::load(policy_path("goal_autoregressive.pbtxt")));
  EXPECT_FALSE(autoregressive->describe().fused_status.ok());
  EXPECT_FALSE(autoregressive->describe().runs_fused(1, InteractionType::kRandom));
  ASSERT_OK_AND_ASSIGN(auto cartpole, Actor::load(policy_path("cartpole_categorical.pbtxt"),
                                                  ActorOptions().fused_max_batch(64)));
  EXPECT_TRUE(cartpole->describe().runs_fused(64, InteractionType::kRandom));
  EXPECT_FALSE(cartpole->describe().runs_fused(65, InteractionType::kRandom));
  EXPECT_FALSE(cartpole->describe().runs_fused(1, InteractionType::kMean));  // categorical has no mean action
  // The flat API still answers above the threshold (through LibTorch), with the same greedy actions.
  std::vector<float> obs(100 * 4, 0.05f), a(100), b(100);
  ASSERT_OK(cartpole->act_flat(obs.data(), 100, a.data(), nullptr, InteractionType::kDeterministic));
  ASSERT_OK(cartpole->act_flat(obs.data(), 1, b.data(), nullptr, InteractionType::kDeterministic));
  EXPECT_EQ(a[99], b[0]);
}

TEST(FusedLowering, DescribeNamesEachModulesPath) {
  ASSERT_OK_AND_ASSIGN(auto actor, Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt")));
  const auto lines = actor->describe().modules;
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("module.probabilistic_sequential.modules[0]: fused (Mlp"), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("tanh_normal"), std::string::npos) << lines[2];
  ASSERT_OK_AND_ASSIGN(auto gru, Actor::load(policy_path("recurrent_gru.pbtxt")));
  EXPECT_EQ(gru->describe().modules[0], "module.sequential.modules[0]: fused (GruCell 4->32)");
  ASSERT_OK_AND_ASSIGN(auto goal, Actor::load(policy_path("goal_hybrid.pbtxt")));
  EXPECT_EQ(goal->describe().modules[3],
            "module.probabilistic_sequential.modules[3]: fused (composite: action_type categorical, action_param "
            "normal; default deterministic)");
}

// lower() walks the spec's module tree beside the built one. A policy put together in C++ has a
// spec that is a header only: the plan is lowered from the spec its module exports to, and is
// the same plan.
TEST(FusedLowering, AModuleTreeWhoseSpecIsAHeaderOnlyLowersFromItsExport) {
  ASSERT_OK_AND_ASSIGN(policy::Policy loaded, policy::load_policy(policy_path("pendulum_tanh_gaussian.pbtxt")));
  policy::Policy header_only = loaded;
  header_only.spec.clear_module();
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const FusedPlan> described, FusedPlan::lower(loaded));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const FusedPlan> exported, FusedPlan::lower(header_only));
  EXPECT_EQ(exported->description(), described->description());
  std::vector<float> obs(5 * described->observation_size(), 0.3f);
  std::vector<float> a(5 * described->action_size()), b(a.size()), lp_a(5), lp_b(5);
  ASSERT_OK(described->run_flat(obs.data(), 5, InteractionType::kRandom, {7, 1}, {a.data(), lp_a.data()}));
  ASSERT_OK(exported->run_flat(obs.data(), 5, InteractionType::kRandom, {7, 1}, {b.data(), lp_b.data()}));
  EXPECT_EQ(a, b);
  EXPECT_EQ(lp_a, lp_b);
}

TEST(FusedLowering, TheFlatApiRefusesRecurrentAndCompositePoliciesSayingWhy) {
  std::vector<float> obs(4), action(1);
  ASSERT_OK_AND_ASSIGN(auto gru, Actor::load(policy_path("recurrent_gru.pbtxt")));
  ASSERT_OK(gru->describe().fused_status);
  EXPECT_TRUE(gru->describe().runs_fused(1, InteractionType::kRandom));
  absl::Status status = gru->act_flat(obs.data(), 1, action.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("recurrent (state hidden)"), std::string::npos) << status;
  EXPECT_EQ(gru->describe().flat_observation_size, 0);
  ASSERT_OK_AND_ASSIGN(auto goal, Actor::load(policy_path("goal_hybrid.pbtxt")));
  status = goal->act_flat(obs.data(), 1, action.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("module.probabilistic_sequential.modules[3]: a composite distribution"),
            std::string::npos)
      << status;
}

// ---- layers: sequence, activation (with torch's arguments), layer_norm, flatten ----

// obs [5] -> a sequence of layers ending in a NormalParamExtractor -> tanh_normal, as TorchRL's
// Gaussian actor nn.Sequential(MLP(...), NormalParamExtractor()) exports.
std::string sequence_spec(const std::string& activation, uint64_t seed) {
  return "name: 'sequence' inputs { key: 'observation' shape: 5 }\n"
         "output_keys: 'action' output_keys: 'action_log_prob'\n"
         "module { probabilistic_sequential {\n"
         "  modules { network { in_keys: 'observation' out_keys: ['loc', 'scale'] network { sequence {\n"
         "    layers { activation { name: 'tanh' } }\n"
         "    layers { flatten { num_dims: 1 } }\n"
         "    layers { linear { in_features: 5 out_features: 16 } }\n"
         "    layers { activation { name: 'elu' alpha: 0.5 } }\n"
         "    layers { layer_norm { normalized_shape: 16 } }\n"
         "    layers { linear { in_features: 16 out_features: 16 no_bias: true } }\n"
         "    layers { activation { " + activation + " } }\n"
         "    layers { sequence { layers { mlp { in_features: 16 hidden_sizes: 8 out_features: 8 } } } }\n"
         "    layers { normal_param_extractor { scale_mapping: 'biased_softplus_0.5_0.05' } } } } } }\n"
         "  modules { probabilistic { in_keys: ['loc', 'scale'] out_keys: 'action' distribution: 'tanh_normal' "
         "return_log_prob: true log_prob_key: 'action_log_prob' } }\n"
         "} }\ninit_seed: " + std::to_string(seed);
}

TEST(FusedParity, ASequenceOfLayersWithEveryActivationEqualsLibTorch) {
  uint64_t seed = 200;
  for (const std::string activation :
       {"name: 'tanh'", "name: 'relu'", "name: 'sigmoid'", "name: 'identity'", "name: 'silu'", "name: 'gelu'",
        "name: 'gelu' approximate: 'tanh'", "name: 'elu'", "name: 'elu' alpha: 0.3", "name: 'leaky_relu'",
        "name: 'leaky_relu' negative_slope: 0.2", "name: 'softplus'", "name: 'softplus' beta: 2 threshold: 3"}) {
    const std::string text = sequence_spec(activation, seed++);
    expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, {{"observation", 5}}, activation);
  }
}

// Activation and layer_norm modules of their own, reading a declared input (which keeps its value).
TEST(FusedParity, ActivationAndLayerNormModulesEqualLibTorch) {
  const std::string text =
      "name: 'modules' inputs { key: 'observation' shape: 5 } output_keys: 'a' "
      "output_keys: 'n' output_keys: 'action'\n"
      "module { probabilistic_sequential {\n"
      "  modules { network { in_keys: 'observation' out_keys: 'a' network { activation { name: 'softplus' beta: 3 } } } }\n"
      "  modules { network { in_keys: 'observation' out_keys: 'n' network { layer_norm { normalized_shape: 5 "
      "no_affine: true } } } }\n"
      "  modules { network { in_keys: 'n' out_keys: 'f' network { flatten { num_dims: 1 } } } }\n"
      "  modules { network { in_keys: 'f' out_keys: 'logits' network { linear { in_features: 5 out_features: 3 } } } }\n"
      "  modules { probabilistic { in_keys: 'logits' out_keys: 'action' distribution: 'categorical' } }\n"
      "} }\ninit_seed: 7";
  expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, {{"observation", 5}}, "modules");
  auto actor = load_spec_text(text, ActorOptions().backend(Backend::kFused));
  ASSERT_TRUE(actor);
  EXPECT_EQ(actor->describe().modules[0], "module.probabilistic_sequential.modules[0]: fused (activation softplus)");
}

TEST(FusedLowering, Conv2dAndDuelingRunOnLibTorchSayingSo) {
  const std::string conv =
      "name: 'cnn' inputs { key: 'pixels' shape: [3, 8, 8] } output_keys: 'q'\n"
      "module { network { in_keys: 'pixels' out_keys: 'q' network { sequence {\n"
      "  layers { conv2d { in_channels: 3 out_channels: 4 kernel_size: [3, 3] stride: [2, 2] } }\n"
      "  layers { activation { name: 'relu' } } layers { flatten { num_dims: 3 } } } } } }\ninit_seed: 1";
  EXPECT_THROW(load_spec_text(conv, ActorOptions().backend(Backend::kFused)), std::invalid_argument);
  auto fallback = load_spec_text(conv, ActorOptions());
  ASSERT_TRUE(fallback);
  EXPECT_NE(fallback->describe().fused_status.message().find(
                "module.network.network.sequence.layers[0]: conv2d runs on LibTorch"),
            std::string::npos)
      << fallback->describe().fused_status;
  const std::string dueling =
      "name: 'dueling' inputs { key: 'observation' shape: 4 } output_keys: 'q'\n"
      "module { network { in_keys: 'observation' out_keys: 'q' network { dueling {\n"
      "  features { mlp { in_features: 4 hidden_sizes: 8 out_features: 8 } }\n"
      "  advantage { linear { in_features: 8 out_features: 3 } } value { linear { in_features: 8 out_features: 1 } }"
      " } } } }\ninit_seed: 1";
  auto q = load_spec_text(dueling, ActorOptions());
  ASSERT_TRUE(q);
  EXPECT_NE(q->describe().fused_status.message().find("module: dueling runs on LibTorch"), std::string::npos)
      << q->describe().fused_status;
}

// ---- one-hot modes: every maximal class, as LibTorch's (logits == logits.max(-1)) ----

// relu(params) is 0 in every class where all four are negative: the mode sets each of them.
TEST(FusedParity, OneHotModeSetsEveryTiedClassAsLibTorch) {
  const std::string head =
      "modules { network { in_keys: 'params' out_keys: 'relu' network { mapping { name: 'relu' } } } }\n"
      "modules { probabilistic { in_keys_map { name: 'logits' key: 'relu' } out_keys: 'action' distribution: "
      "'one_hot_categorical' return_log_prob: true log_prob_key: 'action_log_prob' } }";
  const std::string text = mlp_spec("tanh", false, head, 4, 31);
  expect_parity([&](ActorOptions o) { return load_spec_text(text, o); }, {{"observation", 5}}, "one-hot ties");
  auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch));
  at::manual_seed(1000);
  const at::Tensor mode =
      reference->act(random_inputs({{"observation", 5}}, 1000), InteractionType::kMode).get("action");
  EXPECT_GT(mode.sum(-1).gt(1).sum().item<int64_t>(), 0) << "no row with tied classes: the test checks nothing";
}

// ---- masked categoricals: TorchRL's MaskedCategorical / MaskedOneHotCategorical ----

// obs [5] -> Mlp -> params [4] (softplus'd to probs with `from_probs`) -> `distribution`, which
// reads its mask from the bool input action_mask of per-environment shape [mask_width].
std::string masked_spec(const std::string& distribution, bool from_probs, const std::string& kwargs, int64_t mask_width,
                        uint64_t seed) {
  std::string head =
      from_probs
          ? "modules { network { in_keys: 'params' out_keys: 'probs' network { mapping { name: 'softplus' } } } }\n"
          : "";
  head += std::string("modules { probabilistic { in_keys_map { name: '") + (from_probs ? "probs" : "logits") +
          "' key: '" + (from_probs ? "probs" : "params") +
          "' } in_keys_map { name: 'mask' key: 'action_mask' } out_keys: 'action' distribution: '" + distribution +
          "' " + kwargs + " return_log_prob: true log_prob_key: 'action_log_prob' } }";
  std::string text = mlp_spec("tanh", false, head, 4, seed);
  const std::string observation = "inputs { key: 'observation' shape: 5 }";
  text.insert(text.find(observation) + observation.size(),
              " inputs { key: 'action_mask' shape: " + std::to_string(mask_width) + " dtype: BOOL }");
  return text;
}

// [batch, width] flags, about 40% false; with `empty_rows`, rows 3, 8, 13, ... allow nothing.
at::Tensor random_mask(int64_t batch, int64_t width, bool empty_rows) {
  at::Tensor mask = at::rand({batch, width}) > 0.4;
  if (empty_rows) {
    for (int64_t r = 3; r < batch; r += 5) mask[r].fill_(false);
  }
  return mask;
}

struct MaskedCase {
  std::string name, distribution, kwargs;
  bool from_probs = false;
  int64_t mask_width = 4;
};

std::vector<MaskedCase> masked_cases() {
  const std::string finite = "distribution_kwargs { key: 'neg_inf' value { double_value: -1e9 } }";
  const std::string gathered = finite + " distribution_kwargs { key: 'use_cross_entropy' value { bool_value: false } }";
  return {{"masked_categorical", "masked_categorical", ""},
          {"masked_categorical, probs", "masked_categorical", "", true},
          {"masked_categorical, neg_inf -1e9, no cross entropy", "masked_categorical", gathered},
          {"masked_categorical, probs, neg_inf -1e9", "masked_categorical", finite, true},
          {"masked_categorical, one flag per row", "masked_categorical", "", false, 1},
          {"masked_one_hot_categorical", "masked_one_hot_categorical", ""},
          {"masked_one_hot_categorical, probs", "masked_one_hot_categorical", "", true},
          {"masked_one_hot_categorical, neg_inf -1e9", "masked_one_hot_categorical", finite}};
}

// Deterministic types: the fused actor's outputs equal LibTorch's on random masks, rows that
// allow no class included (LibTorch's logits are NaN there: action 0, or no class for the one-hot
// mode, and log-prob neg_inf): the same actions, log-probs to 1e-6 and neg_inf where LibTorch's
// is. Returns the largest |fused - LibTorch| of the finite log-probs.
double expect_masked_parity(const MaskedCase& c, uint64_t seed) {
  const std::string text = masked_spec(c.distribution, c.from_probs, c.kwargs, c.mask_width, seed);
  auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused).run_self_tests(false));
  auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch).run_self_tests(false));
  EXPECT_TRUE(fused && reference) << c.name;
  if (!fused || !reference) return 0;
  EXPECT_OK(fused->describe().fused_status);
  double worst = 0;
  int checked = 0;
  for (int64_t batch : {1, 7, 64, 1000}) {
    at::manual_seed(batch);
    TensorDict obs = random_inputs({{"observation", 5}}, batch);
    obs.set("action_mask", random_mask(batch, c.mask_width, /*empty_rows=*/true));
    for (InteractionType type : {InteractionType::kDeterministic, InteractionType::kMode}) {
      EXPECT_TRUE(fused->describe().runs_fused(batch, type)) << c.name;
      ++checked;
      const std::string what = c.name + " batch " + std::to_string(batch) + " " + std::string(nn::to_string(type));
      TensorDict a = fused->act(obs, type);
      TensorDict b = reference->act(obs, type);
      EXPECT_EQ(a.keys().size(), b.keys().size()) << what;
      const at::Tensor action = a.get("action"), expected_action = b.get("action");
      EXPECT_EQ(action.scalar_type(), expected_action.scalar_type()) << what;
      EXPECT_TRUE(action.equal(expected_action))
          << what << "\nfused " << action.slice(0, 0, 8) << "\nlibtorch " << expected_action.slice(0, 0, 8);
      const at::Tensor lp = a.get("action_log_prob").to(at::kDouble),
                       expected = b.get("action_log_prob").to(at::kDouble);
      EXPECT_EQ(lp.sizes(), expected.sizes()) << what;
      if (lp.sizes() != expected.sizes()) continue;
      const at::Tensor finite = expected.isfinite();
      EXPECT_TRUE(lp.isfinite().equal(finite)) << what << "\nfused " << lp << "\nlibtorch " << expected;
      EXPECT_TRUE(lp.masked_select(finite.logical_not()).equal(expected.masked_select(finite.logical_not()))) << what;
      const at::Tensor diff = (lp - expected).masked_select(finite).abs();
      if (diff.numel() > 0) worst = std::max(worst, diff.max().item<double>());
      EXPECT_TRUE(diff.le(1e-6 + 1e-6 * expected.masked_select(finite).abs()).all().item<bool>())
          << what << ": max abs diff " << diff.max().item<double>();
      if (batch >= 7) {
        // Rows that allow no class were in the batch: neg_inf (or the uniform of -1e9 logits).
        EXPECT_EQ(std::isinf(expected[3].item<double>()), c.kwargs.empty()) << what << " " << expected[3];
      }
    }
  }
  EXPECT_EQ(checked, 8) << c.name;
  return worst;
}

TEST(FusedParity, MaskedCategoricalsEqualLibTorchWithRowsThatAllowNoClass) {
  uint64_t seed = 300;
  for (const MaskedCase& c : masked_cases()) {
    const double worst = expect_masked_parity(c, seed++);
    std::cout << "[ masked ] " << c.name << ": max |fused - LibTorch| of the deterministic log-probs " << worst << "\n";
  }
}

TEST(FusedLowering, AMaskedCategoricalReadsItsMaskAsAPlanInput) {
  const std::string text = masked_spec("masked_categorical", false, "", 4, 5);
  auto actor = load_spec_text(text, ActorOptions().backend(Backend::kFused));
  ASSERT_TRUE(actor);
  EXPECT_EQ(actor->describe().modules.back(),
            "module.probabilistic_sequential.modules[1]: fused (masked_categorical, mask action_mask, default "
            "deterministic)");
  tdpolicy::PolicySpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec));
  ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::build_policy(spec, "test", "."));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const FusedPlan> plan, FusedPlan::lower(policy));
  ASSERT_EQ(plan->input_slots().size(), 2u);
  const FusedPlan::Slot& mask = plan->slot(plan->input_slots()[1]);
  EXPECT_EQ(mask.key, NestedKey("action_mask"));
  EXPECT_TRUE(mask.boolean);
  EXPECT_EQ(mask.width, 4);
  // The flat API takes one input: a masked policy runs through act().
  EXPECT_EQ(plan->flat_status().code(), absl::StatusCode::kFailedPrecondition);
}

// The log-probs the plan writes beside its draws are LibTorch's log_prob of those draws.
TEST(FusedSampling, MaskedLogProbsOfSampledActionsEqualLibTorchs) {
  uint64_t seed = 400;
  for (const MaskedCase& c : masked_cases()) {
    const std::string text = masked_spec(c.distribution, c.from_probs, c.kwargs, c.mask_width, seed++);
    auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused).seed(4));
    auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch));
    ASSERT_TRUE(fused && reference);
    at::manual_seed(17);
    const int64_t batch = 1000;
    // At least one allowed class per row: a row that allows none has nothing to draw.
    at::Tensor mask = random_mask(batch, c.mask_width, false);
    mask.select(1, 0).logical_or_(mask.any(-1).logical_not());
    TensorDict obs({{"observation", at::randn({batch, 5})}, {"action_mask", mask}}, {batch});
    TensorDict sampled = fused->act(obs, InteractionType::kRandom);
    auto* seq = dynamic_cast<nn::ProbabilisticTensorDictSequentialImpl*>(reference->module().get());
    ASSERT_NE(seq, nullptr);
    TensorDict given({{"observation", obs.get("observation")},
                      {"action_mask", obs.get("action_mask")},
                      {"action", sampled.get("action")}},
                     {batch});
    at::Tensor expected;
    {
      c10::InferenceMode inference;
      expected = std::get<at::Tensor>(seq->log_prob(given)).to(at::kDouble);
    }
    const at::Tensor got = sampled.get("action_log_prob").to(at::kDouble);
    ASSERT_EQ(got.sizes(), expected.sizes()) << c.name;
    EXPECT_TRUE(got.isfinite().all().item<bool>()) << c.name;
    const double worst = (got - expected).abs().max().item<double>();
    EXPECT_TRUE((got - expected).abs().le(1e-6 + 1e-6 * expected.abs()).all().item<bool>())
        << c.name << ": max abs diff " << worst;
    std::cout << "[ masked ] " << c.name << ": max |fused - LibTorch| of the sampled actions' log-probs " << worst
              << "\n";
  }
}

// The plan draws from its own Philox stream, not LibTorch's: over 1e5 draws of one row, a
// masked-out class never comes up and the others come up at the softmax of the masked logits;
// over random masks, no draw is a masked-out class. Seeded, so a failure repeats.
TEST(FusedSampling, MaskedDrawsNeverPickAMaskedOutClassAndFollowTheMaskedSoftmax) {
  const int64_t n = 100000;
  const at::Tensor row = at::linspace(-1, 1, 5).to(at::kFloat);
  const at::Tensor allowed = at::tensor({1, 0, 1, 1}).to(at::kBool);
  uint64_t seed = 500;
  for (const MaskedCase& c : masked_cases()) {
    if (c.mask_width != 4) continue;
    const std::string text = masked_spec(c.distribution, c.from_probs, c.kwargs, 4, seed++);
    auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused).seed(3));
    auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch).return_all_entries(true));
    ASSERT_TRUE(fused && reference);
    TensorDict one({{"observation", row.unsqueeze(0)}, {"action_mask", allowed.unsqueeze(0)}}, {1});
    const TensorDict params = reference->act(one, InteractionType::kMode);
    at::Tensor probs;
    if (c.from_probs) {
      probs = params.get("probs")[0].to(at::kDouble) * allowed;
      probs = probs / probs.sum();
    } else {
      probs = params.get("params")[0].to(at::kDouble).masked_fill(allowed.logical_not(), -1e300).softmax(-1);
    }
    TensorDict obs(
        {{"observation", row.expand({n, 5}).contiguous()}, {"action_mask", allowed.expand({n, 4}).contiguous()}}, {n});
    at::Tensor action = fused->act(obs, InteractionType::kRandom).get("action");
    const bool one_hot = c.distribution == "masked_one_hot_categorical";
    if (one_hot) {
      EXPECT_TRUE(action.sum(-1).eq(1).all().item<bool>()) << c.name;
      action = action.argmax(-1);
    }
    const at::Tensor freq = at::one_hot(action, 4).to(at::kDouble).mean(0);
    EXPECT_EQ(freq[1].item<double>(), 0.0) << c.name << ": a masked-out class was drawn";
    EXPECT_TRUE(((freq - probs).abs() <= 5 * (probs * (1 - probs) / n).sqrt() + 1e-9).all().item<bool>())
        << c.name << ": frequencies " << freq << " vs the masked softmax " << probs;
    // Random observations and masks: every draw is an allowed class.
    at::manual_seed(23);
    at::Tensor masks = random_mask(n, 4, false);
    masks.select(1, 2).logical_or_(masks.any(-1).logical_not());
    TensorDict many({{"observation", at::randn({n, 5}) * 2}, {"action_mask", masks}}, {n});
    at::Tensor drawn = fused->act(many, InteractionType::kRandom).get("action");
    if (one_hot) drawn = drawn.argmax(-1);
    EXPECT_TRUE(many.get("action_mask").gather(-1, drawn.unsqueeze(-1)).all().item<bool>()) << c.name;
  }
}

// A row whose mask allows no class has nothing to draw: LibTorch's sampling raises (its
// probabilities are NaN), and so does the plan, naming the mask and the row. With a finite
// neg_inf such a row is a uniform draw over every class in both.
TEST(FusedSampling, ARowWhoseMaskAllowsNoClassIsAnErrorUnderRandomAsInLibTorch) {
  for (const std::string distribution : {"masked_categorical", "masked_one_hot_categorical"}) {
    const std::string text = masked_spec(distribution, false, "", 4, 600);
    auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused));
    auto reference = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch));
    ASSERT_TRUE(fused && reference);
    at::Tensor mask = at::ones({5, 4}, at::kBool);
    mask[2].fill_(false);
    TensorDict obs({{"observation", at::randn({5, 5})}, {"action_mask", mask}}, {5});
    EXPECT_THROW(reference->act(obs, InteractionType::kRandom), std::exception) << distribution;
    try {
      fused->act(obs, InteractionType::kRandom);
      ADD_FAILURE() << distribution << ": no error";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("row 2 of the mask 'action_mask' leaves no class"), std::string::npos)
          << error.what();
      EXPECT_NE(std::string(error.what()).find(distribution), std::string::npos) << error.what();
    }
    // Deterministic types do not draw: no error in either.
    EXPECT_NO_THROW(fused->act(obs, InteractionType::kDeterministic));
    EXPECT_NO_THROW(reference->act(obs, InteractionType::kDeterministic));
  }
  const std::string text = masked_spec("masked_categorical", false,
                                       "distribution_kwargs { key: 'neg_inf' value { double_value: -1e9 } }", 4, 601);
  const int64_t n = 40000;
  TensorDict obs({{"observation", at::randn({n, 5})}, {"action_mask", at::zeros({n, 4}, at::kBool)}}, {n});
  for (Backend backend : {Backend::kFused, Backend::kLibTorch}) {
    auto actor = load_spec_text(text, ActorOptions().backend(backend).seed(2));
    ASSERT_TRUE(actor);
    const at::Tensor freq =
        at::one_hot(actor->act(obs, InteractionType::kRandom).get("action"), 4).to(at::kDouble).mean(0);
    EXPECT_TRUE(((freq - 0.25).abs() <= 5 * std::sqrt(0.25 * 0.75 / n)).all().item<bool>())
        << (backend == Backend::kFused ? "fused " : "libtorch ") << freq;
  }
}

// The row that allows no class is found before any tile runs: a call of several tiles whose
// last tile holds it writes none of its outputs (act_into's tensors keep their values).
TEST(FusedSampling, ACallWithARowThatCannotDrawWritesNoOutput) {
  const std::string text = masked_spec("masked_categorical", false, "", 4, 602);
  auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused));
  ASSERT_TRUE(fused);
  const int64_t n = 3 * 64 + 10;
  at::Tensor mask = at::ones({n, 4}, at::kBool);
  mask[n - 3].fill_(false);
  const TensorDict obs({{"observation", at::randn({n, 5})}, {"action_mask", mask}}, {n});
  TensorDict out({{"action", at::full({n}, 9L)}, {"action_log_prob", at::full({n}, 9.0f)}}, {n});
  const at::Tensor action = out.get("action"), log_prob = out.get("action_log_prob");
  try {
    fused->act_into(obs, out, InteractionType::kRandom);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("row " + std::to_string(n - 3) + " of the mask"), std::string::npos)
        << error.what();
  }
  EXPECT_TRUE(out.get("action").is_same(action) && out.get("action_log_prob").is_same(log_prob));
  EXPECT_TRUE((action == 9).all().item<bool>());
  EXPECT_TRUE((log_prob == 9).all().item<bool>());
  mask[n - 3][1] = true;
  fused->act_into(obs, out, InteractionType::kRandom);
  EXPECT_TRUE(mask.gather(-1, action.unsqueeze(-1)).all().item<bool>());
}

// A call of more than 256 rows spreads its tiles over LibTorch's intra-op threads: the actions and
// log-probs have the bits of a one-thread call, and a row that cannot be drawn in a later tile is
// the same error, naming that row.
TEST(FusedRandomness, IntraOpThreadsGiveTheBitsOfOneThread) {
  const int saved = at::get_num_threads();
  const int64_t n = 64 * 37 + 5;
  for (const std::string name : {"pendulum_tanh_gaussian.pbtxt", "cartpole_categorical.pbtxt"}) {
    auto call = [&](int threads) {
      at::set_num_threads(threads);
      auto actor = Actor::load(policy_path(name), ActorOptions().backend(Backend::kFused).seed(11)).value();
      const int64_t d = actor->describe().flat_observation_size;
      at::manual_seed(3);
      const at::Tensor obs = at::randn({n, d});
      at::Tensor action = at::empty({n, actor->describe().flat_action_size});
      at::Tensor log_prob = at::empty({n});
      EXPECT_TRUE(actor->act_flat(obs.data_ptr<float>(), n, action.data_ptr<float>(), log_prob.data_ptr<float>(),
                                  InteractionType::kRandom)
                      .ok());
      return std::make_pair(action, log_prob);
    };
    const auto one = call(1);
    const auto four = call(4);
    EXPECT_EQ(at::get_num_threads(), 4);
    EXPECT_TRUE(one.first.equal(four.first)) << name;
    EXPECT_TRUE(one.second.equal(four.second)) << name;
  }
  at::set_num_threads(4);
  const std::string text = masked_spec("masked_categorical", false, "", 4, 602);
  auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused));
  ASSERT_TRUE(fused);
  at::Tensor mask = at::ones({n, 4}, at::kBool);
  mask[1300].fill_(false);
  TensorDict obs({{"observation", at::randn({n, 5})}, {"action_mask", mask}}, {n});
  try {
    fused->act(obs, InteractionType::kRandom);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("row 1300 of the mask 'action_mask' leaves no class"), std::string::npos)
        << error.what();
  }
  at::set_num_threads(saved);
}

// A mask that is not a bool of the classes' shape: a call with one goes to LibTorch, whose input
// check names the key and what it expected; a policy that declares one does not lower, and the
// error names the key and what the head takes.
TEST(FusedLowering, ABadMaskIsAnErrorNamingTheKeyAndWhatWasExpected) {
  const std::string text = masked_spec("masked_categorical", false, "", 4, 700);
  auto actor = load_spec_text(text, ActorOptions().backend(Backend::kFused));
  ASSERT_TRUE(actor);
  auto error_of = [&](const at::Tensor& mask) -> std::string {
    TensorDict obs({{"observation", at::randn({3, 5})}, {"action_mask", mask}}, {3});
    try {
      actor->act(obs, InteractionType::kDeterministic);
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    return "no error";
  };
  std::string error = error_of(at::ones({3, 4}, at::kFloat));
  EXPECT_NE(error.find("input \"action_mask\" has dtype Float, expected Bool"), std::string::npos) << error;
  error = error_of(at::ones({3, 5}, at::kBool));
  EXPECT_NE(error.find("input \"action_mask\" has shape [3, 5], expected [3, 4]"), std::string::npos) << error;

  tdpolicy::PolicySpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec));
  ASSERT_OK_AND_ASSIGN(policy::Policy policy, policy::build_policy(spec, "test", "."));
  const std::string head = "module.probabilistic_sequential.modules[1]: the mask 'action_mask' is ";
  policy::Policy declared_float = policy;
  declared_float.signature.inputs[1].dtype = at::kFloat;
  absl::StatusOr<std::shared_ptr<const FusedPlan>> plan = FusedPlan::lower(declared_float);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(head + "a float32 input of per-environment shape [4]; masked_categorical "
                                                "over 4 classes takes a bool input of per-environment shape [4] (or "
                                                "[1], one flag per row)"),
            std::string::npos)
      << plan.status();
  policy::Policy declared_wider = policy;
  declared_wider.signature.inputs[1].shape = {5};
  plan = FusedPlan::lower(declared_wider);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(head + "a bool input of per-environment shape [5]"), std::string::npos)
      << plan.status();
}

// With ActorOptions::check_finite off, a non-finite observation propagates through the plan as
// through LibTorch (the kernels, their epilogues and the head keep NaN; tanh saturates +-inf):
// the same NaN entries on both backends and the same values elsewhere, at batch 1 and past a
// row block (65).
TEST(FusedNonFinite, NaNAndInfObservationsPropagateAsOnLibTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t batch : {1, 65}) {
    auto fused = Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt"),
                             ActorOptions().backend(Backend::kFused).check_finite(false));
    auto torch = Actor::load(policy_path("pendulum_tanh_gaussian.pbtxt"),
                             ActorOptions().backend(Backend::kLibTorch).check_finite(false));
    ASSERT_TRUE(fused.ok()) << fused.status();
    ASSERT_TRUE(torch.ok()) << torch.status();
    for (float bad : {nan, inf, -inf}) {
      for (int64_t element : {0, 2}) {
        SCOPED_TRACE("batch " + std::to_string(batch) + ", " + std::to_string(bad) + " at element " +
                     std::to_string(element));
        at::Generator gen = at::detail::createCPUGenerator(5);
        at::Tensor obs = at::randn({batch, 3}, gen);
        obs[batch - 1][element] = bad;
        TensorDict td({{"observation", obs}}, {batch});
        const TensorDict f = (*fused)->act(td, InteractionType::kDeterministic);
        const TensorDict t = (*torch)->act(td, InteractionType::kDeterministic);
        ASSERT_EQ(f.keys().size(), t.keys().size());
        for (const auto& key : t.keys()) {
          const at::Tensor a = f.get(key).to(at::kFloat), b = t.get(key).to(at::kFloat);
          EXPECT_TRUE(a.isnan().equal(b.isnan())) << key.to_string() << ": fused " << a << " LibTorch " << b;
          EXPECT_TRUE(at::allclose(a, b, 1e-5, 1e-5, /*equal_nan=*/true)) << key.to_string() << ": fused " << a
                                                                           << " LibTorch " << b;
          if (std::isnan(bad)) {
            EXPECT_TRUE(a[batch - 1].isnan().all().item<bool>()) << key.to_string();
          }
        }
      }
    }
  }
}


TEST(FusedExtremeInputs, LayerNormRowsWhoseFloatMomentsOverflowGiveLibTorchsOutputs) {
  // LibTorch's LayerNorm overflows its float32 moments from about 1e19 here (16 values) and then
  // writes zeros or NaN, row by row; the plan must give the same, and the same finite values below.
  const float max = std::numeric_limits<float>::max();
  uint64_t seed = 40;
  for (const std::string activation : {"tanh", "relu"}) {
    const std::string text = mlp_spec(activation, /*layer_norm=*/true, kCategoricalHead, 3, seed++);
    auto fused = load_spec_text(text, ActorOptions().backend(Backend::kFused).check_finite(false));
    auto torch = load_spec_text(text, ActorOptions().backend(Backend::kLibTorch).check_finite(false));
    std::vector<float> values;
    for (float v : {1e17f, 1e18f, 1e19f, 3e19f, 1e20f, 1e25f, 1e30f, max}) {
      for (float sign : {1.0f, -1.0f}) values.push_back(sign * v);
    }
    const int64_t batch = static_cast<int64_t>(values.size()) * 3;
    at::Tensor obs = at::randn({batch, 5}, at::detail::createCPUGenerator(seed));
    for (int64_t row = 0; row < batch; ++row) {
      const float v = values[row / 3];
      if (row % 3 == 0) obs[row].fill_(v);                      // every element
      if (row % 3 == 1) obs[row][0] = v, obs[row][4] = v;      // two elements of the row
      if (row % 3 == 2) obs[row][2] = v, obs[row][3] = -v;     // opposite signs
    }
    TensorDict td({{"observation", obs}}, {batch});
    const TensorDict f = fused->act(td, InteractionType::kDeterministic);
    const TensorDict t = torch->act(td, InteractionType::kDeterministic);
    for (const auto& key : t.keys()) {
      const at::Tensor a = f.get(key).to(at::kFloat), b = t.get(key).to(at::kFloat);
      EXPECT_TRUE(at::allclose(a, b, 1e-5, 1e-5, /*equal_nan=*/true))
          << activation << " " << key.to_string() << ": rows differing "
          << (a - b).abs().gt(1e-5).logical_or(a.isnan().logical_xor(b.isnan())).nonzero();
    }
  }
}

}  // namespace
}  // namespace tdp::fused
