// BatchedEnv behaviour shared by CartPole, Pendulum and Goal: specs, seeded reproducibility,
// the auto-reset contract, partial resets, error texts, and that Goal rewards a good policy.
// Agreement with Gymnasium's dynamics is in classic_gymnasium_test.cc.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "sdk/env/batched_env.h"
#include "samples/envs/cartpole.h"
#include "samples/envs/goal.h"
#include "samples/envs/pendulum.h"
#include "tests/testing/error_of.h"

namespace tdp::env {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;

// Random actions that satisfy `env`'s action spec, from `gen`.
TensorDict random_actions(const BatchedEnv& env, at::Generator& gen) {
  TensorDict td({env.num_envs()});
  for (const EntrySpec& spec : env.action_spec()) {
    std::vector<int64_t> shape{env.num_envs()};
    shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
    if (spec.is_discrete()) {
      td.set(spec.key, at::randint(spec.num_categories, shape, gen, at::kLong));
    } else {
      td.set(spec.key, at::empty(shape, at::kFloat).uniform_(spec.low[0], spec.high[0], gen));
    }
  }
  return td;
}

std::unique_ptr<BatchedEnv> make_env(const std::string& name, const EnvOptions& options) {
  if (name == "CartPole") return std::make_unique<CartPole>(options);
  if (name == "Pendulum") return std::make_unique<Pendulum>(options);
  return std::make_unique<Goal>(options);
}

class AnyEnv : public ::testing::TestWithParam<std::string> {};

TEST_P(AnyEnv, OutputsFollowTheContract) {
  auto env = make_env(GetParam(), EnvOptions(5));
  const EntrySpec obs_spec = env->observation_spec().at(0);
  EXPECT_EQ(obs_spec.key, NestedKey("observation"));
  TensorDict first = env->reset(3);
  EXPECT_EQ(first.batch_size(), c10::IntArrayRef({5}));
  at::Tensor obs = first.get("observation");
  EXPECT_EQ(obs.scalar_type(), at::kFloat);
  EXPECT_EQ(obs.sizes(), c10::IntArrayRef({5, obs_spec.numel()}));

  at::Generator gen = at::detail::createCPUGenerator(11);
  TensorDict out = env->step(random_actions(*env, gen));
  EXPECT_EQ(out.batch_size(), c10::IntArrayRef({5}));
  EXPECT_EQ(out.get("observation").sizes(), obs.sizes());
  EXPECT_EQ(out.get("final_observation").sizes(), obs.sizes());
  EXPECT_EQ(out.get("reward").sizes(), c10::IntArrayRef({5, 1}));
  EXPECT_EQ(out.get("reward").scalar_type(), at::kFloat);
  EXPECT_EQ(out.get("terminated").sizes(), c10::IntArrayRef({5, 1}));
  EXPECT_EQ(out.get("terminated").scalar_type(), at::kBool);
  EXPECT_EQ(out.get("truncated").sizes(), c10::IntArrayRef({5, 1}));
  EXPECT_EQ(out.get("truncated").scalar_type(), at::kBool);
  EXPECT_EQ(out.get("done").sizes(), c10::IntArrayRef({5, 1}));
  EXPECT_EQ(out.get("done").scalar_type(), at::kBool);
  // Observations stay inside the declared bounds; done is terminated or truncated, the short time
  // limit's endings included.
  auto short_env = make_env(GetParam(), EnvOptions(5).max_episode_steps(7));
  short_env->reset(3);
  for (int i = 0; i < 50; ++i) {
    const TensorDict step = short_env->step(random_actions(*short_env, gen));
    const at::Tensor o = step.get("final_observation");
    EXPECT_TRUE(o.ge(at::tensor(obs_spec.low, at::kFloat)).all().item<bool>()) << o;
    EXPECT_TRUE(o.le(at::tensor(obs_spec.high, at::kFloat)).all().item<bool>()) << o;
    EXPECT_TRUE(at::equal(step.get("done"), step.get("terminated") | step.get("truncated"))) << "step " << i;
  }
}

TEST_P(AnyEnv, SameSeedSameRun) {
  // 300 random steps cross several auto-resets in every environment.
  auto run = [&](uint64_t seed) {
    auto env = make_env(GetParam(), EnvOptions(16));
    at::Generator gen = at::detail::createCPUGenerator(5);
    std::vector<TensorDict> steps;
    env->reset(seed);
    for (int i = 0; i < 300; ++i) steps.push_back(env->step(random_actions(*env, gen)));
    return TensorDict::stack(steps, 0);
  };
  TensorDict a = run(42), b = run(42), c = run(43);
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.get("observation").equal(c.get("observation")));
}

