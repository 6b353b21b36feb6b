// The ready specs under policies/: each loads, and writes its output keys with the documented
// shapes and dtypes at batch 1 and 16 under every interaction type its distribution supports
// (and fails with a clear error under the others); the GRU actor carries its state.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sdk/probabilistic/interaction_type.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/error_of.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using nn::InteractionType;
using testing::run;

struct Entry {
  std::string key;
  std::vector<int64_t> shape;  // without the batch dim
  c10::ScalarType dtype;
};

struct PolicyCase {
  std::string file;
  std::vector<Entry> inputs;
  std::vector<Entry> outputs;
  // Interaction types the distribution has no value for, and a piece of the error it gives.
  std::vector<std::pair<InteractionType, std::string>> unsupported;
  // Under MEAN a Categorical's value is NaN, as in torch.distributions: not an action, so the
  // module says so (PyTorch fails later, scoring it, with an index out of bounds).
};

std::vector<PolicyCase> policy_cases() {
  const auto f32 = at::kFloat;
  const auto i64 = at::kLong;
  return {
      {"policies/pendulum_tanh_gaussian.pbtxt",
       {{"observation", {3}, f32}},
       {{"action", {1}, f32}, {"action_log_prob", {}, f32}, {"loc", {1}, f32}, {"scale", {1}, f32}},
       {{InteractionType::kMode, "mode"}, {InteractionType::kMedian, "median"}}},
      {"policies/cartpole_categorical.pbtxt",
       {{"observation", {4}, f32}},
       {{"action", {}, i64}, {"action_log_prob", {}, f32}, {"logits", {2}, f32}},
       {{InteractionType::kMedian, "median"}, {InteractionType::kMean, "Categorical has no mean (its actions are discrete); use MODE or DETERMINISTIC"}}},
      {"policies/goal_hybrid.pbtxt",
       {{"observation", {4}, f32}},
       {{"action_type", {}, i64},
        {"action_param", {1}, f32},
        {"action_type_log_prob", {}, f32},
        {"action_param_log_prob", {1}, f32},
        {"params/action_type/logits", {2}, f32},
        {"params/action_param/loc", {1}, f32},
        {"params/action_param/scale", {1}, f32}},
       {{InteractionType::kMedian, "median"}, {InteractionType::kMean, "Categorical has no mean (its actions are discrete); use MODE or DETERMINISTIC"}}},
      {"policies/goal_autoregressive.pbtxt",
       {{"observation", {4}, f32}},
       {{"action_type", {}, i64},
        {"action_param", {1}, f32},
        {"action_type_log_prob", {}, f32},
        {"action_param_log_prob", {1}, f32},
        {"params/action_type/logits", {2}, f32},
        {"action_type_one_hot", {2}, f32},
        {"param_input", {6}, f32},
        {"params/action_param/loc", {1}, f32},
        {"params/action_param/scale", {1}, f32}},
       {{InteractionType::kMedian, "median"}, {InteractionType::kMean, "Categorical has no mean (its actions are discrete); use MODE or DETERMINISTIC"}}},
      {"policies/recurrent_gru.pbtxt",
       {{"observation", {4}, f32}, {"hidden", {32}, f32}},
       {{"action", {}, i64}, {"action_log_prob", {}, f32}, {"hidden", {32}, f32}, {"logits", {2}, f32}},
       {{InteractionType::kMedian, "median"}, {InteractionType::kMean, "Categorical has no mean (its actions are discrete); use MODE or DETERMINISTIC"}}},
  };
}

std::vector<int64_t> with_batch(int64_t batch, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out = {batch};
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

TensorDict inputs_for(const PolicyCase& c, int64_t batch) {
  TensorDict td({batch});
  for (const Entry& input : c.inputs) td.set(input.key, at::randn(with_batch(batch, input.shape)));
  return td;
}

class PoliciesTest : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(PoliciesTest, LoadsAndDeclaresWhatItWrites) {
  const PolicyCase& c = GetParam();
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy(c.file));
  std::vector<std::string> declared(policy.spec.output_keys().begin(), policy.spec.output_keys().end());
  for (const std::string& key : declared) {
    bool documented = false;
    for (const Entry& out : c.outputs) documented |= out.key == key;
    EXPECT_TRUE(documented) << c.file << " declares output " << key << " that the test does not check";
  }
  ASSERT_EQ(policy.spec.inputs_size(), static_cast<int>(c.inputs.size()));
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    EXPECT_EQ(policy.spec.inputs(i).key(), c.inputs[i].key);
    EXPECT_EQ(std::vector<int64_t>(policy.spec.inputs(i).shape().begin(), policy.spec.inputs(i).shape().end()),
              c.inputs[i].shape);
  }
}

