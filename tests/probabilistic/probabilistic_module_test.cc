// ProbabilisticTensorDictModule and the parameter modules: the reference's docstring examples,
// a Gaussian actor and a hybrid (categorical + normal) actor under every interaction type and
// both aggregation modes, generators, num_samples, errors and thread-local interaction types.
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "sdk/distributions/normal.h"
#include "sdk/distributions/registry.h"
#include "sdk/distributions/tanh_normal.h"
#include "sdk/nn/mappings.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/probabilistic/probabilistic_sequential.h"
#include "tests/testing/error_of.h"

namespace tdp::nn {
namespace {

using test_util::error_of;

constexpr double kHalfLog2Pi = 0.91893853320467274178;

at::Tensor normal_log_prob(const at::Tensor& x, const at::Tensor& loc, const at::Tensor& scale) {
  return -((x - loc) * (x - loc)) / (2 * scale * scale) - scale.log() - kHalfLog2Pi;
}

// A Gaussian actor: observation [B, 17] -> MLP -> 2x6 -> NormalParamExtractor -> Normal.
ProbabilisticTensorDictSequential gaussian_actor(InteractionType default_type =
                                                     InteractionType::kDeterministic,
                                                 std::optional<uint64_t> seed = std::nullopt) {
  torch::manual_seed(0);
  torch::nn::Sequential mlp(torch::nn::Linear(17, 64), torch::nn::Tanh(), torch::nn::Linear(64, 64),
                            torch::nn::Tanh(), torch::nn::Linear(64, 12));
  auto options = ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
                     .distribution("normal")
                     .return_log_prob(true)
                     .default_interaction_type(default_type);
  if (seed.has_value()) options.seed(*seed);
  return ProbabilisticTensorDictSequential(
      {TensorDictModule(mlp, TensorDictModuleOptions({"observation"}, {"param"})),
       TensorDictModule(NormalParamExtractor(),
                        TensorDictModuleOptions({"param"}, {"loc", "scale"})),
       ProbabilisticTensorDictModule(options)});
}

TensorDict observations(int64_t batch) {
  torch::manual_seed(1);
  return TensorDict({{"observation", torch::randn({batch, 17})}}, {batch});
}

// ---- options -------------------------------------------------------------------------------

TEST(ProbabilisticModuleOptions, BracedKeysAndMapForms) {
  ProbabilisticTensorDictModuleOptions list({"loc", "scale"}, {"action"});
  EXPECT_EQ(list.in_keys(), (std::vector<NestedKey>{"loc", "scale"}));
  EXPECT_EQ(list.dist_keys(), (std::vector<std::string>{"loc", "scale"}));
  ProbabilisticTensorDictModuleOptions nested({NestedKey{"agent", "loc"}});
  EXPECT_EQ(nested.dist_keys(), (std::vector<std::string>{"loc"}));
  ProbabilisticTensorDictModuleOptions map(DistKeyMap{{"loc", "loc2"}, {"scale", {"p", "s"}}},
                                           {"sample"});
  EXPECT_EQ(map.in_keys(), (std::vector<NestedKey>{"loc2", NestedKey{"p", "s"}}));
  EXPECT_EQ(map.dist_keys(), (std::vector<std::string>{"loc", "scale"}));
  EXPECT_EQ(map.default_interaction_type(), InteractionType::kDeterministic);
  EXPECT_EQ(map.distribution().to_string(), "delta");
  EXPECT_EQ(map.n_empirical_estimate(), 1000);
}

TEST(ProbabilisticModule, DefaultIsDeltaWithUnderscoreOutKey) {
  CompositeLpAggregateGuard aggregate(false, true);
  ProbabilisticTensorDictModule module(ProbabilisticTensorDictModuleOptions(
      DistKeyMap{{"param", "x"}}));
  EXPECT_EQ(module->dist_sample_keys(), std::vector<NestedKey>{"_"});
  TensorDict td({{"x", torch::arange(3.0)}}, {3});
  module(td);
  EXPECT_TRUE(td.get("_").equal(torch::arange(3.0)));
}

// ---- the reference's docstring examples ----------------------------------------------------

// ProbabilisticTensorDictModule's example: GRUCell -> NormalParamExtractor -> Independent Normal.
TEST(ProbabilisticModuleDocstring, GruNormalParamsIndependentNormal) {
  for (bool aggregate : {true, false}) {
    CompositeLpAggregateGuard guard(aggregate, true);
    torch::manual_seed(0);
    TensorDict td({{"input", torch::randn({3, 4})}, {"hidden", torch::randn({3, 8})}}, {3});
    TensorDictModule module(torch::nn::GRUCell(4, 8),
                            TensorDictModuleOptions({"input", "hidden"}, {"params"}));
    TensorDictModule normal_params(NormalParamExtractor(),
                                   TensorDictModuleOptions({"params"}, {"loc", "scale"}));
    ProbabilisticTensorDictModule prob_module(
        ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
            .distribution("independent_normal")
            .return_log_prob(true));
    ProbabilisticTensorDictSequential td_module({module, normal_params, prob_module});
    td_module(td);
    const NestedKey lp_key = aggregate ? NestedKey("sample_log_prob") : NestedKey("action_log_prob");
    EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"input", "hidden", "params", "loc", "scale",
                                                 "action", lp_key}));
    EXPECT_EQ(td.get("action").sizes(), (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(td.get("params").sizes(), (std::vector<int64_t>{3, 8}));
    EXPECT_EQ(td.get(lp_key).sizes(), (std::vector<int64_t>{3}));
    EXPECT_EQ(td_module->get_dist(td).to_string(), "Independent(Normal(loc: [3, 4], scale: [3, 4]), 1)");
    // DETERMINISTIC by default: the action is the mean.
    EXPECT_TRUE(td.get("action").equal(td.get("loc")));
    EXPECT_TRUE(td.get(lp_key).allclose(
        normal_log_prob(td.get("loc"), td.get("loc"), td.get("scale")).sum(-1)));
  }
}

TEST(NormalParamExtractorDocstring, LinearThenExtractor) {
  torch::manual_seed(0);
  torch::nn::Linear module(3, 4);
  NormalParamExtractor normal_params;
  at::Tensor tensor = torch::randn({3});
  auto [loc, scale] = normal_params(module(tensor));
  EXPECT_EQ(loc.sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(scale.sizes(), (std::vector<int64_t>{2}));
  EXPECT_TRUE((scale > 0).all().item<bool>());
  at::Tensor out = module(tensor);
  EXPECT_TRUE(loc.equal(out.slice(-1, 0, 2)));
  EXPECT_TRUE(scale.allclose(mappings("biased_softplus_1.0")(out.slice(-1, 2, 4)).clamp_min(1e-4)));
  // biased_softplus_1.0 maps 0 to 1.
  EXPECT_TRUE(std::get<1>(normal_params(torch::zeros({4}))).allclose(torch::ones({2})));
}

TEST(NormalParamExtractor, LowerBoundMappingAndOddInput) {
  NormalParamExtractor extractor(NormalParamExtractorOptions().scale_mapping("exp").scale_lb(0.5));
  auto [loc, scale] = extractor(torch::tensor({1.0, 2.0, -10.0, 1.0}));
  EXPECT_TRUE(loc.equal(torch::tensor({1.0, 2.0})));
  EXPECT_TRUE(scale.allclose(torch::tensor({0.5, std::exp(1.0)})));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { extractor(torch::zeros({2, 3})); }),
            "NormalParamExtractor: the last dim of the input must be even (loc and scale halves); "
            "got shape [2, 3].");
  EXPECT_TRUE(extractor->parameters().empty());
}

