// The registry by name: built-ins, user registrations, error texts, thread safety.
#include "sdk/distributions/registry.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "sdk/distributions/categorical.h"
#include "sdk/distributions/composite_distribution.h"
#include "sdk/distributions/independent.h"
#include "sdk/distributions/normal.h"
#include "sdk/distributions/tanh_normal.h"
#include "sdk/distributions/truncated_normal.h"
#include "tests/testing/error_of.h"

namespace tdp::dist {
namespace {

using ::testing::HasSubstr;

using test_util::error_of;

const at::Tensor kLoc = at::linspace(-1, 1, 6).reshape({2, 3});
const at::Tensor kScale = at::linspace(0.5, 1.5, 6).reshape({2, 3});

TEST(Registry, BuiltInsBuildTheRightDistributions) {
  const std::vector<std::pair<std::string, std::pair<Params, std::string>>> cases = {
      {"normal", {{{"loc", kLoc}, {"scale", kScale}}, "Normal"}},
      {"independent_normal", {{{"loc", kLoc}, {"scale", kScale}}, "Independent"}},
      {"tanh_normal", {{{"loc", kLoc}, {"scale", kScale}}, "TanhNormal"}},
      {"categorical", {{{"logits", kLoc}}, "Categorical"}},
      {"one_hot_categorical", {{{"probs", kScale}}, "OneHotCategorical"}},
      {"bernoulli", {{{"logits", kLoc}}, "Bernoulli"}},
      {"beta", {{{"concentration1", kScale}, {"concentration0", kScale}}, "Beta"}},
      {"uniform", {{{"low", kLoc}, {"high", kLoc + 1}}, "Uniform"}},
      {"delta", {{{"param", kLoc}}, "Delta"}},
      {"truncated_normal",
       {{{"loc", kLoc}, {"scale", kScale}, {"a", kLoc - 1}, {"b", kLoc + 1}}, "TruncatedNormal"}},
  };
  for (const auto& [name, expected] : cases) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(DistributionRegistry::global().contains(name));
    DistributionPtr d = make_distribution(name, expected.first);
    EXPECT_EQ(d->name(), expected.second);
    EXPECT_NO_THROW(d->log_prob(d->sample({2})));
  }
  EXPECT_EQ(make_distribution("independent_normal", {{"loc", kLoc}, {"scale", kScale}})->event_shape(),
            std::vector<int64_t>({3}));
}

TEST(Registry, KwargsReachTheDistribution) {
  DistributionPtr d = make_distribution(
      "tanh_normal", {{"loc", kLoc}, {"scale", kScale}},
      {{"low", -2.0}, {"high", 3.0}, {"upscale", 2.0}, {"tanh_loc", true}, {"event_dims", 2}});
  TanhNormal direct(kLoc, kScale,
                    TanhNormalOptions().low(-2.0).high(3.0).upscale(2.0).tanh_loc(true).event_dims(2));
  at::Tensor x = direct.sample({4});
  EXPECT_TRUE(at::equal(d->log_prob(x), direct.log_prob(x)));
  EXPECT_TRUE(at::equal(d->deterministic_sample(), direct.deterministic_sample()));
  EXPECT_EQ(d->event_shape(), std::vector<int64_t>({2, 3}));

  // Tensor bounds may come as parameters instead.
  DistributionPtr t = make_distribution(
      "tanh_normal", {{"loc", kLoc}, {"scale", kScale}, {"low", -at::ones({3})}, {"high", at::ones({3}) * 4}});
  EXPECT_EQ(t->to_string(), "TanhNormal(loc: [2, 3], scale: [2, 3], low: [3], high: [3])");

  // truncated_normal takes scalar bounds as kwargs.
  DistributionPtr tn = make_distribution("truncated_normal", {{"loc", kLoc}, {"scale", kScale}},
                                         {{"a", -1.0}, {"b", 1.0}});
  TruncatedNormal direct_tn(kLoc, kScale, at::scalar_tensor(-1.0), at::scalar_tensor(1.0));
  EXPECT_TRUE(at::equal(tn->mean(), direct_tn.mean()));

  auto delta = make_distribution("delta", {{"param", kLoc}}, {{"atol", 0.5}, {"rtol", 0.0}});
  EXPECT_TRUE(std::isinf(delta->log_prob(kLoc + 0.4)[0].item<float>()));
  EXPECT_GT(delta->log_prob(kLoc + 0.4)[0].item<float>(), 0);

  EXPECT_THROW(make_distribution("normal", {{"loc", kLoc}, {"scale", -kScale}}, {{"validate_args", true}}),
               std::invalid_argument);
  EXPECT_NO_THROW(make_distribution("normal", {{"loc", kLoc}, {"scale", -kScale}}));
}

TEST(Registry, ErrorsNameTheDistributionAndWhatItExpects) {
  // Other tests register more names in the global registry; the built-ins are always listed.
  const std::string unknown = error_of<std::invalid_argument>([] { make_distribution("nromal", {{"loc", kLoc}}); });
  EXPECT_THAT(unknown, HasSubstr("unknown distribution 'nromal'; registered: {bernoulli, beta, "
                                 "categorical, delta, independent_normal, "));
  EXPECT_THAT(unknown, HasSubstr(" normal, one_hot_categorical, "));
  EXPECT_THAT(unknown, HasSubstr(" tanh_normal, "));
  EXPECT_THAT(unknown, HasSubstr(" truncated_normal, uniform"));
  EXPECT_EQ(error_of<std::invalid_argument>([] { make_distribution("normal", {{"loc", kLoc}}); }),
            "normal: expected parameters {loc, scale}, got {loc}");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              make_distribution("normal", {{"loc", kLoc}, {"scale", kScale}, {"shift", kLoc}});
            }),
            "normal: expected parameters {loc, scale}, got {loc, scale, shift}");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              make_distribution("categorical", {{"logits", kLoc}, {"probs", kScale}});
            }),
            "categorical: expected parameters {logits} or {probs}, got {logits, probs}");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              make_distribution("normal", {{"loc", kLoc}, {"scale", kScale}}, {{"upscale", 2.0}});
            }),
            "normal: unexpected kwarg 'upscale'; accepted kwargs: {validate_args}");
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                make_distribution("tanh_normal", {{"loc", kLoc}, {"scale", kScale}}, {{"tanh_loc", 2.5}});
              }),
              HasSubstr("tanh_normal: kwarg 'tanh_loc' must be a bool, got 2.5"));
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              make_distribution("truncated_normal", {{"loc", kLoc}, {"scale", kScale}}, {{"a", -1.0}});
            }),
            "truncated_normal: missing bound 'b': pass it as a parameter tensor or a scalar kwarg");
  EXPECT_EQ(error_of<std::invalid_argument>(
                [] { make_distribution("normal", {{"loc", kLoc}, {"scale", at::Tensor()}}); }),
            "normal: parameter 'scale' is an undefined tensor");
}