TEST_P(AnyEnv, ReseedingRestartsTheSameInitialStates) {
  auto env = make_env(GetParam(), EnvOptions(8));
  at::Tensor first = env->reset(7).get("observation");
  at::Generator gen = at::detail::createCPUGenerator(1);
  for (int i = 0; i < 10; ++i) env->step(random_actions(*env, gen));
  EXPECT_TRUE(env->reset(7).get("observation").equal(first));
  EXPECT_TRUE(env->episode_steps().eq(0).all().item<bool>());
  // Environments of one batch start from different states.
  EXPECT_FALSE(first[0].equal(first[1]));
}

TEST_P(AnyEnv, WrongActionsNameTheKeyExpectedAndActual) {
  auto env = make_env(GetParam(), EnvOptions(4));
  env->reset(0);
  at::Generator gen = at::detail::createCPUGenerator(1);
  const EntrySpec spec = env->action_spec().at(0);
  const std::string key = spec.key.to_string();

  TensorDict missing = random_actions(*env, gen).exclude({spec.key});
  std::string msg = error_of<std::invalid_argument>([&] { env->step(missing); });
  EXPECT_THAT(msg, HasSubstr(env->name() + ".step: missing action " + key));
  EXPECT_THAT(msg, HasSubstr("expected " + std::string(c10::toString(spec.dtype))));

  TensorDict wrong_dtype = random_actions(*env, gen);
  wrong_dtype.set(spec.key, wrong_dtype.get(spec.key).to(at::kDouble));
  msg = error_of<std::invalid_argument>([&] { env->step(wrong_dtype); });
  EXPECT_THAT(msg, HasSubstr("action " + key + " must be " + c10::toString(spec.dtype)));
  EXPECT_THAT(msg, HasSubstr("got Double"));

  TensorDict wrong_shape({4});
  wrong_shape.update(random_actions(*env, gen));
  wrong_shape.set(spec.key, wrong_shape.get(spec.key).unsqueeze(-1));
  msg = error_of<std::invalid_argument>([&] { env->step(wrong_shape); });
  EXPECT_THAT(msg, HasSubstr("action " + key + " must be"));
  EXPECT_THAT(msg, HasSubstr(spec.shape.empty() ? "of shape [4], got Long of shape [4, 1]"
                                                : "of shape [4, 1], got Float of shape [4, 1, 1]"));
}

TEST_P(AnyEnv, WritingIntoOutputsLeavesTheEnvironmentAlone) {
  auto env = make_env(GetParam(), EnvOptions(4));
  env->reset(0).get("observation").fill_(100);
  at::Generator gen = at::detail::createCPUGenerator(1);
  const at::Tensor state = env->state();
  TensorDict out = env->step(random_actions(*env, gen));
  EXPECT_FALSE(out.get("final_observation").ge(100).any().item<bool>());
  const at::Tensor next = env->state();
  out.get("observation").fill_(100);
  out.get("final_observation").fill_(100);
  EXPECT_TRUE(env->state().equal(next));
  EXPECT_FALSE(next.equal(state));
}

TEST_P(AnyEnv, OutputsAreOrdinaryTensorsForAutograd) {
  // step() runs below the autograd dispatch keys; what it returns must still train a network.
  auto env = make_env(GetParam(), EnvOptions(4));
  env->reset(0);
  at::Generator gen = at::detail::createCPUGenerator(1);
  TensorDict out = env->step(random_actions(*env, gen));
  const at::Tensor obs = out.get("observation");
  EXPECT_FALSE(obs.is_inference());
  at::Tensor weight = at::ones({obs.size(1), 1}).set_requires_grad(true);
  obs.matmul(weight).mul(out.get("reward")).sum().backward();
  EXPECT_TRUE(weight.grad().defined());
}

// A one-number environment for the contract's edges: its observe() keeps the tensor it returns
// (as a cache would) or returns a view of the state, and its transition can give "terminated"
// in a dtype of the test's choice.
class Counter : public BatchedEnv {
 public:
  explicit Counter(int64_t n, at::ScalarType terminated_dtype = at::kBool, bool observe_a_view = false)
      : BatchedEnv(EnvOptions(n), /*default_max_episode_steps=*/10),
        terminated_dtype_(terminated_dtype),
        observe_a_view_(observe_a_view) {}
  std::string name() const override { return "Counter"; }
  std::vector<EntrySpec> observation_spec() const override { return {spec("observation")}; }
  std::vector<EntrySpec> action_spec() const override { return {spec("action")}; }
  int64_t state_dim() const override { return 1; }
  const at::Tensor& kept() const { return kept_; }