TEST_P(PoliciesTest, WritesItsOutputsUnderEveryInteractionType) {
  const PolicyCase& c = GetParam();
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy(c.file));
  at::manual_seed(3);
  for (int64_t batch : {1, 16}) {
    const TensorDict inputs = inputs_for(c, batch);
    for (InteractionType type : {InteractionType::kDeterministic, InteractionType::kMode, InteractionType::kRandom,
                                 InteractionType::kMean, InteractionType::kMedian}) {
      SCOPED_TRACE(::testing::Message() << c.file << " batch " << batch << " under " << nn::to_string(type));
      const std::string* unsupported = nullptr;
      for (const auto& [t, text] : c.unsupported) {
        if (t == type) unsupported = &text;
      }
      if (unsupported != nullptr) {
        EXPECT_THAT(test_util::error_of<std::exception>([&] { run(policy, inputs, type); }),
                    ::testing::HasSubstr(*unsupported));
        continue;
      }
      TensorDict out = run(policy, inputs, type);
      for (const Entry& entry : c.outputs) {
        ASSERT_OK_AND_ASSIGN(const NestedKey key, parse_key(entry.key));
        ASSERT_TRUE(out.contains(key)) << entry.key;
        at::Tensor value = out.get(key);
        EXPECT_EQ(value.sizes().vec(), with_batch(batch, entry.shape)) << entry.key;
        EXPECT_EQ(value.scalar_type(), entry.dtype) << entry.key;
        EXPECT_TRUE(value.isfinite().all().item<bool>()) << entry.key << ": " << value;
      }
    }
  }
}

TEST_P(PoliciesTest, DeterministicIsRepeatableAndRandomVaries) {
  const PolicyCase& c = GetParam();
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy(c.file));
  at::manual_seed(5);
  const TensorDict inputs = inputs_for(c, 256);
  TensorDict a = run(policy, inputs, InteractionType::kDeterministic);
  TensorDict b = run(policy, inputs, InteractionType::kDeterministic);
  TensorDict r1 = run(policy, inputs, InteractionType::kRandom);
  TensorDict r2 = run(policy, inputs, InteractionType::kRandom);
  bool some_random_differs = false;
  for (const std::string& key : policy.spec.output_keys()) {
    ASSERT_OK_AND_ASSIGN(const NestedKey nested, parse_key(key));
    EXPECT_TRUE(a.get(nested).equal(b.get(nested))) << key;
    if (key.find("log_prob") == std::string::npos && key != "hidden") {
      some_random_differs |= !r1.get(nested).equal(r2.get(nested));
    }
  }
  EXPECT_TRUE(some_random_differs) << "two random draws of 256 actions were identical";
}

INSTANTIATE_TEST_SUITE_P(Policies, PoliciesTest, ::testing::ValuesIn(policy_cases()),
                         [](const ::testing::TestParamInfo<PolicyCase>& info) {
                           std::string name = info.param.file.substr(info.param.file.find('/') + 1);
                           return name.substr(0, name.find('.'));
                         });

TEST(PoliciesValues, PendulumActionsStayInTheTorqueRange) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/pendulum_tanh_gaussian.pbtxt"));
  at::manual_seed(11);
  // Large observations push loc far out, where the squashing must still bound the action.
  TensorDict td({{"observation", at::randn({512, 3}) * 50}}, {512});
  for (InteractionType type : {InteractionType::kDeterministic, InteractionType::kRandom}) {
    at::Tensor action = run(policy, td, type).get("action");
    EXPECT_LE(action.max().item<double>(), 2.0);
    EXPECT_GE(action.min().item<double>(), -2.0);
  }
  TensorDict out = run(policy, td, InteractionType::kDeterministic);
  // Deterministic: the squashed loc, 2 tanh(loc) on [-2, 2] (up to safe_tanh's clamp).
  EXPECT_TRUE(at::allclose(out.get("action"), 2 * out.get("loc").tanh(), 1e-5, 1e-5));
}

TEST(PoliciesValues, CategoricalDeterministicIsTheArgmaxAndLogProbsAreLogSoftmax) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/cartpole_categorical.pbtxt"));
  TensorDict td({{"observation", at::randn({64, 4})}}, {64});
  TensorDict out = run(policy, td, InteractionType::kDeterministic);
  at::Tensor logits = out.get("logits");
  EXPECT_TRUE(out.get("action").equal(logits.argmax(-1)));
  at::Tensor expected = logits.log_softmax(-1).gather(-1, out.get("action").unsqueeze(-1)).squeeze(-1);
  EXPECT_TRUE(at::allclose(out.get("action_log_prob"), expected, 1e-6, 1e-6));
}