TEST(AddStateIndependentNormalScaleDocstring, LinearThenScale) {
  torch::manual_seed(0);
  const int64_t num_outputs = 4;
  torch::nn::Linear module(3, num_outputs);
  AddStateIndependentNormalScale module_normal(AddStateIndependentNormalScaleOptions({num_outputs}));
  auto [loc, scale] = module_normal(module(torch::randn({3})));
  EXPECT_EQ(loc.sizes(), (std::vector<int64_t>{4}));
  EXPECT_EQ(scale.sizes(), (std::vector<int64_t>{4}));
  EXPECT_TRUE((scale > 0).all().item<bool>());
  EXPECT_TRUE(scale.allclose(torch::ones({4})));  // exp(init_value 0)
}

TEST(AddStateIndependentNormalScale, LearnsAndChecksShape) {
  AddStateIndependentNormalScale add(AddStateIndependentNormalScaleOptions({2})
                                         .scale_mapping("biased_softplus_1.0")
                                         .init_value(0.0));
  ASSERT_EQ(add->parameters().size(), 1u);
  EXPECT_EQ(add->named_parameters().begin()->key(), "state_independent_scale");
  auto [loc, scale] = add(torch::zeros({5, 2}));
  EXPECT_EQ(scale.sizes(), (std::vector<int64_t>{5, 2}));
  EXPECT_TRUE(scale.allclose(torch::ones({5, 2})));
  scale.sum().backward();
  EXPECT_TRUE(add->state_independent_scale.grad().defined());
  EXPECT_EQ(error_of<std::invalid_argument>([&] { add(torch::zeros({5, 3})); }),
            "AddStateIndependentNormalScale: last dimensions of loc ([3]) do not match the number "
            "of dimensions in scale ([2])");
  AddStateIndependentNormalScale buffer(AddStateIndependentNormalScaleOptions({2}).make_param(false));
  EXPECT_TRUE(buffer->parameters().empty());
  EXPECT_EQ(buffer->buffers().size(), 1u);
}