 protected:
  at::Tensor initial_state(int64_t n) override { return at::zeros({n, 1}); }
  at::Tensor observe(const at::Tensor& state) const override {
    if (observe_a_view_) return state.view({-1, 1});
    kept_ = state * 2;
    return kept_;
  }
  Transition transition(const at::Tensor& state, const TensorDict& /*action_td*/) override {
    return {state + 1, at::ones({num_envs(), 1}), at::zeros({num_envs(), 1}, terminated_dtype_)};
  }

 private:
  static EntrySpec spec(const char* key) {
    EntrySpec entry;
    entry.key = key;
    entry.shape = {1};
    entry.dtype = at::kFloat;
    entry.low = {-1.0};
    entry.high = {1.0};
    return entry;
  }
  at::ScalarType terminated_dtype_;
  bool observe_a_view_;
  mutable at::Tensor kept_;
};

TEST(BatchedEnv, AnObservationTheEnvironmentKeepsIsCopiedForTheCaller) {
  Counter env(2);
  env.reset(0);
  TensorDict actions({2});
  actions.set("action", at::zeros({2, 1}));
  TensorDict out = env.step(actions);
  EXPECT_TRUE(out.get("observation").equal(at::full({2, 1}, 2.0)));
  out.get("observation").fill_(100);
  EXPECT_TRUE(env.kept().equal(at::full({2, 1}, 2.0)));

  Counter viewing(2, at::kBool, /*observe_a_view=*/true);
  viewing.reset(0);
  TensorDict viewed = viewing.step(actions);
  viewed.get("observation").fill_(100);
  EXPECT_TRUE(viewing.state().equal(at::ones({2, 1})));
}

TEST(BatchedEnv, ATerminatedOfTheWrongDtypeIsNamed) {
  Counter env(2, at::kFloat);
  env.reset(0);
  TensorDict actions({2});
  actions.set("action", at::zeros({2, 1}));
  EXPECT_THAT(error_of<std::logic_error>([&] { env.step(actions); }),
              HasSubstr("Counter.transition gave terminated Float of shape [2, 1]; expected bool of shape [2, 1]"));
}

// Counter with one discrete action of 3 choices, in a dtype of the test's choice.
class ChoiceCounter : public Counter {
 public:
  ChoiceCounter(int64_t n, at::ScalarType action_dtype) : Counter(n), action_dtype_(action_dtype) {}
  std::vector<EntrySpec> action_spec() const override {
    EntrySpec entry;
    entry.key = "choice";
    entry.shape = {};
    entry.dtype = action_dtype_;
    entry.num_categories = 3;
    return {entry};
  }

 private:
  at::ScalarType action_dtype_;
};

TEST(BatchedEnv, DiscreteActionsOfAnyIntegerDtypeAreRangeChecked) {
  ChoiceCounter env(3, at::kInt);
  env.reset(0);
  env.step(TensorDict({{"choice", at::tensor({0, 2, 1}, at::kInt)}}, {3}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              env.step(TensorDict({{"choice", at::tensor({1, 3, 0}, at::kInt)}}, {3}));
            }),
            "Counter.step: action 'choice' must lie in [0, 3), got values from 0 to 3");
}

TEST(BatchedEnv, ADiscreteActionSpecOfAFloatDtypeIsNamed) {
  ChoiceCounter env(2, at::kFloat);
  env.reset(0);
  EXPECT_EQ(error_of<std::logic_error>([&] { env.step(TensorDict({{"choice", at::zeros({2})}}, {2})); }),
            "Counter.action_spec: discrete action 'choice' has dtype Float; expected an integer dtype");
}

INSTANTIATE_TEST_SUITE_P(Envs, AnyEnv, ::testing::Values("CartPole", "Pendulum", "Goal"),
                         [](const auto& info) { return info.param; });

