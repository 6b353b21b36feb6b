// The C API (sdk/c/tdp_c.h) called from C++: metadata, actions equal to the C++ Actor's on the
// same seed, per-call seeds, the batching actor (merged calls from many threads), recurrent state
// and reset, the flat API, and every kind of bad input, each with a status and a message that
// says what was wrong.
#include "sdk/c/tdp_c.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/config.h"
#include "sdk/actor/actor.h"
#include "tests/testing/files.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using tdp::test_util::runfile;
using tdp::test_util::temp_path;
using tdp::test_util::write_file;

std::string policy(const std::string& name) { return runfile("policies/" + name); }

// An actor loaded through the C API, freed at the end of the test.
struct Loaded {
  tdp_actor* actor = nullptr;
  ~Loaded() { tdp_actor_free(actor); }
};

tdp_actor* load(Loaded& holder, const std::string& path, uint64_t seed = 0, tdp_backend backend = TDP_BACKEND_AUTO) {
  tdp_actor_options* options = nullptr;
  EXPECT_EQ(tdp_options_create(&options), TDP_OK);
  EXPECT_EQ(tdp_options_set_seed(options, seed), TDP_OK);
  EXPECT_EQ(tdp_options_set_backend(options, backend), TDP_OK);
  EXPECT_EQ(tdp_actor_load(path.c_str(), options, &holder.actor), TDP_OK) << tdp_last_error();
  tdp_options_free(options);
  return holder.actor;
}

std::vector<float> observations(int64_t batch, int64_t width, float scale = 0.05f) {
  std::vector<float> values(batch * width);
  for (size_t i = 0; i < values.size(); ++i) values[i] = scale * static_cast<float>(static_cast<int>(i % 7) - 3);
  return values;
}

TEST(CApiTest, VersionAndNames) {
  EXPECT_STREQ(tdp_version(), "0.1.0");
  EXPECT_STREQ(tdp_status_name(TDP_OK), "TDP_OK");
  EXPECT_STREQ(tdp_status_name(TDP_NOT_FOUND), "TDP_NOT_FOUND");
  EXPECT_STREQ(tdp_status_name(static_cast<tdp_status>(99)), "unknown tdp_status");
  EXPECT_STREQ(tdp_dtype_name(TDP_INT64), "int64");
  EXPECT_EQ(tdp_dtype_name(static_cast<tdp_dtype>(0)), nullptr);
  EXPECT_EQ(tdp_dtype_size(TDP_FLOAT32), 4u);
  EXPECT_EQ(tdp_dtype_size(TDP_BOOL), 1u);
  EXPECT_EQ(tdp_dtype_size(static_cast<tdp_dtype>(42)), 0u);
}

TEST(CApiTest, DescribesInputsAndOutputs) {
  Loaded holder;
  tdp_actor* actor = load(holder, policy("cartpole_categorical.pbtxt"));
  ASSERT_NE(actor, nullptr);
  EXPECT_STREQ(tdp_actor_name(actor), "cartpole_categorical");
  size_t count = 0;
  ASSERT_EQ(tdp_actor_num_inputs(actor, &count), TDP_OK);
  EXPECT_EQ(count, 1u);
  const char* name = nullptr;
  tdp_dtype dtype{};
  const int64_t* dims = nullptr;
  size_t ndim = 0;
  ASSERT_EQ(tdp_actor_input(actor, 0, &name, &dtype, &dims, &ndim), TDP_OK);
  EXPECT_STREQ(name, "observation");
  EXPECT_EQ(dtype, TDP_FLOAT32);
  ASSERT_EQ(ndim, 1u);
  EXPECT_EQ(dims[0], 4);

  ASSERT_EQ(tdp_actor_num_outputs(actor, &count), TDP_OK);
  ASSERT_EQ(count, 2u);
  ASSERT_EQ(tdp_actor_output(actor, 0, &name, &dtype, &dims, &ndim), TDP_OK);
  EXPECT_STREQ(name, "action");
  EXPECT_EQ(dtype, TDP_INT64);
  EXPECT_EQ(ndim, 0u);
  ASSERT_EQ(tdp_actor_output(actor, 1, &name, &dtype, nullptr, nullptr), TDP_OK);
  EXPECT_STREQ(name, "action_log_prob");
  EXPECT_EQ(dtype, TDP_FLOAT32);

  size_t elements = 0;
  ASSERT_EQ(tdp_actor_element_count(actor, "observation", &elements), TDP_OK);
  EXPECT_EQ(elements, 4u);
  ASSERT_EQ(tdp_actor_element_count(actor, "action", &elements), TDP_OK);
  EXPECT_EQ(elements, 1u);

  EXPECT_EQ(tdp_actor_output(actor, 2, &name, nullptr, nullptr, nullptr), TDP_OUT_OF_RANGE);
  EXPECT_THAT(tdp_last_error(), HasSubstr("output index 2 is out of range: the policy has 2 outputs"));
  EXPECT_EQ(tdp_actor_element_count(actor, "obs", &elements), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("\"obs\" is neither an input (\"observation\")"));
}