// ---- Gaussian actor ------------------------------------------------------------------------

TEST(GaussianActor, EveryInteractionTypeBothAggregationModes) {
  for (bool aggregate : {false, true}) {
    CompositeLpAggregateGuard guard(aggregate, true);
    for (InteractionType type : {InteractionType::kDeterministic, InteractionType::kMode,
                                 InteractionType::kMean, InteractionType::kMedian,
                                 InteractionType::kRandom}) {
      SCOPED_TRACE(std::string(to_string(type)) + (aggregate ? " aggregate" : " per-part"));
      auto actor = gaussian_actor(InteractionType::kDeterministic, /*seed=*/7);
      TensorDict td = observations(5);
      {
        InteractionTypeGuard scope(type, /*thread_local_only=*/true);
        actor(td);
      }
      const NestedKey lp_key = aggregate ? NestedKey("sample_log_prob") : NestedKey("action_log_prob");
      EXPECT_EQ(actor->log_prob_keys(), std::vector<NestedKey>{lp_key});
      EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"observation", "param", "loc", "scale",
                                                   "action", lp_key}));
      const at::Tensor loc = td.get("loc");
      const at::Tensor scale = td.get("scale");
      const at::Tensor action = td.get("action");
      EXPECT_EQ(action.sizes(), (std::vector<int64_t>{5, 6}));
      EXPECT_EQ(td.get(lp_key).sizes(), (std::vector<int64_t>{5, 6}));
      if (type == InteractionType::kRandom) {
        at::Generator gen = at::detail::createCPUGenerator(7);
        at::Tensor eps = torch::empty({5, 6}).normal_(0, 1, gen);
        EXPECT_TRUE(action.allclose(loc + eps * scale));
        EXPECT_TRUE(action.requires_grad());  // rsample: differentiable
      } else {
        EXPECT_TRUE(action.allclose(loc));
      }
      EXPECT_TRUE(td.get(lp_key).allclose(normal_log_prob(action, loc, scale)));
      // Recomputed later from the stored observation and action.
      TensorDict later = td.select({"observation", "action"});
      auto recomputed = actor->log_prob(later);
      EXPECT_TRUE(std::get<at::Tensor>(recomputed).allclose(td.get(lp_key)));
    }
  }
}

TEST(GaussianActor, SeededRandomDrawsAdvanceAndReproduce) {
  InteractionTypeGuard scope(InteractionType::kRandom, true);
  auto a = gaussian_actor(InteractionType::kDeterministic, 3);
  auto b = gaussian_actor(InteractionType::kDeterministic, 3);
  TensorDict t1 = a(observations(4));
  TensorDict t2 = a(observations(4));
  TensorDict u1 = b(observations(4));
  EXPECT_FALSE(t1.get("action").equal(t2.get("action")));
  EXPECT_TRUE(t1.get("action").equal(u1.get("action")));
}

TEST(GaussianActor, DefaultInteractionTypeUsedOutsideScopes) {
  ASSERT_FALSE(interaction_type().has_value());
  auto actor = gaussian_actor(InteractionType::kRandom, 11);
  TensorDict td = actor(observations(3));
  EXPECT_FALSE(td.get("action").allclose(td.get("loc")));
}

// ---- hybrid actor: a categorical and a normal head through a CompositeDistribution ---------

ProbabilisticTensorDictSequential hybrid_actor(uint64_t seed) {
  torch::manual_seed(0);
  auto heads = [](const at::Tensor& obs) {
    // Deterministic heads, so the expected values are plain functions of the observation.
    at::Tensor logits = obs.slice(-1, 0, 3) * 2;
    at::Tensor loc = obs.slice(-1, 3, 5);
    at::Tensor scale = obs.slice(-1, 5, 7).exp();
    return std::make_tuple(logits, loc, scale);
  };
  TensorDictModule params(heads, TensorDictModuleOptions(
                                     {"observation"}, {{"params", "disc", "logits"},
                                                       {"params", "cont", "loc"},
                                                       {"params", "cont", "scale"}}));
  ProbabilisticTensorDictModule prob(ProbabilisticTensorDictModuleOptions({"params"})
                                         .composite({{"cont", "normal"}, {"disc", "categorical"}})
                                         .return_log_prob(true)
                                         .seed(seed));
  return ProbabilisticTensorDictSequential({params, prob});
}

