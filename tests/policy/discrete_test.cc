// Value-based actors as specs: the q_value kind (TorchRL's QValueModule and
// DistributionalQValueModule) and the egreedy kind (EGreedyModule), built, run, exported back and
// validated; the masked categoricals in a probabilistic module read their mask from a key.
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "sdk/policy/call.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::parse_text_or_fail;

// Action values [3, 4] from a linear layer on a [3] observation, then `head`.
tdpolicy::PolicySpec q_policy(const std::string& head, const std::string& extra_inputs = "") {
  return parse_text_or_fail(R"pb(
                              inputs { key: "observation" shape: 3 }
                            )pb" +
                            extra_inputs + R"pb(
                              module { sequential { modules {
                                         network {
                                           in_keys : "observation"
                                           out_keys : "action_value"
                                           network { linear { in_features : 3 out_features : 4 } }
                                         }
                                       }
                                                    modules {)pb" +
                            head + R"pb(}
                                        }
    }
    init_seed: 3
  )pb");
}

constexpr char kMaskInput[] = R"pb(inputs { key: "action_mask" shape: 4 dtype: BOOL })pb";

TensorDict observations(int64_t batch) {
  TensorDict td({batch});
  td.set("observation", at::linspace(-2, 2, batch * 3).reshape({batch, 3}));
  return td;
}

at::Tensor mask_of(int64_t batch) {
  // Row r allows the actions whose index is not r % 4 (and never none).
  at::Tensor mask = at::ones({batch, 4}, at::kBool);
  for (int64_t r = 0; r < batch; ++r) mask[r][r % 4] = false;
  return mask;
}

TensorDict call(const Policy& policy, const TensorDict& td, nn::InteractionType type, uint64_t seed = 0) {
  return call_policy(*policy.module, td.clone(/*deep=*/false),
                     nn::SampleRequest{type, at::detail::createCPUGenerator(seed)});
}

TEST(QValue, OneHotGreedyActionAsTorchRL) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(q_policy("q_value {}"), "t.pbtxt", "."));
  TensorDict out = call(policy, observations(5), nn::InteractionType::kDeterministic);
  const at::Tensor values = out.get("action_value");
  const at::Tensor action = out.get("action");
  EXPECT_EQ(action.scalar_type(), at::kLong);
  EXPECT_TRUE(action.equal((values == std::get<0>(values.max(-1, true))).to(at::kLong)));
  const at::Tensor chosen = out.get("chosen_action_value");
  EXPECT_EQ(chosen.sizes(), (std::vector<int64_t>{5, 1}));
  EXPECT_TRUE(chosen.equal((action * values).sum(-1, true)));
  EXPECT_EQ(chosen.scalar_type(), at::kFloat);
}

TEST(QValue, CategoricalWithAMask) {
  ASSERT_OK_AND_ASSIGN(
      Policy policy,
      build_policy(
          q_policy(R"pb(q_value { action_space: "categorical" action_mask_key: "action_mask" })pb", kMaskInput),
          "t.pbtxt", "."));
  TensorDict td = observations(6);
  td.set("action_mask", mask_of(6));
  TensorDict out = call(policy, td, nn::InteractionType::kDeterministic);
  const at::Tensor action = out.get("action");
  EXPECT_EQ(action.sizes(), (std::vector<int64_t>{6}));
  EXPECT_TRUE(mask_of(6).gather(-1, action.unsqueeze(-1)).all().item<bool>());
  // Masked-out action values are written as the dtype's lowest value, as TorchRL writes them.
  const at::Tensor values = out.get("action_value");
  EXPECT_TRUE(
      (values.masked_select(mask_of(6).logical_not()) == std::numeric_limits<float>::lowest()).all().item<bool>());
  EXPECT_TRUE(out.get("chosen_action_value").equal(values.gather(-1, action.unsqueeze(-1))));
}

TEST(QValue, DistributionalExpectedValues) {
  tdpolicy::PolicySpec spec = parse_text_or_fail(R"pb(
    inputs {
      key: "action_value"
      shape: [ 3, 4 ]
    }
    module { q_value { action_space: "categorical" } }
    init_seed: 1
  )pb");
  *spec.mutable_module()->mutable_q_value()->mutable_support() = to_tensor_proto(at::tensor({-1.0f, 0.0f, 2.0f}));
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "t.pbtxt", "."));
  TensorDict td({2});
  const at::Tensor logits = at::linspace(-1, 1, 24).reshape({2, 3, 4}).sin() * 3;
  td.set("action_value", logits);
  TensorDict out = call(policy, td, nn::InteractionType::kDeterministic);
  const at::Tensor log_softmax = logits.log_softmax(-2);
  EXPECT_TRUE(out.get("action_value").equal(log_softmax));
  const at::Tensor q = (log_softmax.exp() * at::tensor({-1.0f, 0.0f, 2.0f}).unsqueeze(-1)).sum(-2);
  EXPECT_TRUE(out.get("action").equal(q.argmax(-1)));
  EXPECT_FALSE(out.contains("chosen_action_value"));
}