TEST(Registry, AcceptsWhatMakeChecksApartFromTheTensors) {
  const RegisteredDistribution normal = DistributionRegistry::global().find("normal");
  EXPECT_TRUE(normal.accepts({"scale", "loc"}, {}));  // a set: any order
  EXPECT_TRUE(normal.accepts({"loc", "scale"}, {{"validate_args", true}}));
  EXPECT_FALSE(normal.accepts({"loc"}, {}));
  EXPECT_FALSE(normal.accepts({"loc", "loc"}, {}));  // one name twice is not {loc, scale}
  EXPECT_FALSE(normal.accepts({"loc", "scale", "shift"}, {}));
  EXPECT_FALSE(normal.accepts({"loc", "scale"}, {{"upscale", 2.0}}));
  const RegisteredDistribution categorical = DistributionRegistry::global().find("categorical");
  EXPECT_TRUE(categorical.accepts({"probs"}, {}));
  EXPECT_FALSE(categorical.accepts({"logits", "probs"}, {}));
}

TEST(Registry, ABoundDistributionTakesTheTensorsInTheCallersOrder) {
  // Names that fit, in any order: checked once, in bind(); make() takes the tensors by position.
  const BoundDistribution normal = DistributionBuilder("normal").bind({"scale", "loc"}, {});
  const DistributionPtr made = normal.make({kScale, kLoc});
  EXPECT_TRUE(at::equal(made->mean(), kLoc));
  EXPECT_TRUE(at::equal(made->stddev(), kScale));
  // The second of two parameter sets: categorical's positions are {logits, probs}.
  const at::Tensor probs = at::tensor({0.25, 0.75});
  const DistributionPtr categorical = DistributionBuilder("categorical").bind({"probs"}, {}).make({probs});
  EXPECT_TRUE(at::allclose(categorical->log_prob(at::tensor({int64_t{1}})), at::tensor({std::log(0.75)})));
  // Optional parameters left out stay undefined for the factory: tanh_normal's bounds come from the kwargs.
  const DistributionPtr squashed =
      DistributionBuilder("tanh_normal").bind({"loc", "scale"}, {{"low", -2.0}, {"high", 2.0}}).make({kLoc, kScale});
  const DistributionPtr by_name =
      make_distribution("tanh_normal", {{"loc", kLoc}, {"scale", kScale}}, {{"low", -2.0}, {"high", 2.0}});
  EXPECT_TRUE(at::equal(squashed->deterministic_sample(), by_name->deterministic_sample()));
  EXPECT_FALSE(at::equal(squashed->deterministic_sample(),
                         make_distribution("tanh_normal", {{"loc", kLoc}, {"scale", kScale}})->deterministic_sample()));
}