TEST(BatchedEnv, ExactErrorTexts) {
  CartPole env(EnvOptions(3));
  EXPECT_THROW(env.step(TensorDict({3})), std::logic_error);  // no reset yet
  env.reset(0);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { env.step(TensorDict({{"act", at::zeros({3}, at::kLong)}}, {3})); }),
            "CartPole.step: missing action 'action' (expected Long of shape [3]); the "
            "TensorDict has keys ['act']");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { env.step(TensorDict({{"action", at::zeros({3, 1})}}, {3})); }),
            "CartPole.step: action 'action' must be Long of shape [3], got Float of shape [3, 1]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              env.step(TensorDict({{"action", at::tensor({0, 2, -1}, at::kLong)}}, {3}));
            }),
            "CartPole.step: action 'action' must lie in [0, 2), got values from -1 to 2");
  Goal goal(EnvOptions(2));
  goal.reset(0);
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              goal.step(TensorDict({{"action_type", at::zeros({2}, at::kLong)},
                                    {"action_param", at::zeros({2}, at::kFloat)}},
                                   {2}));
            }),
            "Goal.step: action 'action_param' must be Float of shape [2, 1], got Float of "
            "shape [2]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { env.reset(at::ones({2}, at::kBool)); }),
            "CartPole.reset(env_mask): env_mask must be bool of shape [3], got Bool of shape [2]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { env.reset_to(at::zeros({3, 2})); }),
            "CartPole.reset_to: state must be a floating tensor of shape [3, 4], got Float of "
            "shape [3, 2]");
  EXPECT_EQ(error_of<std::invalid_argument>([] { CartPole bad(EnvOptions(0)); }),
            "EnvOptions: num_envs must be at least 1, got 0");
  EXPECT_EQ(error_of<std::invalid_argument>([] { CartPole bad(EnvOptions(1).dtype(at::kHalf)); }),
            "EnvOptions: dtype must be float32 or float64, got Half");
}

TEST(BatchedEnv, SpecsSizeNetworks) {
  CartPole cartpole(EnvOptions(1));
  EXPECT_EQ(cartpole.observation_spec()[0].numel(), 4);
  EXPECT_EQ(cartpole.action_spec()[0].num_categories, 2);
  EXPECT_EQ(cartpole.max_episode_steps(), 500);
  Pendulum pendulum(EnvOptions(1));
  EXPECT_EQ(pendulum.observation_spec()[0].numel(), 3);
  EXPECT_FALSE(pendulum.action_spec()[0].is_discrete());
  EXPECT_EQ(pendulum.action_spec()[0].low, std::vector<double>{-2.0});
  EXPECT_EQ(pendulum.action_spec()[0].high, std::vector<double>{2.0});
  EXPECT_EQ(pendulum.max_episode_steps(), 200);
  Goal goal(EnvOptions(1));
  ASSERT_EQ(goal.action_spec().size(), 2u);
  EXPECT_EQ(goal.action_spec()[0].key, NestedKey("action_type"));
  EXPECT_EQ(goal.action_spec()[0].num_categories, 2);
  EXPECT_EQ(goal.action_spec()[1].key, NestedKey("action_param"));
  EXPECT_EQ(goal.action_spec()[1].shape, std::vector<int64_t>{1});
  EXPECT_EQ(goal.max_episode_steps(), 50);
  EXPECT_EQ(Goal(EnvOptions(1).max_episode_steps(7)).max_episode_steps(), 7);
}

TEST(BatchedEnv, FinishedEnvironmentsResetThemselves) {
  // Always pushing right topples the pole within a few dozen steps.
  CartPole env(EnvOptions(4));
  env.reset(1);
  TensorDict push({{"action", at::ones({4}, at::kLong)}}, {4});
  int steps = 0;
  TensorDict out;
  do {
    out = env.step(push);
    ++steps;
    ASSERT_LT(steps, 100);
  } while (!out.get("terminated").any().item<bool>());
  const at::Tensor done = out.get("terminated").squeeze(1);
  const at::Tensor obs = out.get("observation");
  const at::Tensor final_obs = out.get("final_observation");
  // Finished: observation is a fresh start, final_observation is past the threshold.
  EXPECT_TRUE(obs.index({done}).abs().le(0.05).all().item<bool>());
  EXPECT_TRUE(final_obs.index({done}).select(1, 2).abs().gt(CartPole::kThetaThresholdRadians)
                  .all().item<bool>());
  // Unfinished: both keys hold the same next observation.
  EXPECT_TRUE(obs.index({~done}).equal(final_obs.index({~done})));
  // Step counts restart for the finished ones only.
  EXPECT_TRUE(env.episode_steps().index({done}).eq(0).all().item<bool>());
  EXPECT_TRUE(env.episode_steps().index({~done}).eq(steps).all().item<bool>());
  EXPECT_TRUE(env.state().to(at::kFloat).equal(obs));
}

