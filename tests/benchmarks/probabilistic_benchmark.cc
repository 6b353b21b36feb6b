// The cost of a Gaussian actor built from tdp::nn's probabilistic modules over the same
// computation written by hand in LibTorch.
//
//   OPENBLAS_NUM_THREADS=1 ./bazelw run -c opt //tests/benchmarks:probabilistic_benchmark
//
// The actor: observation [B, 17] -> Linear 64 -> tanh -> Linear 64 -> tanh -> Linear 12 ->
// NormalParamExtractor (loc, scale: [B, 6]) -> Normal, RANDOM, with the log-prob. GaussianActor_Sdk
// runs it as a ProbabilisticTensorDictSequential on a TensorDict; GaussianActor_Hand calls the
// same MLP, mapping and sampling ops on tensors, keeping its outputs alive as the TensorDict
// does; GaussianActor_HandTensorDict is that loop reading and writing the same TensorDict entries,
// and GaussianActor_HandTensorDictNormal also builds a dist::Normal object per step and draws and
// scores through it: the floor for any call that returns a TensorDict and builds a distribution.
// All draw from a seeded generator of their own. One intra-op thread, no autograd
// (a rollout), batch 1, 64 and 1024.
#include <ATen/CPUGeneratorImpl.h>
#include <benchmark/benchmark.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include "sdk/distributions/normal.h"
#include "sdk/nn/mappings.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/probabilistic/probabilistic_sequential.h"
#include "tests/benchmarks/hand_normal.h"

namespace {

using tdp::TensorDict;
using namespace tdp::nn;  // NOLINT: benchmark brevity

constexpr int64_t kObs = 17;
constexpr int64_t kHidden = 64;
constexpr int64_t kAction = 6;

torch::nn::Sequential make_mlp() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(kObs, kHidden), torch::nn::Tanh(),
                               torch::nn::Linear(kHidden, kHidden), torch::nn::Tanh(),
                               torch::nn::Linear(kHidden, 2 * kAction));
}

// What the hand-written actors hold besides their outputs: the network, the scale mapping and a
// seeded generator of their own.
struct HandGaussianParts {
  torch::nn::Sequential mlp = make_mlp();
  Mapping scale_mapping = mappings("biased_softplus_1.0");
  at::Generator gen = at::detail::createCPUGenerator(0);
};

// The actor written by hand. One step is one out-of-line call, as the SDK's is one call of the
// sequence, so that a profiler (callgrind) can count both sides per call.
class HandGaussianActor {
 public:
  [[gnu::noinline]] const at::Tensor& act(const at::Tensor& obs) {
    param_ = parts_.mlp->forward(obs);
    auto halves = param_.chunk(2, -1);
    loc_ = halves[0];
    scale_ = parts_.scale_mapping(halves[1]).clamp_min(1e-4);
    at::Tensor eps = at::empty(loc_.sizes(), loc_.options()).normal_(0, 1, parts_.gen);
    action_ = loc_ + eps * scale_;
    log_prob_ = tdp::benchmarks::normal_log_density(action_, loc_, scale_);
    return log_prob_;
  }

 private:
  HandGaussianParts parts_;
  at::Tensor param_, loc_, scale_, action_, log_prob_;  // kept alive, as TensorDict entries are
};

void GaussianActor_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  HandGaussianActor actor;
  at::Tensor obs = torch::randn({state.range(0), kObs});
  for (auto _ : state) benchmark::DoNotOptimize(actor.act(obs));
}