// tensordict's CompositeDistribution takes no extra keywords; a composite module used to
// ignore them silently.
TEST(HybridActor, ACompositeWithDistributionKwargsIsAConstructionError) {
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({"params"})
                                                  .composite({{"cont", "normal"}, {"disc", "categorical"}})
                                                  .distribution_kwargs({{"temperature", 1.0}}));
              }),
              ::testing::HasSubstr("a composite distribution takes no distribution_kwargs (got {'temperature': 1"));
}

TEST(HybridActor, EveryInteractionTypeBothAggregationModes) {
  for (bool aggregate : {false, true}) {
    CompositeLpAggregateGuard guard(aggregate, true);
    // MEAN is below: a categorical's mean is NaN (as in torch), which has no log-prob.
    for (InteractionType type : {InteractionType::kDeterministic, InteractionType::kMode,
                                 InteractionType::kRandom}) {
      SCOPED_TRACE(std::string(to_string(type)) + (aggregate ? " aggregate" : " per-part"));
      auto actor = hybrid_actor(5);
      auto prob = actor->at<ProbabilisticTensorDictModuleImpl>(-1);
      EXPECT_EQ(prob->dist_sample_keys(), (std::vector<NestedKey>{"cont", "disc"}));
      torch::manual_seed(2);
      TensorDict td({{"observation", torch::randn({4, 7})}}, {4});
      {
        InteractionTypeGuard scope(type, true);
        actor(td);
      }
      const at::Tensor obs = td.get("observation");
      const at::Tensor logits = obs.slice(-1, 0, 3) * 2;
      const at::Tensor loc = obs.slice(-1, 3, 5);
      const at::Tensor scale = obs.slice(-1, 5, 7).exp();
      const at::Tensor cont = td.get("cont");
      const at::Tensor disc = td.get("disc");
      EXPECT_EQ(cont.sizes(), (std::vector<int64_t>{4, 2}));
      EXPECT_EQ(disc.sizes(), (std::vector<int64_t>{4}));
      if (type == InteractionType::kRandom) {
        at::Generator gen = at::detail::createCPUGenerator(5);
        // Parts draw in distribution_map order from the one generator: cont, then disc.
        at::Tensor eps = torch::empty({4, 2}).normal_(0, 1, gen);
        EXPECT_TRUE(cont.allclose(loc + eps * scale));
        EXPECT_TRUE(((disc >= 0) & (disc < 3)).all().item<bool>());
      } else {
        EXPECT_TRUE(cont.allclose(loc));
        EXPECT_TRUE(disc.equal(logits.argmax(-1)));
      }
      const at::Tensor lp_cont = normal_log_prob(cont, loc, scale);
      const at::Tensor lp_disc =
          torch::log_softmax(logits, -1).gather(-1, disc.to(torch::kLong).unsqueeze(-1)).squeeze(-1);
      if (aggregate) {
        EXPECT_EQ(prob->log_prob_keys(), std::vector<NestedKey>{"sample_log_prob"});
        EXPECT_TRUE(td.get("sample_log_prob").allclose(lp_cont.sum(-1) + lp_disc));
        auto later = actor->log_prob(td.select({"observation", "cont", "disc"}));
        EXPECT_TRUE(std::get<at::Tensor>(later).allclose(td.get("sample_log_prob")));
      } else {
        EXPECT_EQ(prob->log_prob_keys(), (std::vector<NestedKey>{"cont_log_prob", "disc_log_prob"}));
        EXPECT_FALSE(td.contains("sample_log_prob"));
        EXPECT_TRUE(td.get("cont_log_prob").allclose(lp_cont));
        EXPECT_TRUE(td.get("disc_log_prob").allclose(lp_disc));
        auto later = std::get<TensorDict>(actor->log_prob(td.select({"observation", "cont", "disc"})));
        EXPECT_TRUE(later.get("cont_log_prob").allclose(td.get("cont_log_prob")));
        EXPECT_TRUE(later.get("disc_log_prob").allclose(td.get("disc_log_prob")));
      }
    }
  }
}

