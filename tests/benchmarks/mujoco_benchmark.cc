// Environment steps per second of the C++ MuJoCo tasks, alone and with a policy in the loop
// (the PPO sample's actor, samples/agents/mujoco/*_ppo.pbtxt, on the fused CPU plan, drawing
// actions), and through the Collector that tdpolicy.Collector runs (whole batches of 2048 frames
// in TorchRL's layout): items_per_second is environment steps per second (N per step). Arguments: N and the
// threads of LibTorch's intra-op pool, on which the tasks step their N copies (1, and 2: this
// machine's cores).
//   ./bazelw run -c opt //tests/benchmarks:mujoco_benchmark
// mujoco_throughput.py runs it beside Gymnasium's Python tasks and a TorchRL actor.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "samples/envs/mujoco_tasks.h"
#include "sdk/actor/actor.h"
#include "tests/benchmarks/collector_loop.h"

namespace tdp::env {
namespace {

constexpr int kActionPool = 64;
constexpr char kHalfCheetahSpec[] = "samples/agents/mujoco/halfcheetah_ppo.pbtxt";
constexpr char kHopperSpec[] = "samples/agents/mujoco/hopper_ppo.pbtxt";
constexpr char kAntSpec[] = "samples/agents/mujoco/ant_ppo.pbtxt";

template <typename Task>
void BM_EnvOnly(benchmark::State& state) {
  at::set_num_threads(state.range(1));
  Task env(EnvOptions(state.range(0)));
  env.reset(0);
  at::Generator gen = at::detail::createCPUGenerator(0);
  std::vector<TensorDict> pool;
  for (int i = 0; i < kActionPool; ++i) {
    TensorDict td({env.num_envs()});
    td.set("action", at::empty({env.num_envs(), env.nu()}, at::kFloat).uniform_(-1.0, 1.0, gen));
    pool.push_back(td);
  }
  int64_t i = 0;
  for (auto _ : state) {
    TensorDict out = env.step(pool[i++ % kActionPool]);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

template <typename Task, const char* spec>
void BM_WithPolicy(benchmark::State& state) {
  at::set_num_threads(state.range(1));
  Task env(EnvOptions(state.range(0)));
  auto actor = actor::Actor::load(spec, actor::ActorOptions().seed(0).interaction_type(nn::InteractionType::kRandom));
  if (!actor.ok()) {
    state.SkipWithError(std::string(actor.status().message()).c_str());
    return;
  }
  at::Tensor observation = env.reset(0).get("observation");
  for (auto _ : state) {
    TensorDict step = (*actor)->act(TensorDict({{"observation", observation}}, {env.num_envs()}));
    // The env takes actions within its bounds, as the PPO sample's clip gives them.
    step.set("action", step.get("action").clamp(-1.0, 1.0));
    observation = env.step(step).get("observation");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  const absl::Status fused = (*actor)->describe().fused_status;
  state.SetLabel(fused.ok() ? "fused" : "libtorch: " + std::string(fused.message()));
}

template <typename Task, const char* spec>
void BM_Collector(benchmark::State& state) {
  at::set_num_threads(state.range(1));
  collect_batches(state, std::make_shared<Task>(EnvOptions(state.range(0))), spec);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2}) {
    for (int64_t n : {1, 16, 64}) b->Args({n, threads});
  }
  b->ArgNames({"envs", "threads"})->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_EnvOnly, HalfCheetah)->Apply(Sizes);
BENCHMARK_TEMPLATE(BM_EnvOnly, Hopper)->Apply(Sizes);
BENCHMARK_TEMPLATE(BM_EnvOnly, Ant)->Apply(Sizes);
BENCHMARK_TEMPLATE2(BM_WithPolicy, HalfCheetah, kHalfCheetahSpec)->Apply(Sizes);
BENCHMARK_TEMPLATE2(BM_WithPolicy, Hopper, kHopperSpec)->Apply(Sizes);
BENCHMARK_TEMPLATE2(BM_WithPolicy, Ant, kAntSpec)->Apply(Sizes);
BENCHMARK_TEMPLATE2(BM_Collector, HalfCheetah, kHalfCheetahSpec)->Apply(Sizes);

}  // namespace
}  // namespace tdp::env