// The C API acts as the C++ Actor with the same options: same draws for the same seed.
TEST(CApiTest, ActsAsTheCppActor) {
  for (const char* name : {"cartpole_categorical.pbtxt", "pendulum_tanh_gaussian.pbtxt"}) {
    SCOPED_TRACE(name);
    const bool discrete = std::string(name).find("cartpole") == 0;
    const int64_t width = discrete ? 4 : 3;
    Loaded holder;
    tdp_actor* actor = load(holder, policy(name), /*seed=*/11);
    ASSERT_NE(actor, nullptr);
    auto cpp = tdp::actor::Actor::load(policy(name), tdp::actor::ActorOptions().seed(11));
    ASSERT_TRUE(cpp.ok()) << cpp.status();

    const int64_t batch = 5;
    std::vector<float> obs = observations(batch, width);
    for (tdp_interaction type : {TDP_INTERACTION_ACTOR, TDP_INTERACTION_DETERMINISTIC, TDP_INTERACTION_RANDOM}) {
      SCOPED_TRACE(static_cast<int>(type));
      std::vector<int64_t> int_action(batch);
      std::vector<float> float_action(batch);
      std::vector<float> log_prob(batch);
      tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
      tdp_output out[] = {
          discrete ? tdp_output{"action", TDP_INT64, int_action.data(), int_action.size()}
                   : tdp_output{"action", TDP_FLOAT32, float_action.data(), float_action.size()},
          {"action_log_prob", TDP_FLOAT32, log_prob.data(), log_prob.size()}};
      ASSERT_EQ(tdp_actor_act(actor, batch, in, 1, out, 2, type), TDP_OK) << tdp_last_error();
      EXPECT_STREQ(tdp_last_error(), "");

      at::Tensor tensor = at::from_blob(obs.data(), {batch, width}, at::kFloat);
      tdp::TensorDict td({{"observation", tensor}}, {batch});
      tdp::TensorDict expected =
          type == TDP_INTERACTION_ACTOR
              ? (*cpp)->act(td)
              : (*cpp)->act(td, type == TDP_INTERACTION_RANDOM ? tdp::nn::InteractionType::kRandom
                                                               : tdp::nn::InteractionType::kDeterministic);
      at::Tensor action = discrete ? at::from_blob(int_action.data(), {batch}, at::kLong)
                                   : at::from_blob(float_action.data(), {batch, 1}, at::kFloat);
      EXPECT_TRUE(at::equal(action, expected.get("action"))) << action << expected.get("action");
      EXPECT_TRUE(at::allclose(at::from_blob(log_prob.data(), {batch}, at::kFloat),
                               expected.get("action_log_prob").reshape({batch}), 1e-6, 1e-6));
    }
  }
}

TEST(CApiTest, ActsOnTheLibTorchBackendAndAsksForSomeOutputsOnly) {
  Loaded holder;
  tdp_actor* actor = load(holder, policy("goal_hybrid.pbtxt"), 3, TDP_BACKEND_LIBTORCH);
  ASSERT_NE(actor, nullptr);
  size_t count = 0;
  ASSERT_EQ(tdp_actor_num_outputs(actor, &count), TDP_OK);
  EXPECT_EQ(count, 4u);
  const int64_t batch = 4;
  std::vector<float> obs = observations(batch, 4);
  std::vector<float> param(batch);
  tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
  tdp_output out[] = {{"action_param", TDP_FLOAT32, param.data(), param.size()}};
  ASSERT_EQ(tdp_actor_act(actor, batch, in, 1, out, 1, TDP_INTERACTION_DETERMINISTIC), TDP_OK) << tdp_last_error();

  auto cpp = tdp::actor::Actor::load(policy("goal_hybrid.pbtxt"),
                                     tdp::actor::ActorOptions().backend(tdp::actor::Backend::kLibTorch));
  ASSERT_TRUE(cpp.ok()) << cpp.status();
  tdp::TensorDict td({{"observation", at::from_blob(obs.data(), {batch, 4}, at::kFloat)}}, {batch});
  at::Tensor expected = (*cpp)->act(td, tdp::nn::InteractionType::kDeterministic).get("action_param");
  EXPECT_TRUE(at::allclose(at::from_blob(param.data(), {batch, 1}, at::kFloat), expected, 1e-6, 1e-6));
}

// The output table is the policy's signature: with composite_lp_aggregate on, a composite
// policy's summed log-prob ("sample_log_prob", which the spec does not list) is an output a C
// caller can ask for, equal to the C++ Actor's; off, it is not an output at all.
TEST(CApiTest, OutputsFollowTheAggregationMode) {
  for (const bool aggregate : {true, false}) {
    SCOPED_TRACE(aggregate ? "aggregated" : "per part");
    tdp_actor_options* options = nullptr;
    ASSERT_EQ(tdp_options_create(&options), TDP_OK);
    ASSERT_EQ(tdp_options_set_seed(options, 5), TDP_OK);
    ASSERT_EQ(tdp_options_set_composite_lp_aggregate(options, aggregate ? 1 : 0), TDP_OK);
    Loaded holder;
    ASSERT_EQ(tdp_actor_load(policy("goal_hybrid.pbtxt").c_str(), options, &holder.actor), TDP_OK) << tdp_last_error();
    tdp_options_free(options);

    size_t count = 0;
    ASSERT_EQ(tdp_actor_num_outputs(holder.actor, &count), TDP_OK);
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      tdp_dtype dtype{};
      ASSERT_EQ(tdp_actor_output(holder.actor, i, &name, &dtype, nullptr, nullptr), TDP_OK);
      names.emplace_back(name);
    }
    // The per-part log-probs are written in both modes (as tensordict does); the sum only when
    // aggregated.
    std::vector<std::string> expected{"action_type", "action_param", "action_type_log_prob", "action_param_log_prob"};
    if (aggregate) expected.push_back("sample_log_prob");
    EXPECT_EQ(names, expected);
    size_t elements = 0;
    EXPECT_EQ(tdp_actor_element_count(holder.actor, "sample_log_prob", &elements),
              aggregate ? TDP_OK : TDP_INVALID_ARGUMENT);
    if (!aggregate) continue;
    EXPECT_EQ(elements, 1u);

    const int64_t batch = 3;
    std::vector<float> obs = observations(batch, 4);
    std::vector<float> log_prob(batch);
    tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
    tdp_output out[] = {{"sample_log_prob", TDP_FLOAT32, log_prob.data(), log_prob.size()}};
    ASSERT_EQ(tdp_actor_act(holder.actor, batch, in, 1, out, 1, TDP_INTERACTION_RANDOM), TDP_OK) << tdp_last_error();
    auto cpp = tdp::actor::Actor::load(policy("goal_hybrid.pbtxt"),
                                       tdp::actor::ActorOptions().seed(5).composite_lp_aggregate(true));
    ASSERT_TRUE(cpp.ok()) << cpp.status();
    tdp::TensorDict td({{"observation", at::from_blob(obs.data(), {batch, 4}, at::kFloat)}}, {batch});
    at::Tensor summed = (*cpp)->act(td, tdp::nn::InteractionType::kRandom).get("sample_log_prob");
    EXPECT_TRUE(at::allclose(at::from_blob(log_prob.data(), {batch}, at::kFloat), summed.reshape({batch}), 1e-6, 1e-6))
        << summed;
  }
}