// The hand loop again, reading and writing the TensorDict entries the SDK's call reads and writes
// (keys built once, as a module holds them): what the container alone costs, the floor for any
// call that returns a TensorDict. With kThroughNormal it draws and scores through a dist::Normal
// built per step, as the SDK's probabilistic module does: the container and the distribution
// object together.
template <bool kThroughNormal>
class HandTensorDictGaussianActor {
 public:
  [[gnu::noinline]] const TensorDict& act(TensorDict& td) {
    td.set(param_key_, parts_.mlp->forward(td.get(observation_key_)));
    auto halves = td.get(param_key_).chunk(2, -1);
    td.set(loc_key_, halves[0]);
    td.set(scale_key_, parts_.scale_mapping(halves[1]).clamp_min(1e-4));
    if constexpr (kThroughNormal) {
      auto normal = std::make_shared<const tdp::dist::Normal>(td.get(loc_key_), td.get(scale_key_));
      at::Tensor action = normal->rsample({}, parts_.gen);
      td.set(action_key_, action);
      td.set(log_prob_key_, normal->log_prob(action));
    } else {
      const at::Tensor loc = td.get(loc_key_);
      const at::Tensor scale = td.get(scale_key_);
      at::Tensor eps = at::empty(loc.sizes(), loc.options()).normal_(0, 1, parts_.gen);
      at::Tensor action = loc + eps * scale;
      td.set(action_key_, action);
      td.set(log_prob_key_, tdp::benchmarks::normal_log_density(action, loc, scale));
    }
    return td;
  }

 private:
  HandGaussianParts parts_;
  const tdp::NestedKey observation_key_{"observation"}, param_key_{"param"}, loc_key_{"loc"}, scale_key_{"scale"},
      action_key_{"action"}, log_prob_key_{"sample_log_prob"};
};

template <bool kThroughNormal>
void run_hand_tensordict(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  HandTensorDictGaussianActor<kThroughNormal> actor;
  TensorDict td({{"observation", torch::randn({state.range(0), kObs})}}, {state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(actor.act(td));
}

void GaussianActor_HandTensorDict(benchmark::State& state) { run_hand_tensordict<false>(state); }
void GaussianActor_HandTensorDictNormal(benchmark::State& state) { run_hand_tensordict<true>(state); }

void GaussianActor_Sdk(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  ProbabilisticTensorDictSequential actor(
      {TensorDictModule(make_mlp(), TensorDictModuleOptions({"observation"}, {"param"})),
       TensorDictModule(NormalParamExtractor(), TensorDictModuleOptions({"param"}, {"loc", "scale"})),
       ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
                                         .distribution("normal")
                                         .default_interaction_type(InteractionType::kRandom)
                                         .return_log_prob(true)
                                         .seed(0))});
  TensorDict td({{"observation", torch::randn({state.range(0), kObs})}}, {state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(actor(td));
}

// The probabilistic module alone (loc and scale given): its own overhead over the sampling ops.
void NormalSample_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(0);
  at::Tensor loc = torch::randn({state.range(0), kAction});
  at::Tensor scale = torch::rand({state.range(0), kAction}) + 0.1;
  at::Tensor action, log_prob;
  for (auto _ : state) {
    at::Tensor eps = at::empty(loc.sizes(), loc.options()).normal_(0, 1, gen);
    action = loc + eps * scale;
    log_prob = tdp::benchmarks::normal_log_density(action, loc, scale);
    benchmark::DoNotOptimize(log_prob);
  }
}

void NormalSample_Sdk(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  ProbabilisticTensorDictModule module(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
                                           .distribution("normal")
                                           .default_interaction_type(InteractionType::kRandom)
                                           .return_log_prob(true)
                                           .seed(0));
  TensorDict td({{"loc", torch::randn({state.range(0), kAction})},
                 {"scale", torch::rand({state.range(0), kAction}) + 0.1}},
                {state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(module(td));
}

void NormalGetDist_Sdk(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  ProbabilisticTensorDictModule module(
      ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"}).distribution("normal"));
  TensorDict td({{"loc", torch::randn({state.range(0), kAction})},
                 {"scale", torch::rand({state.range(0), kAction}) + 0.1}},
                {state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(module->get_dist(td));
}

BENCHMARK(NormalSample_Hand)->Arg(1);
BENCHMARK(NormalSample_Sdk)->Arg(1);
BENCHMARK(NormalGetDist_Sdk)->Arg(1);
BENCHMARK(GaussianActor_Hand)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(GaussianActor_HandTensorDict)->Arg(1);
BENCHMARK(GaussianActor_HandTensorDictNormal)->Arg(1);
BENCHMARK(GaussianActor_Sdk)->Arg(1)->Arg(64)->Arg(1024);

}  // namespace