TEST(EGreedy, PassesTheActionThroughUnlessRandom) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(q_policy(R"pb(                                                                 q_value {} }
                                                                                                                                  modules {
                                                                 egreedy { eps: 0.5 spec { one_hot { n: 4 } shape: 4 } })pb"),
                                                   "t.pbtxt", "."));
  const TensorDict td = observations(8);
  const at::Tensor greedy = call(policy, td, nn::InteractionType::kDeterministic).get("action");
  for (auto type : {nn::InteractionType::kMode, nn::InteractionType::kMean, nn::InteractionType::kMedian}) {
    EXPECT_TRUE(call(policy, td, type).get("action").equal(greedy));
  }
  // The one-hot spec's dtype is TorchRL's OneHot default, bool: where() promotes to int64.
  EXPECT_EQ(call(policy, td, nn::InteractionType::kRandom).get("action").scalar_type(), at::kLong);
}

TEST(EGreedy, ReplacesAboutEpsOfTheRowsWithAllowedActionsReproducibly) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(q_policy(R"pb(                                                                 q_value { action_space: "categorical" action_mask_key: "action_mask" } }
                                                                                                                                  modules {
                                 egreedy { eps: 0.3 action_mask_key: "action_mask" spec { categorical { n: 4 } } })pb",
                                                            kMaskInput),
                                                   "t.pbtxt", "."));
  const int64_t n = 4000;
  TensorDict td = observations(n);
  td.set("action_mask", mask_of(n));
  const at::Tensor greedy = call(policy, td, nn::InteractionType::kDeterministic).get("action");
  const at::Tensor drawn = call(policy, td, nn::InteractionType::kRandom, 11).get("action");
  EXPECT_TRUE(drawn.equal(call(policy, td, nn::InteractionType::kRandom, 11).get("action")));
  EXPECT_FALSE(drawn.equal(call(policy, td, nn::InteractionType::kRandom, 12).get("action")));
  EXPECT_TRUE(mask_of(n).gather(-1, drawn.unsqueeze(-1)).all().item<bool>());
  // Three actions allowed per row: a replaced action differs from the greedy one 2/3 of the time.
  const double changed = (drawn != greedy).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(changed, 0.3 * 2.0 / 3.0, 0.03);
}

TEST(ValueBasedKinds, ExportWhatTheyBuild) {
  const std::string kHeads[] = {
      R"pb(q_value {
             action_value_key: "action_value"
             out_keys: [ "action", "action_value", "chosen_action_value" ]
             action_space: "one_hot"
           })pb",
      R"pb(q_value {
             action_value_key: "action_value"
             action_mask_key: "action_mask"
             action_space: "categorical"
             out_keys: [ "greedy", "action_value", "value" ]
           })pb",
      R"pb(           q_value { action_value_key: "action_value" action_space: "categorical"
                     out_keys: ["action", "action_value", "chosen_action_value"] } }
                      modules {
           egreedy { eps: 0.25 action_key: "action" action_mask_key: "action_mask"
                     spec { categorical { n: 4 } dtype: INT64 } })pb",
      R"pb(           q_value { action_value_key: "action_value" action_space: "one_hot"
                     out_keys: ["action", "action_value", "chosen_action_value"] } }
                      modules {
           egreedy { eps: 1 action_key: "action" spec { one_hot { n: 4 } shape: 4 dtype: BOOL } })pb",
  };
  for (const std::string& head : kHeads) {
    tdpolicy::PolicySpec spec = q_policy(head, kMaskInput);
    ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "t.pbtxt", "."));
    ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*policy.module, spec));
    const auto& want = spec.module().sequential().modules();
    const auto& got = exported.module().sequential().modules();
    ASSERT_EQ(got.size(), want.size());
    for (int i = 1; i < want.size(); ++i) {
      // The exporter marks the rewritten action values / action as overwritten on purpose.
      tdpolicy::Module expected = want[i];
      expected.clear_overwrite_keys();
      tdpolicy::Module actual = got[i];
      actual.clear_overwrite_keys();
      actual.clear_name();  // a sequential's children are named by position
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(actual, expected))
          << "built from:\n"
          << expected.DebugString() << "exported:\n"
          << actual.DebugString();
    }
    EXPECT_OK(validate_spec(exported, "exported.pbtxt"));
  }
}

