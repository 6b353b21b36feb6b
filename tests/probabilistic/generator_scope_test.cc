// GeneratorGuard: modules without a generator of their own draw from the thread's scoped
// generator, so two threads sharing a module get their own reproducible streams.
#include "sdk/probabilistic/generator_scope.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <thread>

#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"

namespace tdp::nn {
namespace {

TensorDict normal_params() {
  return TensorDict({{"loc", at::zeros({4, 3})}, {"scale", at::ones({4, 3})}}, {4});
}

ProbabilisticTensorDictModule random_normal(std::optional<uint64_t> own_seed = std::nullopt) {
  ProbabilisticTensorDictModuleOptions options({"loc", "scale"}, {"action"});
  options.distribution("normal").default_interaction_type(InteractionType::kRandom);
  if (own_seed) options.seed(*own_seed);
  return ProbabilisticTensorDictModule(options);
}

at::Tensor draw(ProbabilisticTensorDictModule& module, uint64_t seed) {
  GeneratorGuard scope(at::detail::createCPUGenerator(seed));
  return module->forward(normal_params()).get("action");
}

TEST(GeneratorScope, ScopedGeneratorMakesDrawsReproducible) {
  auto module = random_normal();
  EXPECT_FALSE(scoped_generator().has_value());
  at::Tensor a = draw(module, 3);
  at::Tensor b = draw(module, 3);
  at::Tensor c = draw(module, 4);
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.equal(c));
  EXPECT_FALSE(scoped_generator().has_value());
}

TEST(GeneratorScope, ModuleOwnGeneratorWins) {
  auto seeded = random_normal(/*own_seed=*/11);
  auto reference = random_normal(/*own_seed=*/11);
  at::Tensor expected = reference->forward(normal_params()).get("action");
  EXPECT_TRUE(draw(seeded, 99).equal(expected));
}

TEST(GeneratorScope, ThreadsSharingAModuleKeepTheirOwnStreams) {
  auto module = random_normal();
  const at::Tensor expected = draw(module, 5);
  std::vector<at::Tensor> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int repeat = 0; repeat < 20; ++repeat) results[i] = draw(module, 5);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const at::Tensor& result : results) EXPECT_TRUE(result.equal(expected));
}

}  // namespace
}  // namespace tdp::nn