TEST(CApiTest, FlatApiMatchesTheNamedOne) {
  Loaded named_holder;
  Loaded flat_holder;
  tdp_actor* named = load(named_holder, policy("pendulum_tanh_gaussian.pbtxt"), 5);
  tdp_actor* flat = load(flat_holder, policy("pendulum_tanh_gaussian.pbtxt"), 5);
  ASSERT_NE(named, nullptr);
  ASSERT_NE(flat, nullptr);
  int64_t observation_size = 0;
  int64_t action_size = 0;
  ASSERT_EQ(tdp_actor_flat_sizes(flat, &observation_size, &action_size), TDP_OK) << tdp_last_error();
  EXPECT_EQ(observation_size, 3);
  EXPECT_EQ(action_size, 1);

  const int64_t batch = 3;
  std::vector<float> obs = observations(batch, 3);
  std::vector<float> flat_action(batch), flat_lp(batch), action(batch), lp(batch);
  ASSERT_EQ(tdp_actor_act_flat(flat, batch, obs.data(), flat_action.data(), flat_lp.data(),
                               TDP_INTERACTION_DETERMINISTIC),
            TDP_OK)
      << tdp_last_error();
  tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
  tdp_output out[] = {{"action", TDP_FLOAT32, action.data(), action.size()},
                      {"action_log_prob", TDP_FLOAT32, lp.data(), lp.size()}};
  ASSERT_EQ(tdp_actor_act(named, batch, in, 1, out, 2, TDP_INTERACTION_DETERMINISTIC), TDP_OK) << tdp_last_error();
  for (int64_t i = 0; i < batch; ++i) {
    EXPECT_NEAR(flat_action[i], action[i], 1e-5);
    EXPECT_NEAR(flat_lp[i], lp[i], 1e-4);
  }

  EXPECT_EQ(tdp_actor_act_flat(flat, batch, obs.data(), flat_action.data(), nullptr, TDP_INTERACTION_MODULE),
            TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("TDP_INTERACTION_MODULE is not available on the flat API"));
  EXPECT_EQ(tdp_actor_act_flat(flat, batch, nullptr, flat_action.data(), nullptr, TDP_INTERACTION_ACTOR),
            TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_actor_act_flat: observation is NULL");
}

TEST(CApiTest, FlatApiNeedsAFusedPlan) {
  Loaded holder;
  tdp_actor* actor = load(holder, policy("cartpole_categorical.pbtxt"), 0, TDP_BACKEND_LIBTORCH);
  ASSERT_NE(actor, nullptr);
  int64_t size = 0;
  EXPECT_EQ(tdp_actor_flat_sizes(actor, &size, nullptr), TDP_FAILED_PRECONDITION);
  EXPECT_THAT(tdp_last_error(), HasSubstr("tdp_actor_flat_sizes: the policy has no fused plan"));
  std::vector<float> obs(4), action(1);
  EXPECT_EQ(tdp_actor_act_flat(actor, 1, obs.data(), action.data(), nullptr, TDP_INTERACTION_ACTOR),
            TDP_FAILED_PRECONDITION);
  EXPECT_THAT(tdp_last_error(), HasSubstr("needs the fused plan"));
}

// The recurrent state: kept per environment when the caller leaves it out, zeroed by reset.
TEST(CApiTest, RecurrentStateAndReset) {
  Loaded holder;
  tdp_actor* actor = load(holder, policy("recurrent_gru.pbtxt"));
  ASSERT_NE(actor, nullptr);
  size_t count = 0;
  ASSERT_EQ(tdp_actor_num_outputs(actor, &count), TDP_OK);
  ASSERT_EQ(count, 3u);
  const char* name = nullptr;
  ASSERT_EQ(tdp_actor_output(actor, 2, &name, nullptr, nullptr, nullptr), TDP_OK);
  EXPECT_STREQ(name, "hidden");

  const int64_t batch = 2;
  std::vector<float> obs = observations(batch, 4, 0.5f);
  auto step = [&]() {
    std::vector<float> hidden(batch * 32);
    tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
    tdp_output out[] = {{"hidden", TDP_FLOAT32, hidden.data(), hidden.size()}};
    EXPECT_EQ(tdp_actor_act(actor, batch, in, 1, out, 1, TDP_INTERACTION_DETERMINISTIC), TDP_OK) << tdp_last_error();
    return hidden;
  };
  std::vector<float> first = step();
  std::vector<float> second = step();
  EXPECT_NE(first, second);  // the kept state moved on

  const uint8_t mask[] = {1, 0};
  ASSERT_EQ(tdp_actor_reset(actor, mask, batch), TDP_OK) << tdp_last_error();
  std::vector<float> third = step();
  EXPECT_EQ(std::vector<float>(third.begin(), third.begin() + 32), std::vector<float>(first.begin(), first.begin() + 32));
  EXPECT_NE(std::vector<float>(third.begin() + 32, third.end()), std::vector<float>(first.begin() + 32, first.end()));

  ASSERT_EQ(tdp_actor_reset(actor, nullptr, 0), TDP_OK);
  EXPECT_EQ(step(), first);

  // The stateless form: the state given as an input, the kept one left alone.
  std::vector<float> zeros(batch * 32, 0.0f);
  std::vector<float> hidden(batch * 32);
  tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()},
                    {"hidden", TDP_FLOAT32, zeros.data(), zeros.size()}};
  tdp_output out[] = {{"hidden", TDP_FLOAT32, hidden.data(), hidden.size()}};
  ASSERT_EQ(tdp_actor_act(actor, batch, in, 2, out, 1, TDP_INTERACTION_DETERMINISTIC), TDP_OK) << tdp_last_error();
  EXPECT_EQ(hidden, first);
  EXPECT_EQ(step(), second);

  const uint8_t short_mask[] = {1, 1, 1};
  EXPECT_EQ(tdp_actor_reset(actor, short_mask, 3), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("env_mask must be a bool tensor of shape [2]"));
}