std::string error_of(const tdpolicy::PolicySpec& spec) {
  absl::Status status = validate_spec(spec, "t.pbtxt");
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

TEST(ValueBasedKinds, ValidationErrorsNameTheField) {
  const std::string q = "t.pbtxt: module.sequential.modules[1].q_value";
  EXPECT_EQ(error_of(q_policy(R"pb(q_value { action_space: "mult_one_hot" })pb")),
            q + ".action_space: mult_one_hot needs TorchRL's var_nums (each action component's cardinality), which "
                "the spec has no field for (hint: one_hot or categorical)");
  EXPECT_EQ(error_of(q_policy(R"pb(q_value { action_space: "binary" })pb")),
            q + ".action_space: TorchRL's QValueModule does not implement the binary action space (hint: one_hot or "
                "categorical)");
  EXPECT_EQ(error_of(q_policy(R"pb(q_value { action_space: "argmax" })pb")),
            q + ".action_space: unknown action space \"argmax\" (hint: one_hot (the default) or categorical)");
  EXPECT_EQ(error_of(q_policy(R"pb(q_value { out_keys: [ "action", "action_value" ] })pb")),
            q + ".out_keys: expected 3 out_keys (action, action_value, chosen_action_value), got 2");
  EXPECT_EQ(error_of(q_policy(R"pb(q_value { out_keys: [ "action", "q", "c" ] })pb")),
            q + ".out_keys[1]: the second out_key must be the action-value key \"action_value\", got \"q\" (hint: "
                "TorchRL writes the (masked) action values back where it read them)");
  EXPECT_EQ(error_of(q_policy(R"pb(q_value { action_mask_key: "action_mask" })pb",
                              R"pb(inputs { key: "action_mask" shape: 5 dtype: BOOL })pb")),
            q + ".action_mask_key: the mask \"action_mask\" has per-environment shape [5]; the action values have 4 "
                "actions");
  tdpolicy::PolicySpec distributional = q_policy("q_value {}");
  *distributional.mutable_module()->mutable_sequential()->mutable_modules(1)->mutable_q_value()->mutable_support() =
      to_tensor_proto(at::zeros({3}));
  EXPECT_EQ(error_of(distributional),
            q + ".action_value_key: \"action_value\" has per-environment shape [4]; a support of 3 atoms reads [..., "
                "3, n_actions]");
  const std::string e = "t.pbtxt: module.sequential.modules[2].egreedy";
  auto egreedy = [](const std::string& fields) {
    return q_policy(R"pb(                         q_value { action_space: "categorical" } }
                                                  modules { egreedy { )pb" +
                        fields + " }",
                    kMaskInput);
  };
  EXPECT_EQ(error_of(egreedy("eps: 1.5 spec { categorical { n: 4 } }")),
            e + ".eps: eps 1.5 is not a probability (hint: 0 <= eps <= 1)");
  EXPECT_EQ(error_of(egreedy("eps: 0.1")),
            e + ".spec: no action spec: random actions are drawn from it (hint: one_hot { n: ... }, categorical { n: "
                "... } or bounded { low high })");
  EXPECT_EQ(error_of(egreedy("eps: 0.1 spec { categorical { n: 0 } }")),
            e + ".spec.categorical.n: must be positive, got 0");
  EXPECT_EQ(error_of(egreedy("eps: 0.1 spec { one_hot { n: 4 } }")),
            e + ".action_key: a one_hot spec of 4 actions replaces one-hot actions [..., 4]; the action has "
                "per-environment shape [] (hint: a categorical spec for integer actions)");
  EXPECT_EQ(error_of(egreedy("eps: 0.1 spec { categorical { n: 4 } shape: 2 }")),
            e + ".spec.shape: the spec's shape [2] does not end the action's per-environment shape []");
}

TEST(MaskedCategorical, AProbabilisticModuleReadsTheMaskFromAKey) {
  tdpolicy::PolicySpec spec = q_policy(R"pb(probabilistic {
                                              in_keys_map { name: "logits" key: "action_value" }
                                              in_keys_map { name: "mask" key: "action_mask" }
                                              out_keys: "action"
                                              distribution: "masked_categorical"
                                              return_log_prob: true
                                            })pb",
                                       kMaskInput);
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "t.pbtxt", "."));
  EXPECT_TRUE(policy.signature.supports(nn::InteractionType::kRandom));
  TensorDict td = observations(500);
  td.set("action_mask", mask_of(500));
  TensorDict out = call(policy, td, nn::InteractionType::kRandom, 5);
  EXPECT_TRUE(mask_of(500).gather(-1, out.get("action").unsqueeze(-1)).all().item<bool>());
  EXPECT_TRUE(at::isfinite(out.get("action_log_prob")).all().item<bool>());
  ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*policy.module, spec));
  EXPECT_EQ(exported.module().sequential().modules(1).probabilistic().distribution(), "masked_categorical");
}

}  // namespace
}  // namespace tdp::policy