TEST(HybridActor, CustomLogProbKeysAndNameMap) {
  CompositeLpAggregateGuard guard(false, true);
  ProbabilisticTensorDictModule prob(
      ProbabilisticTensorDictModuleOptions({"params"})
          .composite({{"cont", "normal"}, {"disc", "categorical"}},
                     dist::CompositeDistributionOptions().name_map(
                         {{"cont", {"action", "cont"}}, {"disc", {"action", "disc"}}}))
          .log_prob_keys({"lp_cont", "lp_disc"})
          .return_log_prob(true));
  EXPECT_EQ(prob->dist_sample_keys(),
            (std::vector<NestedKey>{NestedKey{"action", "cont"}, NestedKey{"action", "disc"}}));
  EXPECT_EQ(prob->out_keys(), (std::vector<NestedKey>{NestedKey{"action", "cont"},
                                                       NestedKey{"action", "disc"}, "lp_cont",
                                                       "lp_disc"}));
  TensorDict td({{{"params", "cont", "loc"}, torch::zeros({2, 3})},
                 {{"params", "cont", "scale"}, torch::ones({2, 3})},
                 {{"params", "disc", "logits"}, torch::zeros({2, 4})}},
                {2});
  prob(td);
  EXPECT_TRUE(td.get("lp_cont").allclose(torch::full({2, 3}, -kHalfLog2Pi)));
  EXPECT_TRUE(td.get("lp_disc").allclose(torch::full({2}, -std::log(4.0))));
}

TEST(HybridActor, MeanTakesEachPartsMean) {
  ProbabilisticTensorDictModule prob(ProbabilisticTensorDictModuleOptions({"params"})
                                         .composite({{"cont", "normal"}, {"disc", "categorical"}})
                                         .default_interaction_type(InteractionType::kMean));
  TensorDict td({{{"params", "cont", "loc"}, torch::full({2, 3}, 4.0)},
                 {{"params", "cont", "scale"}, torch::ones({2, 3})},
                 {{"params", "disc", "logits"}, torch::zeros({2, 4})}},
                {2});
  prob(td);
  EXPECT_TRUE(td.get("cont").equal(torch::full({2, 3}, 4.0)));
  EXPECT_TRUE(td.get("disc").isnan().all().item<bool>());
}

TEST(HybridActor, MedianIsNotImplementedForComposites) {
  auto actor = hybrid_actor(1);
  InteractionTypeGuard scope(InteractionType::kMedian, true);
  TensorDict td({{"observation", torch::randn({2, 7})}}, {2});
  EXPECT_NE(error_of<std::exception>([&] { actor(td); })
                .find("method CompositeDistribution.median is not implemented"),
            std::string::npos);
}

// ---- MEAN without an analytic mean -----------------------------------------------------------

class NoMeanNormal : public dist::Normal {
 public:
  using Normal::Normal;
  at::Tensor mean() const override { not_implemented("mean"); }
  std::string name() const override { return "NoMeanNormal"; }
};

TEST(ProbabilisticModule, MeanFallsBackToEmpiricalEstimate) {
  ProbabilisticTensorDictModule module(
      ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"x"})
          .distribution([](const dist::Params& p, const dist::DistributionKwargs&) -> dist::DistributionPtr {
            return std::make_shared<NoMeanNormal>(p.at("loc"), p.at("scale"));
          })
          .n_empirical_estimate(4000)
          .default_interaction_type(InteractionType::kMean)
          .seed(0));
  TensorDict td({{"loc", torch::tensor({1.0f, -2.0f})}, {"scale", torch::tensor({0.5f, 0.5f})}}, {2});
  module(td);
  at::Generator gen = at::detail::createCPUGenerator(0);
  at::Tensor expected = (td.get("loc") + torch::empty({4000, 2}).normal_(0, 1, gen) * td.get("scale")).mean(0);
  EXPECT_TRUE(td.get("x").allclose(expected));
  EXPECT_TRUE(td.get("x").allclose(td.get("loc"), 0, 0.05));
}

// ---- num_samples, generator_key, distribution kwargs ---------------------------------------