TEST(BatchedEnv, CartPoleIsTruncatedAtExactly500Steps) {
  // A linear controller balances every pole; only the time limit ends the episodes.
  CartPole env(EnvOptions(8));
  at::Tensor obs = env.reset(2).get("observation");
  const at::Tensor gains = at::tensor({0.05f, 0.2f, 4.0f, 0.6f});
  for (int t = 1; t <= 500; ++t) {
    TensorDict action({{"action", obs.matmul(gains).gt(0).to(at::kLong)}}, {8});
    TensorDict out = env.step(action);
    ASSERT_FALSE(out.get("terminated").any().item<bool>()) << "step " << t;
    ASSERT_EQ(out.get("truncated").all().item<bool>(), t == 500) << "step " << t;
    ASSERT_EQ(out.get("truncated").any().item<bool>(), t == 500) << "step " << t;
    obs = out.get("observation");
  }
  EXPECT_TRUE(env.episode_steps().eq(0).all().item<bool>());
}

TEST(BatchedEnv, PendulumIsTruncatedAt200StepsAndNeverTerminates) {
  Pendulum env(EnvOptions(3));
  env.reset(0);
  TensorDict action({{"action", at::full({3, 1}, 2.0f)}}, {3});
  for (int t = 1; t <= 400; ++t) {
    TensorDict out = env.step(action);
    ASSERT_FALSE(out.get("terminated").any().item<bool>());
    ASSERT_EQ(out.get("truncated").all().item<bool>(), t % 200 == 0) << "step " << t;
  }
}

TEST(BatchedEnv, PartialResetTouchesOnlyMaskedEnvironments) {
  Pendulum env(EnvOptions(4));
  env.reset(9);
  TensorDict action({{"action", at::zeros({4, 1})}}, {4});
  for (int t = 0; t < 5; ++t) env.step(action);
  const at::Tensor before = env.state();
  const at::Tensor mask = at::tensor({1, 0, 1, 0}).to(at::kBool);
  at::Tensor obs = env.reset(mask).get("observation");
  const at::Tensor after = env.state();
  EXPECT_TRUE(after.index({~mask}).equal(before.index({~mask})));
  EXPECT_FALSE(after[0].equal(before[0]));
  EXPECT_FALSE(after[2].equal(before[2]));
  EXPECT_TRUE(env.episode_steps().equal(at::tensor({0, 5, 0, 5}, at::kLong)));
  EXPECT_EQ(obs.sizes(), c10::IntArrayRef({4, 3}));
}

TEST(BatchedEnv, ResetToStartsFromTheGivenStates) {
  Pendulum env(EnvOptions(2));
  at::Tensor start = at::tensor({0.0, 0.0, 3.141592653589793 / 2, 1.0}, at::kDouble).view({2, 2});
  at::Tensor obs = env.reset_to(start).get("observation");
  EXPECT_TRUE(at::allclose(obs, at::tensor({1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f}).view({2, 3}), 1e-6, 1e-6));
  // Upright and still with no torque: the best reward there is.
  TensorDict out = env.step(TensorDict({{"action", at::zeros({2, 1})}}, {2}));
  EXPECT_EQ(out.get("reward")[0].item<float>(), 0.0f);
  // Torque beyond the bound is clipped to 2: cost 0.001 * 4.
  env.reset_to(at::zeros({2, 2}, at::kDouble));
  out = env.step(TensorDict({{"action", at::full({2, 1}, 5.0f)}}, {2}));
  EXPECT_NEAR(out.get("reward")[0].item<float>(), -0.004f, 1e-7);
  EXPECT_NEAR(out.get("observation")[0][2].item<float>(), 3.0f * 2.0f * 0.05f, 1e-6);
}