TEST(CApiTest, LoadErrorsNameTheFile) {
  tdp_actor* actor = reinterpret_cast<tdp_actor*>(0x1);
  EXPECT_EQ(tdp_actor_load("/no/such/policy.pbtxt", nullptr, &actor), TDP_NOT_FOUND);
  EXPECT_EQ(actor, nullptr);
  EXPECT_THAT(tdp_last_error(), AllOf(HasSubstr("tdp_actor_load: "), HasSubstr("/no/such/policy.pbtxt"),
                                      HasSubstr("no such file")));

  const std::string broken = temp_path("broken.pbtxt");
  write_file(broken, "name: \"x\"\ninputs { key: \"observation\" shape: 4 }\nmodule { nonsense: 1 }\n");
  EXPECT_EQ(tdp_actor_load(broken.c_str(), nullptr, &actor), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), AllOf(HasSubstr(broken), HasSubstr("nonsense")));

  EXPECT_EQ(tdp_actor_load(nullptr, nullptr, &actor), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_actor_load: spec_path is NULL");
  EXPECT_EQ(tdp_actor_load(policy("cartpole_categorical.pbtxt").c_str(), nullptr, nullptr), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_actor_load: actor (the tdp_actor** to fill) is NULL");

  // An autoregressive policy does not lower to the fused plan: kFused makes that a load error.
  tdp_actor_options* options = nullptr;
  ASSERT_EQ(tdp_options_create(&options), TDP_OK);
  ASSERT_EQ(tdp_options_set_backend(options, TDP_BACKEND_FUSED), TDP_OK);
  EXPECT_NE(tdp_actor_load(policy("goal_autoregressive.pbtxt").c_str(), options, &actor), TDP_OK);
  EXPECT_EQ(actor, nullptr);
  EXPECT_THAT(tdp_last_error(), HasSubstr("goal_autoregressive.pbtxt"));
  tdp_options_free(options);
}

TEST(CApiTest, OptionErrors) {
  EXPECT_EQ(tdp_options_create(nullptr), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("tdp_options_create: options"));
  tdp_actor_options* options = nullptr;
  ASSERT_EQ(tdp_options_create(&options), TDP_OK);
  EXPECT_EQ(tdp_options_set_device(options, "gpu"), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("\"gpu\" is not a device (expected \"cpu\", \"cuda\" or \"cuda:N\")"));
  EXPECT_EQ(tdp_options_set_device(options, nullptr), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_options_set_device: device is NULL");
  EXPECT_EQ(tdp_options_set_device(options, "cpu"), TDP_OK);
  EXPECT_STREQ(tdp_last_error(), "");
  EXPECT_EQ(tdp_options_set_backend(options, static_cast<tdp_backend>(7)), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("backend is 7, not a tdp_backend"));
  EXPECT_EQ(tdp_options_set_interaction(options, static_cast<tdp_interaction>(9)), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("type is 9, not a tdp_interaction"));
  EXPECT_EQ(tdp_options_set_interaction(options, TDP_INTERACTION_ACTOR), TDP_INVALID_ARGUMENT);
  EXPECT_EQ(tdp_options_set_fused_max_batch(options, -1), TDP_INVALID_ARGUMENT);
  EXPECT_EQ(tdp_options_set_seed(nullptr, 1), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_options_set_seed: options is NULL");
  tdp_options_free(options);
  tdp_options_free(nullptr);
  tdp_actor_free(nullptr);
}

TEST(CApiTest, ActErrorsSayWhatWasExpected) {
  Loaded holder;
  tdp_actor* actor = load(holder, policy("cartpole_categorical.pbtxt"));
  ASSERT_NE(actor, nullptr);
  std::vector<float> obs = observations(2, 4);
  std::vector<int64_t> action(2);
  tdp_output out[] = {{"action", TDP_INT64, action.data(), action.size()}};
  auto act = [&](std::vector<tdp_input> in, std::vector<tdp_output> outputs, int64_t batch = 2,
                 tdp_interaction type = TDP_INTERACTION_ACTOR) {
    return tdp_actor_act(actor, batch, in.data(), in.size(), outputs.data(), outputs.size(), type);
  };
  const tdp_input good{"observation", TDP_FLOAT32, obs.data(), obs.size()};

  EXPECT_EQ(act({{"observation", TDP_FLOAT32, obs.data(), 7}}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(),
               "tdp_actor_act: inputs[0] \"observation\": 7 elements, expected 8 (batch 2 x float32 [4] per environment)");
  EXPECT_EQ(act({{"observation", TDP_FLOAT64, obs.data(), 8}}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("inputs[0] \"observation\": dtype float64, but the policy's input is float32 [4]"));
  EXPECT_EQ(act({{"observation", TDP_FLOAT32, nullptr, 8}}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("inputs[0] \"observation\": data is NULL"));
  EXPECT_EQ(act({{"obs", TDP_FLOAT32, obs.data(), 8}}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("\"obs\" is not an input of the policy; its inputs are \"observation\""));
  EXPECT_EQ(act({{nullptr, TDP_FLOAT32, obs.data(), 8}}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("inputs[0].name is NULL"));
  EXPECT_EQ(act({good, good}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("\"observation\" is given twice"));
  EXPECT_EQ(act({}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("missing input \"observation\" (float32 [4] per environment)"));

  EXPECT_EQ(act({good}, {{"action", TDP_FLOAT32, action.data(), 2}}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("outputs[0] \"action\": dtype float32, but the policy's output is int64 []"));
  EXPECT_EQ(act({good}, {{"action", TDP_INT64, action.data(), 3}}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("outputs[0] \"action\": 3 elements, expected 2"));
  EXPECT_EQ(act({good}, {{"logits", TDP_FLOAT32, action.data(), 2}}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("\"logits\" is not an output of the policy; its outputs are \"action\", "
                                          "\"action_log_prob\""));
  EXPECT_EQ(act({good}, {out[0]}, 0), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("batch is 0, expected at least 1"));
  EXPECT_EQ(act({good}, {out[0]}, 2, static_cast<tdp_interaction>(17)), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("type is 17, not a tdp_interaction"));
  // Categorical has no mean: the SDK's error comes through as a status.
  EXPECT_NE(act({good}, {out[0]}, 2, TDP_INTERACTION_MEAN), TDP_OK);
  EXPECT_THAT(tdp_last_error(), HasSubstr("tdp_actor_act: "));
  EXPECT_GT(std::string(tdp_last_error()).size(), std::string("tdp_actor_act: ").size());

  EXPECT_EQ(tdp_actor_act(actor, 2, nullptr, 1, out, 1, TDP_INTERACTION_ACTOR), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_actor_act: inputs is NULL");
  EXPECT_EQ(tdp_actor_act(nullptr, 2, &good, 1, out, 1, TDP_INTERACTION_ACTOR), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_actor_act: actor is NULL");
  EXPECT_EQ(tdp_actor_num_inputs(actor, nullptr), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_actor_num_inputs: count is NULL");

  // MEDIAN has no value for a categorical either: the caller's choice, an invalid argument.
  EXPECT_EQ(act({good}, {out[0]}, 2, TDP_INTERACTION_MEDIAN), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), AllOf(HasSubstr("median"), HasSubstr("interaction type")));
  // batch x per_env past size_t: an error, not a count check that wrapped around.
  const int64_t huge = (int64_t{1} << 62) + 1;
  EXPECT_EQ(act({{"observation", TDP_FLOAT32, obs.data(), 4}}, {}, huge), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("is more elements than a size_t holds"));

  // Non-finite inputs: rejected naming the key and the row (the rule of actor.h and tdp_c.h).
  std::vector<float> nan_obs = observations(2, 4);
  nan_obs[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(act({{"observation", TDP_FLOAT32, nan_obs.data(), nan_obs.size()}}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("input \"observation\" has nan in row 1"));
  // So are finite values past +-1e18, where backends' float32 sums would overflow differently.
  nan_obs[5] = -2e19f;
  EXPECT_EQ(act({{"observation", TDP_FLOAT32, nan_obs.data(), nan_obs.size()}}, {out[0]}), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("input \"observation\" has -2e+19 in row 1"));

  // A success clears the message; outputs may be left out entirely.
  EXPECT_EQ(act({good}, {}), TDP_OK);
  EXPECT_STREQ(tdp_last_error(), "");
}

// A CUDA device where the binary has no CUDA (the CPU build) or no GPU is visible: a load error.
// Caps the address space a little above what the process holds (from here on, no allocation of
// more than `headroom` bytes in all can succeed).
void cap_address_space(rlim_t headroom) {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + headroom;
  const rlimit limit{cap, cap};
  setrlimit(RLIMIT_AS, &limit);
}

// Exits 0 when `status` is TDP_OUT_OF_MEMORY, printing it and the message either way.
[[noreturn]] void exit_with(tdp_status status) {
  std::fprintf(stderr, "%s: %s\n", tdp_status_name(status), tdp_last_error());
  std::_Exit(status == TDP_OUT_OF_MEMORY ? 0 : 1);
}

// LibTorch acting on 2M rows, whose 64-wide hidden layer (512 MiB) cannot be allocated while the
// call's own inputs and outputs already are.
[[noreturn]] void act_out_of_memory() {
  at::set_num_threads(1);
  Loaded holder;
  tdp_actor* actor = load(holder, policy("cartpole_categorical.pbtxt"), 0, TDP_BACKEND_LIBTORCH);
  const int64_t batch = int64_t{1} << 21;
  std::vector<float> obs = observations(batch, 4);
  std::vector<int64_t> action(batch);
  const tdp_input in{"observation", TDP_FLOAT32, obs.data(), obs.size()};
  const tdp_output out{"action", TDP_INT64, action.data(), action.size()};
  cap_address_space(rlim_t{256} << 20);
  exit_with(tdp_actor_act(actor, batch, &in, 1, &out, 1, TDP_INTERACTION_DETERMINISTIC));
}

// Loading a policy whose parameters (4 MiB) do not fit in what is left.
[[noreturn]] void load_out_of_memory() {
  at::set_num_threads(1);
  const std::string path = temp_path("wide.pbtxt");
  write_file(path, R"pb(
    name: "wide" init_seed: 1 inputs { key: "observation" shape: [1024] } output_keys: ["action"]
    module { network { in_keys: ["observation"] out_keys: ["action"]
                       network { linear { in_features: 1024 out_features: 1024 } } } })pb");
  tdp_actor* actor = nullptr;
  cap_address_space(rlim_t{1} << 20);
  exit_with(tdp_actor_load(path.c_str(), nullptr, &actor));
}

// An allocation that fails is TDP_OUT_OF_MEMORY, whatever LibTorch throws for it (its CPU
// allocator's failure is a plain c10::Error). In death tests' children, which cap their memory.
// The fused plan allocates nothing per call, so only the LibTorch backend can fail while acting.
TEST(CApiDeathTest, AnAllocationThatFailsIsOutOfMemory) {
#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || defined(ABSL_HAVE_THREAD_SANITIZER)
  GTEST_SKIP() << "a sanitizer's runtime maps its shadow memory in the address space RLIMIT_AS caps, "
                  "and fails itself before LibTorch's allocator does";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(act_out_of_memory(), ::testing::ExitedWithCode(0), "TDP_OUT_OF_MEMORY: .*can't allocate memory");
  EXPECT_EXIT(load_out_of_memory(), ::testing::ExitedWithCode(0), "TDP_OUT_OF_MEMORY");
}

TEST(CApiTest, AnUnusableDeviceIsALoadError) {
  tdp_actor_options* options = nullptr;
  ASSERT_EQ(tdp_options_create(&options), TDP_OK);
  ASSERT_EQ(tdp_options_set_device(options, "cuda:0"), TDP_OK);
  tdp_actor* actor = nullptr;
  const tdp_status status = tdp_actor_load(policy("cartpole_categorical.pbtxt").c_str(), options, &actor);
  tdp_options_free(options);
  if (at::hasCUDA()) {
    EXPECT_EQ(status, TDP_OK) << tdp_last_error();
    tdp_actor_free(actor);
    GTEST_SKIP() << "a GPU is visible: nothing to refuse";
  }
  EXPECT_EQ(status, TDP_INVALID_ARGUMENT);
  EXPECT_EQ(actor, nullptr);
  EXPECT_THAT(tdp_last_error(), AllOf(HasSubstr("cartpole_categorical.pbtxt"), HasSubstr("device cuda:0 requested")));
}

// The meta device: a short load error, no LibTorch backtrace.
TEST(CApiTest, TheMetaDeviceIsAShortLoadError) {
  tdp_actor_options* options = nullptr;
  ASSERT_EQ(tdp_options_create(&options), TDP_OK);
  ASSERT_EQ(tdp_options_set_device(options, "meta"), TDP_OK);
  tdp_actor* actor = nullptr;
  const tdp_status status = tdp_actor_load(policy("cartpole_categorical.pbtxt").c_str(), options, &actor);
  tdp_options_free(options);
  EXPECT_EQ(status, TDP_INVALID_ARGUMENT);
  EXPECT_EQ(actor, nullptr);
  EXPECT_THAT(tdp_last_error(), HasSubstr("device meta requested; an actor runs on the cpu or a cuda device"));
  EXPECT_LT(std::string(tdp_last_error()).size(), 400u);
}

// TDP_INTERACTION_MODULE as the actor's type: each module's default (deterministic here).
TEST(CApiTest, TheModulesOwnInteractionType) {
  tdp_actor_options* options = nullptr;
  ASSERT_EQ(tdp_options_create(&options), TDP_OK);
  ASSERT_EQ(tdp_options_set_interaction(options, TDP_INTERACTION_MODULE), TDP_OK);
  Loaded holder;
  ASSERT_EQ(tdp_actor_load(policy("pendulum_tanh_gaussian.pbtxt").c_str(), options, &holder.actor), TDP_OK)
      << tdp_last_error();
  tdp_options_free(options);
  const int64_t batch = 6;
  std::vector<float> obs = observations(batch, 3);
  std::vector<float> by_default(batch), deterministic(batch);
  tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
  tdp_output out[] = {{"action", TDP_FLOAT32, by_default.data(), by_default.size()}};
  ASSERT_EQ(tdp_actor_act(holder.actor, batch, in, 1, out, 1, TDP_INTERACTION_ACTOR), TDP_OK) << tdp_last_error();
  out[0].data = deterministic.data();
  ASSERT_EQ(tdp_actor_act(holder.actor, batch, in, 1, out, 1, TDP_INTERACTION_DETERMINISTIC), TDP_OK);
  EXPECT_EQ(by_default, deterministic);
  // And per call: RANDOM draws differ from the deterministic action.
  std::vector<float> random(batch);
  out[0].data = random.data();
  ASSERT_EQ(tdp_actor_act(holder.actor, batch, in, 1, out, 1, TDP_INTERACTION_RANDOM), TDP_OK);
  EXPECT_NE(random, deterministic);
}

// Several threads acting on one actor at once, each with its own buffers, get what one thread
// gets (deterministic actions), and every error message stays on its own thread.
TEST(CApiTest, ConcurrentCalls) {
  Loaded holder;
  tdp_actor* actor = load(holder, policy("cartpole_categorical.pbtxt"), 0, TDP_BACKEND_LIBTORCH);
  ASSERT_NE(actor, nullptr);
  const int64_t batch = 16;
  std::vector<float> obs = observations(batch, 4, 0.3f);
  tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
  std::vector<float> expected(batch);
  tdp_output out[] = {{"action_log_prob", TDP_FLOAT32, expected.data(), expected.size()}};
  ASSERT_EQ(tdp_actor_act(actor, batch, in, 1, out, 1, TDP_INTERACTION_DETERMINISTIC), TDP_OK);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> got(batch);
      tdp_output mine[] = {{"action_log_prob", TDP_FLOAT32, got.data(), got.size()}};
      for (int i = 0; i < 50; ++i) {
        if (tdp_actor_act(actor, batch, in, 1, mine, 1, TDP_INTERACTION_DETERMINISTIC) != TDP_OK || got != expected ||
            std::string(tdp_last_error()) != "") {
          ++mismatches[t];
        }
        tdp_actor_act(actor, 0, in, 1, mine, 1, TDP_INTERACTION_DETERMINISTIC);  // fails, on this thread only
        if (std::string(tdp_last_error()) != "tdp_actor_act: batch is 0, expected at least 1") ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(CApiTest, TheLastErrorIsPerThread) {
  EXPECT_EQ(tdp_options_set_seed(nullptr, 1), TDP_INVALID_ARGUMENT);
  std::string other;
  std::thread thread([&] {
    other = tdp_last_error();
    tdp_options_create(nullptr);
  });
  thread.join();
  EXPECT_EQ(other, "");
  EXPECT_STREQ(tdp_last_error(), "tdp_options_set_seed: options is NULL");
}

TEST(CApiTest, SeededCallsEqualTheFirstCallOfAnActorLoadedWithThatSeed) {
  for (const char* name : {"cartpole_categorical.pbtxt", "pendulum_tanh_gaussian.pbtxt"}) {
    SCOPED_TRACE(name);
    const bool discrete = std::string(name).find("cartpole") == 0;
    const int64_t width = discrete ? 4 : 3;
    const int64_t batch = 6;
    std::vector<float> obs = observations(batch, width);
    tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
    // The log-prob of each row's sampled action: it differs between seeds for both policies.
    auto seeded = [&](tdp_actor* actor, uint64_t seed) {
      std::vector<float> log_prob(batch);
      tdp_output out[] = {{"action_log_prob", TDP_FLOAT32, log_prob.data(), log_prob.size()}};
      EXPECT_EQ(tdp_actor_act_seeded(actor, batch, in, 1, out, 1, TDP_INTERACTION_RANDOM, seed), TDP_OK)
          << tdp_last_error();
      return log_prob;
    };
    Loaded holder;
    tdp_actor* actor = load(holder, policy(name), /*seed=*/0);
    ASSERT_NE(actor, nullptr);
    const std::vector<float> first = seeded(actor, 123);
    // Calls in between, on the actor's own stream, change nothing.
    std::vector<float> scratch(batch);
    tdp_output scratch_out[] = {{"action_log_prob", TDP_FLOAT32, scratch.data(), scratch.size()}};
    ASSERT_EQ(tdp_actor_act(actor, batch, in, 1, scratch_out, 1, TDP_INTERACTION_RANDOM), TDP_OK);
    EXPECT_EQ(seeded(actor, 123), first);
    EXPECT_NE(seeded(actor, 124), first);

    auto cpp = tdp::actor::Actor::load(
        policy(name), tdp::actor::ActorOptions().seed(123).backend(tdp::actor::Backend::kLibTorch));
    ASSERT_TRUE(cpp.ok()) << cpp.status();
    tdp::TensorDict td({{"observation", at::from_blob(obs.data(), {batch, width}, at::kFloat)}}, {batch});
    at::Tensor expected = (*cpp)->act(td, tdp::nn::InteractionType::kRandom).get("action_log_prob").reshape({batch});
    EXPECT_TRUE(at::equal(at::from_blob(const_cast<float*>(first.data()), {batch}, at::kFloat), expected)) << expected;

    // The actor's own stream was not advanced by the seeded calls: its next random call is the
    // second call of a fresh actor with its seed.
    Loaded fresh_holder;
    tdp_actor* fresh = load(fresh_holder, policy(name), /*seed=*/0);
    std::vector<float> a(batch), b(batch);
    tdp_output out_a[] = {{"action_log_prob", TDP_FLOAT32, a.data(), a.size()}};
    tdp_output out_b[] = {{"action_log_prob", TDP_FLOAT32, b.data(), b.size()}};
    ASSERT_EQ(tdp_actor_act(fresh, batch, in, 1, out_a, 1, TDP_INTERACTION_RANDOM), TDP_OK);
    ASSERT_EQ(tdp_actor_act(fresh, batch, in, 1, out_a, 1, TDP_INTERACTION_RANDOM), TDP_OK);
    ASSERT_EQ(tdp_actor_act(actor, batch, in, 1, out_b, 1, TDP_INTERACTION_RANDOM), TDP_OK);
    EXPECT_EQ(a, b);
  }
}

// A batching actor loaded through the C API, freed at the end of the test.
struct LoadedBatcher {
  tdp_batching_actor* batcher = nullptr;
  ~LoadedBatcher() { tdp_batching_actor_free(batcher); }
};

TEST(CApiTest, TheBatchingActorMergesCallsFromManyThreads) {
  LoadedBatcher holder;
  ASSERT_EQ(tdp_batching_actor_load(policy("cartpole_categorical.pbtxt").c_str(), nullptr, 64, 2000, &holder.batcher),
            TDP_OK)
      << tdp_last_error();
  tdp_actor* actor = tdp_batching_actor_actor(holder.batcher);
  ASSERT_NE(actor, nullptr);
  EXPECT_STREQ(tdp_actor_name(actor), "cartpole_categorical");
  constexpr int kThreads = 16;
  constexpr int kCalls = 20;
  // Each thread's own observation (batch 1), and what the actor alone answers for it.
  std::vector<std::vector<float>> obs(kThreads);
  std::vector<float> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    obs[t] = observations(1, 4, 0.05f * static_cast<float>(t + 1));
    tdp_input in[] = {{"observation", TDP_FLOAT32, obs[t].data(), obs[t].size()}};
    tdp_output out[] = {{"action_log_prob", TDP_FLOAT32, &expected[t], 1}};
    ASSERT_EQ(tdp_actor_act(actor, 1, in, 1, out, 1, TDP_INTERACTION_DETERMINISTIC), TDP_OK) << tdp_last_error();
  }
  std::atomic<int> mismatches{0};
  std::mutex report_mutex;
  std::string report;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        float log_prob = 0.0f;
        int64_t action = -1;
        tdp_input in[] = {{"observation", TDP_FLOAT32, obs[t].data(), obs[t].size()}};
        tdp_output out[] = {{"action_log_prob", TDP_FLOAT32, &log_prob, 1}, {"action", TDP_INT64, &action, 1}};
        // A merged call may run on another kernel than a batch-1 call: equal to float rounding.
        if (tdp_batching_actor_act(holder.batcher, 1, in, 1, out, 2, TDP_INTERACTION_DETERMINISTIC) != TDP_OK ||
            std::abs(log_prob - expected[t]) > 1e-6f || action < 0 || action > 1) {
          ++mismatches;
          std::lock_guard<std::mutex> lock(report_mutex);
          if (report.empty()) {
            report = std::string(tdp_last_error()) + " thread " + std::to_string(t) + ": log_prob " +
                     std::to_string(log_prob) + ", alone " + std::to_string(expected[t]);
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0) << report;
  tdp_batching_stats stats{};
  ASSERT_EQ(tdp_batching_actor_stats(holder.batcher, &stats), TDP_OK);
  EXPECT_EQ(stats.requests, kThreads * kCalls);
  EXPECT_EQ(stats.rows, kThreads * kCalls);
  EXPECT_EQ(stats.rejected, 0);
  EXPECT_EQ(stats.max_batch_size, 64);
  // Sixteen threads calling at once: calls that arrive while a batch runs share the next one.
  EXPECT_LT(stats.batches, stats.requests);
  EXPECT_GT(stats.largest_batch, 1);
  EXPECT_LE(stats.largest_batch, kThreads);
}

TEST(CApiTest, BatchingActorErrorsSayWhatWasExpected) {
  tdp_batching_actor* none = nullptr;
  EXPECT_EQ(tdp_batching_actor_load(policy("cartpole_categorical.pbtxt").c_str(), nullptr, 0, 0, &none),
            TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_batching_actor_load: max_batch_size is 0, expected at least 1");
  EXPECT_EQ(tdp_batching_actor_load(policy("cartpole_categorical.pbtxt").c_str(), nullptr, 4, -1, &none),
            TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("max_delay_us is -1"));
  EXPECT_EQ(tdp_batching_actor_load("no/such/spec.pbtxt", nullptr, 4, 0, &none), TDP_NOT_FOUND);
  EXPECT_THAT(tdp_last_error(), HasSubstr("no/such/spec.pbtxt"));
  EXPECT_EQ(none, nullptr);

  LoadedBatcher holder;
  ASSERT_EQ(tdp_batching_actor_load(policy("cartpole_categorical.pbtxt").c_str(), nullptr, 4, 0, &holder.batcher),
            TDP_OK);
  std::vector<float> obs = observations(8, 4);
  std::vector<int64_t> action(8);
  tdp_output out[] = {{"action", TDP_INT64, action.data(), 5}};
  tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), 5 * 4}};
  tdp_input wrong[] = {{"observation", TDP_FLOAT32, obs.data(), 7}};
  EXPECT_EQ(tdp_batching_actor_act(holder.batcher, 5, wrong, 1, out, 1, TDP_INTERACTION_RANDOM), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), AllOf(HasSubstr("tdp_batching_actor_act"), HasSubstr("\"observation\""),
                                      HasSubstr("7 elements, expected 20")));
  // Five rows, but the batcher merges at most four.
  EXPECT_EQ(tdp_batching_actor_act(holder.batcher, 5, in, 1, out, 1, TDP_INTERACTION_RANDOM), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("max_batch_size"));
  EXPECT_EQ(tdp_batching_actor_act(holder.batcher, 5, in, 1, out, 1, TDP_INTERACTION_MODULE), TDP_INVALID_ARGUMENT);
  EXPECT_THAT(tdp_last_error(), HasSubstr("TDP_INTERACTION_MODULE is not available through a batcher"));
  EXPECT_EQ(tdp_batching_actor_act(nullptr, 1, in, 1, out, 1, TDP_INTERACTION_RANDOM), TDP_INVALID_ARGUMENT);
  EXPECT_STREQ(tdp_last_error(), "tdp_batching_actor_act: batcher is NULL");
  EXPECT_EQ(tdp_batching_actor_stats(holder.batcher, nullptr), TDP_INVALID_ARGUMENT);
  EXPECT_EQ(tdp_batching_actor_actor(nullptr), nullptr);
  // The batcher goes on after the errors.
  tdp_input four[] = {{"observation", TDP_FLOAT32, obs.data(), 4 * 4}};
  tdp_output one[] = {{"action", TDP_INT64, action.data(), 4}};
  EXPECT_EQ(tdp_batching_actor_act(holder.batcher, 4, four, 1, one, 1, TDP_INTERACTION_RANDOM), TDP_OK)
      << tdp_last_error();
  tdp_batching_stats stats{};
  ASSERT_EQ(tdp_batching_actor_stats(holder.batcher, &stats), TDP_OK);
  EXPECT_EQ(stats.requests, 1);
  EXPECT_EQ(stats.rejected, 1);  // the five rows, refused by the batcher itself
  tdp_batching_actor_free(nullptr);
}

}  // namespace