TEST(ProbabilisticModule, NumSamplesExpandsTheOutput) {
  CompositeLpAggregateGuard guard(false, true);
  ProbabilisticTensorDictModule module(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"x"})
                                           .distribution("normal")
                                           .num_samples({4})
                                           .return_log_prob(true)
                                           .default_interaction_type(InteractionType::kRandom));
  TensorDict td({{"loc", torch::zeros({3, 2})}, {"scale", torch::ones({3, 2})}}, {3});
  TensorDict out = module(td);
  EXPECT_EQ(out.batch_size(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(out.get("x").sizes(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(out.get("x_log_prob").sizes(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(out.get("loc").sizes(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_FALSE(td.contains("x"));
}

TEST(ProbabilisticModule, GeneratorKeyReadsUsesAndAdvancesTheSeed) {
  ProbabilisticTensorDictModule module(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"x"})
                                           .distribution("normal")
                                           .generator_key("rng")
                                           .default_interaction_type(InteractionType::kRandom));
  auto make = [] {
    return TensorDict({{"loc", torch::zeros({3})}, {"scale", torch::ones({3})},
                       {"rng", torch::tensor(int64_t{42})}},
                      {});
  };
  TensorDict a = module(make());
  TensorDict b = module(make());
  EXPECT_TRUE(a.get("x").equal(b.get("x")));  // same seed, same draw
  at::Generator gen = at::detail::createCPUGenerator(42);
  at::Tensor eps = torch::empty({3}).normal_(0, 1, gen);
  EXPECT_TRUE(a.get("x").equal(eps));
  at::Tensor next = torch::randint(0, int64_t{1} << 62, {}, gen, torch::kLong);
  EXPECT_EQ(a.get("rng").item<int64_t>(), next.item<int64_t>());
  TensorDict c = module(a);  // continues the stream
  EXPECT_FALSE(c.get("x").equal(b.get("x")));
  TensorDict bad({{"loc", torch::zeros({3})}, {"scale", torch::ones({3})},
                  {"rng", torch::tensor({1, 2})}},
                 {});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { module(bad); }),
            "Generator key 'rng' resolved to a tensor of 2 elements; expected a scalar seed.");
}

TEST(ProbabilisticModule, ScalarKwargBecomesAParameter) {
  ProbabilisticTensorDictModule module(ProbabilisticTensorDictModuleOptions({"loc"}, {"sample"})
                                           .distribution("normal")
                                           .distribution_kwargs({{"scale", 1.0}}));
  TensorDict td({{"loc", torch::full({3}, 2.0)}}, {});
  EXPECT_EQ(module->get_dist(td).to_string(), "Normal(loc: [3], scale: [3])");
}

TEST(ProbabilisticModule, ExistingSamplesAreScoredNotRedrawn) {
  CompositeLpAggregateGuard guard(false, true);
  ProbabilisticTensorDictModule module(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"x"})
                                           .distribution("normal")
                                           .return_log_prob(true)
                                           .default_interaction_type(InteractionType::kRandom));
  TensorDict td({{"loc", torch::zeros({2})}, {"scale", torch::ones({2})}, {"x", torch::ones({2})}}, {});
  module->forward_requires_sample(td, std::nullopt, /*requires_sample=*/false);
  EXPECT_TRUE(td.get("x").equal(torch::ones({2})));
  EXPECT_TRUE(td.get("x_log_prob").allclose(torch::full({2}, -0.5 - kHalfLog2Pi)));
}

// ---- errors --------------------------------------------------------------------------------

TEST(ProbabilisticModuleErrors, LogProbKeysDisagreeWithAggregation) {
  {
    CompositeLpAggregateGuard guard(true, true);
    EXPECT_EQ(error_of<std::runtime_error>([] {
                ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({"params"})
                                                  .composite({{"a", "normal"}, {"b", "normal"}})
                                                  .log_prob_keys({"a_lp", "b_lp"}));
              }),
              "composite_lp_aggregate is set to True but log_prob_keys were passed. When "
              "composite_lp_aggregate() returns ``True``, log_prob_key must be used instead.");
  }
  CompositeLpAggregateGuard guard(false, true);
  EXPECT_EQ(error_of<std::runtime_error>([] {
              ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({"params"})
                                                .composite({{"a", "normal"}, {"b", "normal"}})
                                                .log_prob_key("lp"));
            }),
            "composite_lp_aggregate is set to `False` but a `log_prob_key` was passed. When "
            "composite_lp_aggregate() returns ``False``, log_prob_keys must be used instead.");
  ProbabilisticTensorDictModule two(ProbabilisticTensorDictModuleOptions({"params"})
                                        .composite({{"a", "normal"}, {"b", "normal"}}));
  EXPECT_EQ(error_of<std::runtime_error>([&] { two->log_prob_key(); }),
            "composite_lp_aggregate is set to ``False``, hence "
            "ProbabilisticTensorDictModule.log_prob_key cannot be accessed unless there is one and "
            "only one element in log_prob_keys (got log_prob_keys=['a_log_prob', 'b_log_prob']). "
            "When composite_lp_aggregate() returns ``False``, try to use "
            "ProbabilisticTensorDictModule.log_prob_keys instead.");
  CompositeLpAggregateGuard changed(true, true);
  EXPECT_EQ(error_of<std::runtime_error>([&] { two->log_prob_keys(); }),
            "composite_lp_aggregate is set to `True`, but the class was instantiated with `False` "
            "which may affect the log_prob_keys property.");
}

