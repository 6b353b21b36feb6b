// TorchRL's LSTMModule and GRUModule as the module kinds lstm and gru: the module itself, the
// kinds (validation, build, export), the actor's state rule for TorchRL's keys (the state read at
// K, its next value written at ("next", K) and kept as the next call's K; is_init optional, its
// rows starting from zeros) in every backend, and the fused plan against LibTorch.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/actor/batching_actor.h"
#include "sdk/nn/recurrent_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "tdpolicy/spec.pb.h"
#include "tests/testing/status_matchers.h"

namespace tdp {
namespace {

using actor::Actor;
using actor::ActorOptions;
using actor::Backend;
using nn::InteractionType;

const NestedKey kH{"next", "recurrent_state_h"};
const NestedKey kC{"next", "recurrent_state_c"};

// The recurrent DQN tutorial's actor up to its Q-values: MLP -> LSTMModule(2 layers) -> MLP.
constexpr const char* kLstmSpec = R"pb(
  name: "lstm" version: "1" init_seed: 7
  inputs { key: "observation" shape: [4] }
  inputs { key: "recurrent_state_h" shape: [2, 8] }
  inputs { key: "recurrent_state_c" shape: [2, 8] }
  inputs { key: "is_init" shape: [1] dtype: BOOL }
  output_keys: ["action_value", "next/recurrent_state_h", "next/recurrent_state_c"]
  module { sequential {
    modules { network { in_keys: ["observation"] out_keys: ["embed"]
                        network { mlp { in_features: 4 hidden_sizes: [16] out_features: 6 } } } }
    modules { lstm { input_size: 6 hidden_size: 8 num_layers: 2
                     in_keys: ["embed", "recurrent_state_h", "recurrent_state_c", "is_init"]
                     out_keys: ["intermediate", "next/recurrent_state_h", "next/recurrent_state_c"] } }
    modules { network { in_keys: ["intermediate"] out_keys: ["action_value"]
                        network { mlp { in_features: 8 hidden_sizes: [16] out_features: 2 } } } } } }
)pb";

// A GRU PPO actor's trunk: GRUModule(3 layers) -> MLP -> Categorical.
constexpr const char* kGruSpec = R"pb(
  name: "gru" version: "1" init_seed: 3
  inputs { key: "observation" shape: [4] }
  inputs { key: "recurrent_state" shape: [3, 5] }
  inputs { key: "is_init" shape: [1] dtype: BOOL }
  output_keys: ["action", "next/recurrent_state"]
  module { probabilistic_sequential {
    modules { gru { input_size: 4 hidden_size: 5 num_layers: 3
                    in_keys: ["observation", "recurrent_state", "is_init"]
                    out_keys: ["features", "next/recurrent_state"] } }
    modules { network { in_keys: ["features"] out_keys: ["logits"]
                        network { mlp { in_features: 5 hidden_sizes: [16] out_features: 3 } } } }
    modules { probabilistic { in_keys: ["logits"] out_keys: ["action"] distribution: "categorical"
                              return_log_prob: true } } } }
)pb";

