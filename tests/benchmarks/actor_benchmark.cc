// The cost of acting through tdp::actor::Actor (a spec loaded from policies/) over the same
// computation written by hand in LibTorch with the same weights.
//
//   OPENBLAS_NUM_THREADS=1 ./bazelw run -c opt //tests/benchmarks:actor_benchmark
//
// Two policies, RANDOM interaction, one intra-op thread, c10::InferenceMode on both sides:
// - CartPole (policies/cartpole_categorical.pbtxt): observation [B, 4] -> MLP(64, 64, tanh) ->
//   logits [B, 2] -> Categorical: a multinomial draw and the normalized logit it picked.
// - Pendulum (policies/pendulum_tanh_gaussian.pbtxt): observation [B, 3] -> MLP(64, 64, tanh) ->
//   (loc, biased-softplus scale) -> TanhNormal on [-2, 2]: a Normal draw squashed by a clamped
//   tanh, and its log-prob recomputed from the action (atanh, Normal log-density, tanh Jacobian)
//   as TorchRL does.
// The *_Hand loops take their weights from the loaded actor's parameters and call the ATen ops
// the SDK's modules call, keeping their outputs alive as a TensorDict does. Before timing, one
// call on each side from identically seeded generators must give the same action and log-prob,
// so both really compute the same thing. Latency at batch 1; throughput (items/s = env steps
// per second) at batch 256 and 4096.
//
// Both sides keep their last outputs alive until the next call, as a simulator keeps the
// last action. benchmark_main.cc tunes glibc's malloc for the whole process (both sides);
// TDP_DEFAULT_MALLOC=1 shows the default, where batch-4096 rows measure the heap being trimmed
// and regrown between calls rather than compute.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/tensordict.h"
#include "tests/benchmarks/hand_policies.h"

namespace {

using tdp::benchmarks::CartPoleHand;
using tdp::benchmarks::HandOutput;
using tdp::benchmarks::linear_layers;
using tdp::benchmarks::PendulumHand;

using tdp::TensorDict;
using tdp::nn::InteractionType;

constexpr uint64_t kSeed = 0;

std::unique_ptr<tdp::actor::Actor> load(const std::string& spec) {
  // The LibTorch path, as before the fused plan existed (fused_benchmark.cc times that one), so
  // these rows stay comparable with earlier runs and with the Python peer.
  auto actor = tdp::actor::Actor::load(
      spec, tdp::actor::ActorOptions().seed(kSeed).backend(tdp::actor::Backend::kLibTorch));
  if (!actor.ok()) return nullptr;
  return std::move(*actor);
}

template <typename Hand>
void run_hand(benchmark::State& state, const std::string& spec, int64_t obs_dim) {
  c10::InferenceMode inference;
  auto actor = load(spec);
  if (!actor) return state.SkipWithError(("cannot load " + spec + " (run from the repository root)").c_str());
  Hand hand{linear_layers(*actor)};
  const int64_t batch = state.range(0);
  at::Generator data_gen = at::detail::createCPUGenerator(123);
  const at::Tensor obs = at::randn({batch, obs_dim}, data_gen);

  // Same seed, same computation: the actor and the hand loop agree before anything is timed.
  at::Generator check_gen = at::detail::createCPUGenerator(kSeed);
  const HandOutput expected = hand(obs, check_gen);
  TensorDict td({batch});
  td.set("observation", obs);
  const TensorDict got = actor->act(td, InteractionType::kRandom, at::detail::createCPUGenerator(kSeed));
  if (!got.get("action").allclose(expected.action, 1e-5, 1e-5) ||
      !got.get("action_log_prob").allclose(expected.log_prob, 1e-4, 1e-4)) {
    return state.SkipWithError("the hand-written loop does not compute what the actor computes");
  }

  at::Generator gen = at::detail::createCPUGenerator(kSeed);
  HandOutput out;
  for (auto _ : state) {
    out = hand(obs, gen);
    benchmark::DoNotOptimize(out.log_prob);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void run_actor(benchmark::State& state, const std::string& spec, int64_t obs_dim) {
  auto actor = load(spec);
  if (!actor) return state.SkipWithError(("cannot load " + spec + " (run from the repository root)").c_str());
  const int64_t batch = state.range(0);
  at::Generator data_gen = at::detail::createCPUGenerator(123);
  TensorDict td({batch});
  td.set("observation", at::randn({batch, obs_dim}, data_gen));
  TensorDict action;  // kept until the next call, as a simulator keeps its last action
  for (auto _ : state) {
    action = actor->act(td, InteractionType::kRandom);
    benchmark::DoNotOptimize(action);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

constexpr char kCartPole[] = "policies/cartpole_categorical.pbtxt";
constexpr char kPendulum[] = "policies/pendulum_tanh_gaussian.pbtxt";

void CartPole_Hand(benchmark::State& state) { run_hand<CartPoleHand>(state, kCartPole, 4); }
void CartPole_Actor(benchmark::State& state) { run_actor(state, kCartPole, 4); }
void Pendulum_Hand(benchmark::State& state) { run_hand<PendulumHand>(state, kPendulum, 3); }
void Pendulum_Actor(benchmark::State& state) { run_actor(state, kPendulum, 3); }

BENCHMARK(CartPole_Hand)->Arg(1)->Arg(256)->Arg(4096);
BENCHMARK(CartPole_Actor)->Arg(1)->Arg(256)->Arg(4096);
BENCHMARK(Pendulum_Hand)->Arg(1)->Arg(256)->Arg(4096);
BENCHMARK(Pendulum_Actor)->Arg(1)->Arg(256)->Arg(4096);

}  // namespace