// The common step (one distribution drawn into the caller's TensorDict) and the general one
// (an explicit tensordict_out, here a handle to the same TensorDict) give the same values from
// the same seed, under every interaction type.
TEST(ProbabilisticModule, InPlaceDrawAndExplicitOutputAgree) {
  for (InteractionType type : {InteractionType::kRandom, InteractionType::kDeterministic, InteractionType::kMode,
                               InteractionType::kMean, InteractionType::kMedian}) {
    SCOPED_TRACE(to_string(type));
    auto make = [] {
      return ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
                                               .distribution("normal")
                                               .return_log_prob(true)
                                               .seed(5));
    };
    ProbabilisticTensorDictModule in_place = make(), general = make();
    auto inputs = [] {
      return TensorDict({{"loc", torch::arange(6.0).reshape({2, 3})}, {"scale", torch::full({2, 3}, 0.5)}}, {2});
    };
    InteractionTypeGuard scope(type, /*thread_local_only=*/true);
    for (int step = 0; step < 2; ++step) {  // the second step draws from the advanced generators
      TensorDict a = inputs(), b = inputs();
      in_place(a);
      general(b, b);
      EXPECT_EQ(a.keys(), b.keys());
      EXPECT_TRUE(a.get("action").equal(b.get("action")));
      EXPECT_TRUE(a.get("action_log_prob").equal(b.get("action_log_prob")));
    }
  }
}

// A step that fails writes nothing: here the log-prob key, which cannot be named once
// composite_lp_aggregate() differs from its value at construction. Both ways through the module:
// the in-place step, and the general one (an explicit tensordict_out).
TEST(ProbabilisticModuleErrors, AFailedStepLeavesTheTensorDictAsItWas) {
  ProbabilisticTensorDictModule module(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
                                           .distribution("normal")
                                           .default_interaction_type(InteractionType::kRandom)
                                           .return_log_prob(true));
  TensorDict td({{"loc", torch::zeros({2, 3})}, {"scale", torch::ones({2, 3})}}, {2});
  TensorDict out(std::vector<int64_t>{2});
  CompositeLpAggregateGuard changed(true, /*thread_local_only=*/true);
  EXPECT_THAT(error_of<std::runtime_error>([&] { module(td); }),
              testing::HasSubstr("but the class was instantiated with `False`"));
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"loc", "scale"}));
  EXPECT_THAT(error_of<std::runtime_error>([&] { module(td, out); }),
              testing::HasSubstr("but the class was instantiated with `False`"));
  EXPECT_TRUE(out.keys().empty());
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"loc", "scale"}));
}

TEST(ProbabilisticModuleErrors, MissingParameter) {
  ProbabilisticTensorDictModule module(
      ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"x"}).distribution("normal"));
  TensorDict td({{"loc", torch::zeros({2})}}, {});
  EXPECT_EQ(error_of<KeyError>([&] { module->get_dist(td); }),
            "ProbabilisticTensorDictModule(in_keys=['loc', 'scale'], out_keys=['x']): "
            "distribution parameter 'scale' is read from 'scale', which is not in the TensorDict; "
            "its keys are ['loc'].");
}

// A kwarg the distribution also accepts as a number stays a number (TanhNormal's bounds); one
// that only names a parameter becomes a constant tensor shaped like the others (Normal's scale).
TEST(ProbabilisticModule, DistributionKwargsStayNumbersWhereTheDistributionAcceptsThem) {
  TensorDict td({{"loc", torch::zeros({4, 2})}, {"scale", torch::ones({4, 2})}}, {4});
  ProbabilisticTensorDictModule squashed(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
                                             .distribution("tanh_normal")
                                             .distribution_kwargs({{"low", -2.0}, {"high", 2.0}}));
  auto tanh_normal = std::dynamic_pointer_cast<const dist::TanhNormal>(squashed->get_dist(td).distribution());
  ASSERT_NE(tanh_normal, nullptr);
  EXPECT_EQ(tanh_normal->low().dim(), 0);
  EXPECT_EQ(tanh_normal->high().item<double>(), 2.0);
  EXPECT_TRUE(squashed(td).get("action").abs().le(2.0).all().item<bool>());

  ProbabilisticTensorDictModule unit(ProbabilisticTensorDictModuleOptions({"loc"}, {"action"})
                                         .distribution("normal")
                                         .distribution_kwargs({{"scale", 0.5}}));
  auto normal = std::dynamic_pointer_cast<const dist::Normal>(unit->get_dist(td).distribution());
  ASSERT_NE(normal, nullptr);
  EXPECT_TRUE(normal->scale().equal(torch::full({4, 2}, 0.5)));
}