// The usage examples of the headers, as written there.
TEST(HeaderExamples, Run) {
  {  // batched_env.h
    tdp::env::CartPole env(tdp::env::EnvOptions(/*num_envs=*/64));
    tdp::TensorDict td = env.reset(/*seed=*/0);
    td.set("action", at::randint(2, {64}, at::kLong));
    tdp::TensorDict out = env.step(td);
    at::Tensor done = out.get("done");
    EXPECT_EQ(done.sizes(), c10::IntArrayRef({64, 1}));
  }
  {  // cartpole.h
    tdp::env::CartPole env(tdp::env::EnvOptions(/*num_envs=*/8));
    tdp::TensorDict td = env.reset(/*seed=*/1);
    td.set("action", at::ones({8}, at::kLong));
    tdp::TensorDict out = env.step(td);
    EXPECT_TRUE(out.get("reward").eq(1).all().item<bool>());
  }
  {  // pendulum.h
    tdp::env::Pendulum env(tdp::env::EnvOptions(/*num_envs=*/8));
    tdp::TensorDict td = env.reset(/*seed=*/1);
    td.set("action", at::zeros({8, 1}));
    tdp::TensorDict out = env.step(td);
    EXPECT_TRUE(out.get("reward").le(0).all().item<bool>());
    EXPECT_TRUE(out.get("reward").ge(-16.2736044).all().item<bool>());
  }
  {  // goal.h
    tdp::env::Goal env(tdp::env::EnvOptions(/*num_envs=*/8));
    tdp::TensorDict td = env.reset(/*seed=*/1);
    td.set("action_type", at::full({8}, tdp::env::Goal::kShoot));
    td.set("action_param", at::zeros({8, 1}));
    tdp::TensorDict out = env.step(td);
    EXPECT_TRUE(out.get("terminated").all().item<bool>());
  }
}

// Mean return per finished episode of `policy` over `episodes` episodes in 64 environments.
double goal_mean_return(const std::function<TensorDict(const at::Tensor&)>& policy,
                        int episodes) {
  Goal env(EnvOptions(64));
  at::Tensor obs = env.reset(123).get("observation");
  at::Tensor returns = at::zeros({64});
  double total = 0;
  int finished = 0;
  while (finished < episodes) {
    TensorDict out = env.step(policy(obs));
    returns += out.get("reward").squeeze(1);
    at::Tensor done = out.get("done").squeeze(1);
    total += returns.index({done}).sum().item<double>();
    finished += done.sum().item<int>();
    returns.masked_fill_(done, 0);
    obs = out.get("observation");
  }
  return total / finished;
}

TEST(Goal, DribblingThenShootingBeatsRandomPlay) {
  at::Generator gen = at::detail::createCPUGenerator(3);
  auto random_policy = [&](const at::Tensor& obs) {
    return TensorDict({{"action_type", at::randint(2, {64}, gen, at::kLong)},
                       {"action_param", at::empty({64, 1}).uniform_(-1, 1, gen)}},
                      {64});
  };
  auto good_policy = [](const at::Tensor& obs) {
    const at::Tensor gap = obs.narrow(1, 2, 1);  // g - x
    const at::Tensor close = gap.abs() < 0.1;
    return TensorDict(
        {{"action_type", close.squeeze(1).to(at::kLong)},
         {"action_param", at::where(close, gap / Goal::kShotScale,
                                    (gap / Goal::kMoveScale).clamp(-1, 1))}},
        {64});
  };
  const double random_return = goal_mean_return(random_policy, 2000);
  const double good_return = goal_mean_return(good_policy, 2000);
  std::cerr << "Goal mean return: random " << random_return << ", dribble-then-shoot "
            << good_return << "\n";
  EXPECT_LT(random_return, 0.2);
  EXPECT_GT(good_return, 0.6);
  EXPECT_GT(good_return, random_return + 0.4);
}

TEST(Goal, ShootingEndsTheEpisodeAndScoresByDistance) {
  Goal env(EnvOptions(3));
  // (x, g, t): a perfect shot from the goal itself (no noise at distance 0), a shot that
  // misses by 1, and a move that costs 0.02.
  env.reset_to(at::tensor({0.5, 0.5, 0.0, -1.0, 0.0, 0.0, 0.0, 0.5, 0.0}, at::kDouble).view({3, 3}));
  TensorDict out = env.step(TensorDict({{"action_type", at::tensor({1, 1, 0}, at::kLong)},
                                        {"action_param", at::tensor({0.0f, 0.0f, 1.0f}).view({3, 1})}},
                                       {3}));
  EXPECT_TRUE(out.get("terminated").squeeze(1).equal(at::tensor({1, 1, 0}).to(at::kBool)));
  EXPECT_FLOAT_EQ(out.get("reward")[0][0].item<float>(), 1.0f);
  EXPECT_LT(out.get("reward")[1][0].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(out.get("reward")[2][0].item<float>(), -0.02f);
  // The mover advanced by 0.2 and a step of time.
  EXPECT_TRUE(at::allclose(out.get("observation")[2],
                           at::tensor({0.2f, 0.5f, 0.3f, 1.0f / 50}), 1e-6, 1e-6));
}

}  // namespace
}  // namespace tdp::env