TEST(PoliciesValues, HybridPartsFollowTheirHeads) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/goal_hybrid.pbtxt"));
  TensorDict td({{"observation", at::randn({32, 4})}}, {32});
  TensorDict out = run(policy, td, InteractionType::kDeterministic);
  EXPECT_TRUE(out.get("action_type").equal(out.get({"params", "action_type", "logits"}).argmax(-1)));
  EXPECT_TRUE(out.get("action_param").equal(out.get({"params", "action_param", "loc"})));
  EXPECT_GT(out.get({"params", "action_param", "scale"}).min().item<double>(), 0.0);
  at::Tensor loc = out.get({"params", "action_param", "loc"});
  at::Tensor scale = out.get({"params", "action_param", "scale"});
  // Normal log-density at its own mean.
  EXPECT_TRUE(at::allclose(out.get("action_param_log_prob"), -scale.log() - 0.5 * std::log(2 * M_PI), 1e-5, 1e-5));
}

// The parameter's Normal is computed from the observation and the sampled type: the one-hot
// the parameter head reads is the drawn type's, and the same observation with the other type
// gives another loc.
TEST(PoliciesValues, AutoregressiveParameterFollowsTheSampledType) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/goal_autoregressive.pbtxt"));
  at::manual_seed(5);
  TensorDict td({{"observation", at::randn({64, 4})}}, {64});
  TensorDict out = run(policy, td, InteractionType::kRandom);
  const at::Tensor type = out.get("action_type");
  EXPECT_TRUE(out.get("action_type_one_hot").equal(at::one_hot(type, 2).to(at::kFloat)));
  EXPECT_TRUE(out.get("param_input").equal(at::cat({td.get("observation"), out.get("action_type_one_hot")}, -1)));
  EXPECT_GT(type.sum().item<int64_t>(), 0);
  EXPECT_LT(type.sum().item<int64_t>(), 64);  // both types drawn
  TensorDict det = run(policy, td, InteractionType::kDeterministic);
  EXPECT_TRUE(det.get("action_type").equal(det.get({"params", "action_type", "logits"}).argmax(-1)));
  EXPECT_TRUE(det.get("action_param").equal(det.get({"params", "action_param", "loc"})));
  // Where the random type differs from the argmax, the loc differs too.
  const at::Tensor differ = type.ne(det.get("action_type"));
  ASSERT_GT(differ.sum().item<int64_t>(), 0);
  const at::Tensor loc_r = out.get({"params", "action_param", "loc"}).squeeze(-1).masked_select(differ);
  const at::Tensor loc_d = det.get({"params", "action_param", "loc"}).squeeze(-1).masked_select(differ);
  EXPECT_FALSE(loc_r.allclose(loc_d));
}

// The simulator feeds "hidden" back each step; batched envs must not see each other's state.
TEST(PoliciesValues, RecurrentActorCarriesItsHiddenStatePerEnvironment) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/recurrent_gru.pbtxt"));
  constexpr int64_t kEnvs = 16;
  constexpr int kSteps = 4;
  at::manual_seed(17);
  at::Tensor observations = at::randn({kSteps, kEnvs, 4});

  at::Tensor hidden = at::zeros({kEnvs, 32});
  std::vector<at::Tensor> hiddens;
  for (int t = 0; t < kSteps; ++t) {
    TensorDict td({{"observation", observations[t]}, {"hidden", hidden}}, {kEnvs});
    TensorDict out = run(policy, td, InteractionType::kDeterministic);
    at::Tensor next = out.get("hidden");
    EXPECT_FALSE(next.equal(hidden)) << "step " << t << " did not update the state";
    hidden = next;
    hiddens.push_back(next);
  }
  // The state matters: the same observation from a zero state gives another next state.
  TensorDict fresh({{"observation", observations[kSteps - 1]}, {"hidden", at::zeros({kEnvs, 32})}}, {kEnvs});
  EXPECT_FALSE(run(policy, fresh, InteractionType::kDeterministic).get("hidden").equal(hiddens.back()));

  // Environment 5 alone, at batch 1, follows the same trajectory.
  at::Tensor h = at::zeros({1, 32});
  for (int t = 0; t < kSteps; ++t) {
    TensorDict td({{"observation", observations[t].narrow(0, 5, 1)}, {"hidden", h}}, {1});
    h = run(policy, td, InteractionType::kDeterministic).get("hidden");
    EXPECT_TRUE(at::allclose(h[0], hiddens[t][5], 1e-6, 1e-6)) << "step " << t;
  }
}

}  // namespace
}  // namespace tdp::policy
