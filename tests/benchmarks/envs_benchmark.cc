// Environment steps per second of the batched simulators, one thread:
//   ./bazelw run -c opt //tests/benchmarks:envs_benchmark
// items_per_second is environment steps per second (N per step() call). Actions are random,
// drawn beforehand, so episodes end and auto-reset at their natural rate. BM_Collector: CartPole
// with policies/cartpole_categorical.pbtxt through the Collector that tdpolicy.Collector runs
// (batches of 2048 frames in TorchRL's layout), frames per second.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "samples/envs/cartpole.h"
#include "samples/envs/goal.h"
#include "samples/envs/pendulum.h"
#include "tests/benchmarks/collector_loop.h"

namespace tdp::env {
namespace {

constexpr int kActionPool = 64;

std::vector<TensorDict> action_pool(const BatchedEnv& env) {
  at::Generator gen = at::detail::createCPUGenerator(0);
  const int64_t n = env.num_envs();
  std::vector<TensorDict> pool;
  for (int i = 0; i < kActionPool; ++i) {
    TensorDict td({n});
    for (const EntrySpec& spec : env.action_spec()) {
      std::vector<int64_t> shape{n};
      shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
      if (spec.is_discrete()) {
        td.set(spec.key, at::randint(spec.num_categories, shape, gen, at::kLong));
      } else {
        td.set(spec.key, at::empty(shape, at::kFloat).uniform_(spec.low[0], spec.high[0], gen));
      }
    }
    pool.push_back(td);
  }
  return pool;
}

template <typename Env>
void BM_Step(benchmark::State& state) {
  Env env(EnvOptions(state.range(0)));
  env.reset(0);
  const std::vector<TensorDict> pool = action_pool(env);
  int64_t i = 0;
  for (auto _ : state) {
    TensorDict out = env.step(pool[i++ % kActionPool]);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_Collector(benchmark::State& state) {
  collect_batches(state, std::make_shared<CartPole>(EnvOptions(state.range(0))), "policies/cartpole_categorical.pbtxt");
}

BENCHMARK_TEMPLATE(BM_Step, CartPole)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK_TEMPLATE(BM_Step, Pendulum)->Arg(1)->Arg(1024);
BENCHMARK_TEMPLATE(BM_Step, Goal)->Arg(1)->Arg(1024);
BENCHMARK(BM_Collector)->Arg(1)->Arg(8)->Arg(64);

}  // namespace
}  // namespace tdp::env