tdpolicy::PolicySpec spec_of(const char* text) {
  auto spec = policy::parse_spec(text, policy::SpecFormat::kText, "test.pbtxt");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::unique_ptr<Actor> actor_of(const char* text, ActorOptions options = ActorOptions()) {
  auto policy = policy::build_policy(spec_of(text), "test.pbtxt", ".");
  EXPECT_TRUE(policy.ok()) << policy.status();
  return std::make_unique<Actor>(*std::move(policy), options.interaction_type(InteractionType::kDeterministic));
}

std::string validation_error(const std::string& text) {
  auto spec = policy::parse_spec(text, policy::SpecFormat::kText, "test.pbtxt");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return std::string(policy::validate_spec(*spec, "test.pbtxt").message());
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TensorDict observation(int64_t batch, int seed, bool with_is_init = true) {
  at::manual_seed(seed);
  TensorDict td({batch});
  td.set("observation", at::randn({batch, 4}));
  if (with_is_init) td.set("is_init", at::rand({batch, 1}) < 0.3);
  return td;
}

// ---- the module ----------------------------------------------------------------------------

TEST(RecurrentModuleTest, ParametersHaveTorchsNamesAndStatesHaveTorchRLsShape) {
  nn::LSTMModule lstm(nn::RecurrentModuleOptions(3, 4).num_layers(2).in_keys({"x", "h", "c", "is_init"}).out_keys(
      {"y", {"next", "h"}, {"next", "c"}}));
  std::vector<std::string> names;
  for (const auto& item : lstm->named_parameters()) names.push_back(item.key());
  EXPECT_THAT(names, testing::ElementsAre("lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0",
                                          "lstm.bias_hh_l0", "lstm.weight_ih_l1", "lstm.weight_hh_l1",
                                          "lstm.bias_ih_l1", "lstm.bias_hh_l1"));
  // A missing state is zeros, like given zeros; batch dims are kept.
  TensorDict td({2, 3});
  td.set("x", at::randn({2, 3, 3}));
  TensorDict out = lstm->forward(td.clone());
  EXPECT_EQ(out.get({"next", "h"}).sizes(), c10::IntArrayRef({2, 3, 2, 4}));
  EXPECT_EQ(out.get("y").sizes(), c10::IntArrayRef({2, 3, 4}));
  TensorDict zeros = td.clone();
  zeros.set("h", at::zeros({2, 3, 2, 4}));
  zeros.set("c", at::zeros({2, 3, 2, 4}));
  EXPECT_TRUE(lstm->forward(zeros).get("y").equal(out.get("y")));
  // The output is the last layer's next h; is_init rows start from zeros.
  EXPECT_TRUE(out.get("y").equal(out.get({"next", "h"}).select(-2, 1)));
  TensorDict given = td.clone();
  given.set("h", at::randn({2, 3, 2, 4}));
  given.set("c", at::randn({2, 3, 2, 4}));
  given.set("is_init", at::ones({2, 3, 1}, at::kBool));
  EXPECT_TRUE(lstm->forward(given).get("y").equal(out.get("y")));
  // Only one of h and c is an error, as in TorchRL.
  TensorDict half = td.clone();
  half.set("h", at::zeros({2, 3, 2, 4}));
  EXPECT_THROW(lstm->forward(half), std::invalid_argument);
  EXPECT_THROW(nn::GRUModule(nn::RecurrentModuleOptions(3, 4).in_keys({"x", "h"}).out_keys({"y", "h2"})),
               std::invalid_argument);
}

// ---- the kinds -----------------------------------------------------------------------------

TEST(RecurrentKindsTest, ExportWritesWhatBuildRead) {
  for (const char* text : {kLstmSpec, kGruSpec}) {
    auto policy = policy::build_policy(spec_of(text), "test.pbtxt", ".");
    ASSERT_TRUE(policy.ok()) << policy.status();
    ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, policy::export_spec(*policy->module, policy->spec));
    const tdpolicy::Module& original = policy->spec.module();
    const tdpolicy::Module& again = exported.module();
    const tdpolicy::Module& a = original.has_sequential() ? original.sequential().modules(1)
                                                          : original.probabilistic_sequential().modules(0);
    const tdpolicy::Module& b =
        again.has_sequential() ? again.sequential().modules(1) : again.probabilistic_sequential().modules(0);
    EXPECT_EQ(a.lstm().DebugString(), b.lstm().DebugString());
    EXPECT_EQ(a.gru().DebugString(), b.gru().DebugString());
    // The exported spec loads and computes the same.
    auto reloaded = policy::build_policy(exported, "exported.pbtxt", ".");
    ASSERT_TRUE(reloaded.ok()) << reloaded.status();
    Actor first(*std::move(policy), ActorOptions().interaction_type(InteractionType::kDeterministic));
    Actor second(*std::move(reloaded), ActorOptions().interaction_type(InteractionType::kDeterministic));
    for (int step = 0; step < 3; ++step) {
      const TensorDict obs = observation(3, step);
      EXPECT_TRUE(first.act(obs).get(first.signature().next_state_keys[0]).equal(
          second.act(obs).get(second.signature().next_state_keys[0])));
    }
  }
}

TEST(RecurrentKindsTest, ValidationNamesTheField) {
  const std::string lstm = kLstmSpec;
  EXPECT_THAT(validation_error(replaced(lstm, R"("recurrent_state_c", "is_init"])", R"("is_init"])")),
              testing::HasSubstr("module.sequential.modules[1].lstm.in_keys: expected 4 keys (input, h, c, is_init), "
                                 "got 3"));
  EXPECT_THAT(validation_error(replaced(lstm, R"(, "next/recurrent_state_c"] } })", R"(] } })")),
              testing::HasSubstr("module.sequential.modules[1].lstm.out_keys: expected 3 keys (output, next h, next "
                                 "c), got 2"));
  EXPECT_THAT(validation_error(replaced(lstm, "hidden_size: 8 num_layers: 2", "hidden_size: 0 num_layers: 2")),
              testing::HasSubstr("module.sequential.modules[1].lstm.hidden_size: must be positive, got 0"));
  EXPECT_THAT(validation_error(replaced(lstm, "num_layers: 2", "num_layers: -1")),
              testing::HasSubstr("module.sequential.modules[1].lstm.num_layers: must be positive, got -1"));
  EXPECT_THAT(validation_error(replaced(lstm, R"(key: "recurrent_state_c" shape: [2, 8])",
                                        R"(key: "recurrent_state_c" shape: [1, 8])")),
              testing::HasSubstr("module.sequential.modules[1].lstm.in_keys[2]: \"recurrent_state_c\" has per-env "
                                 "shape [1, 8], expected [2, 8] (num_layers, hidden_size)"));
  EXPECT_THAT(validation_error(replaced(lstm, "input_size: 6 hidden_size", "input_size: 5 hidden_size")),
              testing::HasSubstr("module.sequential.modules[1].lstm.in_keys[0]: the input has shape [6] but "
                                 "input_size is 5"));
  EXPECT_THAT(validation_error(replaced(lstm, "hidden_size: 8 num_layers: 2", "hidden_size: 8 num_layers: 100000000")),
              testing::HasSubstr("module.sequential.modules[1].lstm: the layer sizes make a network that"));
  EXPECT_THAT(validation_error(replaced(kGruSpec, R"(key: "is_init" shape: [1])", R"(key: "is_init" shape: [2])")),
              testing::HasSubstr("module.probabilistic_sequential.modules[0].gru.in_keys[2]: \"is_init\" has per-env "
                                 "shape [2], expected [1] (is_init, TorchRL's InitTracker)"));
  // Without declared states and is_init the module starts from zeros at every call: valid.
  tdpolicy::PolicySpec stateless = spec_of(kGruSpec);
  stateless.mutable_inputs()->DeleteSubrange(1, 2);
  stateless.clear_output_keys();
  stateless.add_output_keys("action");
  EXPECT_TRUE(policy::validate_spec(stateless, "test.pbtxt").ok()) << policy::validate_spec(stateless, "test.pbtxt");
}

// ---- the actor's state rule ----------------------------------------------------------------

TEST(RecurrentStateRuleTest, TheSignatureKeepsNextKAsTheNextCallsK) {
  auto actor = actor_of(kLstmSpec, ActorOptions().backend(Backend::kLibTorch));
  const policy::Signature& signature = actor->signature();
  EXPECT_EQ(signature.state_keys, (std::vector<NestedKey>{"recurrent_state_h", "recurrent_state_c"}));
  EXPECT_EQ(signature.next_state_keys, (std::vector<NestedKey>{kH, kC}));
  EXPECT_TRUE(signature.find_input("is_init")->optional);
  EXPECT_FALSE(signature.find_input("is_init")->state);
  ASSERT_NE(signature.find_output(kH), nullptr);
  EXPECT_TRUE(signature.find_output(kH)->state);
  EXPECT_EQ(signature.find_output(kH)->shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(signature.find_output("recurrent_state_h"), nullptr);
}

// The actor keeping its state equals the stateless form stepped by hand with step_mdp's moves.
void expect_kept_state_equals_step_mdp(Backend backend, const char* text, double atol) {
  auto kept = actor_of(text, ActorOptions().backend(backend));
  auto stateless = actor_of(text, ActorOptions().backend(Backend::kLibTorch));
  const policy::Signature& signature = kept->signature();
  const int64_t batch = 4;
  TensorDict carried({batch});
  for (size_t k = 0; k < signature.state_keys.size(); ++k) {
    std::vector<int64_t> shape{batch};
    const auto& per_env = signature.find_input(signature.state_keys[k])->shape;
    shape.insert(shape.end(), per_env.begin(), per_env.end());
    carried.set(signature.state_keys[k], at::zeros(shape));
  }
  for (int step = 0; step < 5; ++step) {
    // Step 2 leaves is_init out: no row starts over.
    TensorDict obs = observation(batch, 10 + step, /*with_is_init=*/step != 2);
    TensorDict given = obs.clone();
    for (const NestedKey& key : signature.state_keys) given.set(key, carried.get(key));
    const TensorDict expected = stateless->act(given);
    const TensorDict got = kept->act(obs);
    for (const NestedKey& key : signature.output_keys()) {
      ASSERT_TRUE(got.contains(key)) << key.to_string();
      if (got.get(key).is_floating_point()) {
        EXPECT_TRUE(got.get(key).allclose(expected.get(key), 0, atol))
            << "step " << step << " " << key.to_string() << " max diff "
            << (got.get(key) - expected.get(key)).abs().max().item<double>();
      } else {
        EXPECT_TRUE(got.get(key).equal(expected.get(key))) << "step " << step << " " << key.to_string();
      }
    }
    for (size_t k = 0; k < signature.state_keys.size(); ++k) {
      carried.set(signature.state_keys[k], expected.get(signature.next_state_keys[k]));
    }
  }
  // reset(mask) zeroes the kept state of the masked environments, as is_init does for a row.
  kept->reset(at::tensor({1, 0, 0, 1}).to(at::kBool));
  TensorDict obs = observation(batch, 99, /*with_is_init=*/false);
  TensorDict given = obs.clone();
  for (const NestedKey& key : signature.state_keys) given.set(key, carried.get(key));
  given.set("is_init", at::tensor({1, 0, 0, 1}).to(at::kBool).unsqueeze(-1));
  const TensorDict expected = stateless->act(given);
  EXPECT_TRUE(kept->act(obs).get(signature.next_state_keys[0]).allclose(expected.get(signature.next_state_keys[0]), 0,
                                                                        atol));
}

TEST(RecurrentStateRuleTest, LibTorchKeepsTheLstmStateAsStepMdpMovesIt) {
  expect_kept_state_equals_step_mdp(Backend::kLibTorch, kLstmSpec, 0);
}

TEST(RecurrentStateRuleTest, LibTorchKeepsTheGruStateAsStepMdpMovesIt) {
  expect_kept_state_equals_step_mdp(Backend::kLibTorch, kGruSpec, 0);
}

TEST(RecurrentStateRuleTest, FusedPlanKeepsTheStateAndEqualsLibTorch) {
  for (const char* text : {kLstmSpec, kGruSpec}) {
    auto fused = actor_of(text, ActorOptions().backend(Backend::kFused));
    EXPECT_TRUE(fused->describe().fused_status.ok()) << fused->describe().fused_status;
    expect_kept_state_equals_step_mdp(Backend::kFused, text, 1e-5);
  }
}

TEST(RecurrentStateRuleTest, BatchingActorKeepsTheNextStatePerEnvironment) {
  std::shared_ptr<Actor> shared = actor_of(kGruSpec, ActorOptions().backend(Backend::kLibTorch));
  actor::BatchingActor batcher(shared);
  auto sequential = actor_of(kGruSpec, ActorOptions().backend(Backend::kLibTorch));
  for (int step = 0; step < 3; ++step) {
    const TensorDict obs = observation(2, 30 + step, /*with_is_init=*/step != 1);
    const TensorDict got =
        batcher.act(obs, actor::BatchingRequest().env_ids(at::tensor({int64_t{4}, int64_t{9}})));
    const TensorDict expected = sequential->act(obs);
    EXPECT_TRUE(got.get({"next", "recurrent_state"}).allclose(expected.get({"next", "recurrent_state"})))
        << "step " << step;
  }
}

}  // namespace
}  // namespace tdp