// ---- printing ------------------------------------------------------------------------------

TEST(ProbabilisticModule, Repr) {
  CompositeLpAggregateGuard guard(false, true);
  ProbabilisticTensorDictModule module(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
                                           .distribution("tanh_normal")
                                           .distribution_kwargs({{"low", -2.0}})
                                           .return_log_prob(true)
                                           .default_interaction_type(InteractionType::kRandom));
  EXPECT_EQ(module->to_string(),
            "ProbabilisticTensorDictModule(\n"
            "    distribution_class=tanh_normal,\n"
            "    distribution_kwargs={'low': -2},\n"
            "    default_interaction_type=random,\n"
            "    num_samples=None,\n"
            "    return_log_prob=True,\n"
            "    in_keys=['loc', 'scale'],\n"
            "    out_keys=['action', 'action_log_prob'])");
}

// ---- threads -------------------------------------------------------------------------------

TEST(ProbabilisticModuleThreads, ThreadLocalInteractionTypesOnASharedModule) {
  auto actor = gaussian_actor(InteractionType::kDeterministic, 9);
  std::atomic<int> random_equal{0};
  std::atomic<int> deterministic_differs{0};
  std::atomic<int> in_scope{0};
  constexpr int kIterations = 200;
  auto run = [&](InteractionType type) {
    InteractionTypeGuard scope(type, /*thread_local_only=*/true);
    ++in_scope;
    while (in_scope.load() < 2) std::this_thread::yield();  // both scopes alive at once
    for (int i = 0; i < kIterations; ++i) {
      TensorDict td({{"observation", torch::randn({8, 17})}}, {8});
      actor(td);
      const bool same = td.get("action").equal(td.get("loc"));
      if (type == InteractionType::kRandom && same) ++random_equal;
      if (type == InteractionType::kDeterministic && !same) ++deterministic_differs;
    }
  };
  std::thread explore(run, InteractionType::kRandom);
  std::thread evaluate(run, InteractionType::kDeterministic);
  explore.join();
  evaluate.join();
  EXPECT_EQ(random_equal.load(), 0);
  EXPECT_EQ(deterministic_differs.load(), 0);
  EXPECT_FALSE(interaction_type().has_value());
}

TEST(DistributionBinding, AnUnknownDistributionNameIsAConstructionError) {
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                ProbabilisticTensorDictModule(
                    ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"x"}).distribution("nromal"));
              }),
              ::testing::HasSubstr("unknown distribution 'nromal'"));
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({"params"}, {}).composite(
                    {{"a", "normal"}, {"b", "gaussian"}}));
              }),
              ::testing::HasSubstr("unknown distribution 'gaussian'"));
}

TEST(DistributionBinding, ReRegisteringANameAfterConstructionDoesNotChangeTheModule) {
  auto& registry = dist::DistributionRegistry::global();
  const dist::DistributionSignature signature = registry.signature("normal");
  auto normal_module = [] {
    return ProbabilisticTensorDictModule(
        ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"x"}).distribution("binding_test_normal"));
  };
  registry.replace("binding_test_normal", signature, [](const dist::Params& p, const dist::DistributionKwargs&) {
    return std::make_shared<dist::Normal>(p.at("loc"), p.at("scale"));
  });
  ProbabilisticTensorDictModule built_before = normal_module();
  // The name now builds a Normal centred 100 away; only modules built afterwards see it.
  registry.replace("binding_test_normal", signature, [](const dist::Params& p, const dist::DistributionKwargs&) {
    return std::make_shared<dist::Normal>(p.at("loc") + 100, p.at("scale"));
  });
  ProbabilisticTensorDictModule built_after = normal_module();
  TensorDict td({{"loc", torch::zeros({2, 3})}, {"scale", torch::ones({2, 3})}}, {2});
  EXPECT_TRUE(built_before(td.clone()).get("x").equal(torch::zeros({2, 3})));
  EXPECT_TRUE(built_after(td.clone()).get("x").equal(torch::full({2, 3}, 100.0)));
}

}  // namespace
}  // namespace tdp::nn