TEST(Registry, AFactoryByPositionGetsTheSignaturesNamesInOrderAndUndefinedForTheOnesNotGiven) {
  const DistributionSignature signature{{{"loc", "scale"}, {"loc", "scale", "shift"}}, {}};
  EXPECT_EQ(signature.param_names(), (std::vector<std::string>{"loc", "scale", "shift"}));
  DistributionRegistry registry;
  registry.register_distribution("shifted", signature, PositionalFactory([](ParamTensors p, const DistributionKwargs&) {
                                   at::Tensor loc = p[2].defined() ? p[0] + p[2] : p[0];
                                   return std::make_shared<Normal>(loc, p[1]);
                                 }));
  const at::Tensor shift = at::full_like(kLoc, 2.0);
  // By name (the names' order does not matter) and bound by position give the same distribution.
  EXPECT_TRUE(at::equal(registry.make("shifted", {{"scale", kScale}, {"loc", kLoc}})->mean(), kLoc));
  EXPECT_TRUE(
      at::equal(registry.make("shifted", {{"shift", shift}, {"scale", kScale}, {"loc", kLoc}})->mean(), kLoc + shift));
  EXPECT_TRUE(at::equal(
      registry.find("shifted").bind({"shift", "loc", "scale"}, {}).make({shift, kLoc, kScale})->mean(), kLoc + shift));
}

TEST(Registry, ABoundDistributionWithNamesThatDoNotFitThrowsTheRegistrysErrorOnEveryCall) {
  const BoundDistribution misfit = DistributionBuilder("normal").bind({"loc"}, {});
  for (int call = 0; call < 2; ++call) {
    EXPECT_EQ(error_of<std::invalid_argument>([&] { misfit.make({kLoc}); }),
              "normal: expected parameters {loc, scale}, got {loc}");
  }
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              DistributionBuilder("normal").bind({"loc", "scale"}, {{"upscale", 2.0}}).make({kLoc, kScale});
            }),
            "normal: unexpected kwarg 'upscale'; accepted kwargs: {validate_args}");
}

TEST(Registry, ABoundFactoryGetsTheTensorsUnderTheCallersNames) {
  // A factory has no signature to check: it reads the names it was bound to.
  const BoundDistribution factory =
      DistributionBuilder([](const Params& p, const DistributionKwargs&) {
        return std::make_shared<Normal>(p.at("anything"), at::ones_like(p.at("anything")));
      }).bind({"anything"}, {});
  EXPECT_TRUE(at::equal(factory.make({kLoc})->mean(), kLoc));
  const BoundDistribution null =
      DistributionBuilder([](const Params&, const DistributionKwargs&) { return DistributionPtr(); }).bind({"loc"}, {});
  EXPECT_EQ(error_of<std::runtime_error>([&] { null.make({kLoc}); }),
            "distribution '<factory>': its factory returned null");
}

TEST(Registry, UsersRegisterTheirOwn) {
  // A registry of its own, so the test can be repeated; the global one works the same way
  // (see the header example in examples_test.cc).
  DistributionRegistry registry;
  EXPECT_FALSE(registry.contains("normal"));
  registry.register_distribution(
      "scaled_normal", {{{"loc", "scale"}}, {"factor"}}, [](const Params& p, const DistributionKwargs& k) {
        const double factor = kwarg_double(k, "factor", 1.0, "scaled_normal");
        return std::make_shared<Normal>(p.at("loc"), p.at("scale") * factor);
      });
  DistributionPtr d = registry.make("scaled_normal", {{"loc", kLoc}, {"scale", kScale}},
                                    {{"factor", 2.0}});
  EXPECT_TRUE(at::allclose(d->stddev(), kScale * 2));
  EXPECT_EQ(registry.signature("scaled_normal").params_to_string(), "{loc, scale}");
  EXPECT_EQ(registry.names(), std::vector<std::string>({"scaled_normal"}));
  EXPECT_THAT(error_of<std::invalid_argument>([&] {
                registry.register_distribution("scaled_normal", {{{"loc"}}, {}},
                                               [](const Params&, const DistributionKwargs&) { return nullptr; });
              }),
              HasSubstr("'scaled_normal' is already registered"));
  registry.replace("scaled_normal", {{{"loc"}}, {}}, [](const Params& p, const DistributionKwargs&) {
    return std::make_shared<Normal>(p.at("loc"), at::ones_like(p.at("loc")));
  });
  EXPECT_TRUE(at::equal(registry.make("scaled_normal", {{"loc", kLoc}})->stddev(),
                        at::ones_like(kLoc)));
  registry.replace("null", {{{"loc"}}, {}}, [](const Params&, const DistributionKwargs&) { return nullptr; });
  EXPECT_THROW(registry.make("null", {{"loc", kLoc}}), std::runtime_error);
  EXPECT_THAT(error_of<std::invalid_argument>([&] { registry.make("normal", {{"loc", kLoc}}); }),
              HasSubstr("unknown distribution 'normal'; registered: {null, scaled_normal}"));
}

TEST(Registry, ConcurrentRegistrationAndLookup) {
  DistributionRegistry registry;
  std::atomic<int> built{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&registry, &built, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string name = "d" + std::to_string(t) + "_" + std::to_string(i);
        registry.register_distribution(name, {{{"loc"}}, {}}, [](const Params& p, const DistributionKwargs&) {
          return std::make_shared<Normal>(p.at("loc"), at::ones_like(p.at("loc")));
        });
        if (registry.make(name, {{"loc", at::zeros({2})}})->name() == "Normal") ++built;
        registry.names();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(built.load(), 400);
  EXPECT_EQ(registry.names().size(), 400u);
}

}  // namespace
}  // namespace tdp::dist
