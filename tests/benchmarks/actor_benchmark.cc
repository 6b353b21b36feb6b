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

namespace {

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

// The actor's Linear layers in order, as (weight, bias): the MLP is the only module with
// parameters in both specs, and parameters() lists layers in registration order.
std::vector<std::pair<at::Tensor, at::Tensor>> linear_layers(const tdp::actor::Actor& actor) {
  std::vector<at::Tensor> params = actor.module()->parameters();
  std::vector<std::pair<at::Tensor, at::Tensor>> layers;
  for (size_t i = 0; i + 1 < params.size(); i += 2) layers.emplace_back(params[i].detach(), params[i + 1].detach());
  return layers;
}

at::Tensor mlp(const std::vector<std::pair<at::Tensor, at::Tensor>>& layers, const at::Tensor& input) {
  at::Tensor x = input;
  for (size_t i = 0; i < layers.size(); ++i) {
    x = at::linear(x, layers[i].first, layers[i].second);
    if (i + 1 < layers.size()) x = x.tanh();
  }
  return x;
}

struct HandOutput {
  at::Tensor action, log_prob;
};

// Categorical: normalize the logits, draw with multinomial, gather the log-prob.
struct CartPoleHand {
  std::vector<std::pair<at::Tensor, at::Tensor>> layers;
  at::Tensor logits, normalized, probs;  // kept alive, as TensorDict entries are
  HandOutput operator()(const at::Tensor& obs, at::Generator& gen) {
    logits = mlp(layers, obs);
    normalized = logits - logits.logsumexp(-1, /*keepdim=*/true);
    probs = normalized.softmax(-1);
    at::Tensor action = at::multinomial(probs, 1, /*replacement=*/true, gen).t().reshape({obs.size(0)});
    return {action, normalized.gather(-1, action.unsqueeze(-1)).squeeze(-1)};
  }
};

// TanhNormal on [-2, 2] with NormalParamExtractor("biased_softplus_1.0", scale_lb 1e-4).
struct PendulumHand {
  std::vector<std::pair<at::Tensor, at::Tensor>> layers;
  const double shift = std::log(std::max(std::expm1(1.0 - 0.01), 1e-6));
  const double lim = 1.0 - 1e-6;  // float32's resolution, as TorchRL's safe tanh
  const double log_sqrt_2pi = std::log(std::sqrt(2 * M_PI));
  at::Tensor params, loc, scale;
  HandOutput operator()(const at::Tensor& obs, at::Generator& gen) {
    params = mlp(layers, obs);
    auto halves = params.chunk(2, -1);
    loc = halves[0];
    scale = at::softplus(halves[1].add(shift)).add(0.01).clamp_min(1e-4);
    at::Tensor x = at::normal(loc, scale, gen);
    at::Tensor action = x.tanh().clamp(-lim, lim).mul(2.0);
    // log-prob of the action, from the action (TorchRL's TanhNormal.log_prob).
    at::Tensor pre = action.div(2.0).clamp(-lim, lim).atanh();
    at::Tensor base = -((pre - loc).pow(2)) / (2 * scale.pow(2)) - scale.log() - log_sqrt_2pi;
    at::Tensor jacobian = 2. * (std::log(2.) - pre - at::softplus(-2. * pre)) + std::log(2.0);
    return {action, (base - jacobian).sum(-1)};
  }
};

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
