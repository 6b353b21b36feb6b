// The cost of tdp::nn's module hops over calling the same LibTorch modules by hand.
//
//   ./bazelw run -c opt //tests/benchmarks:nn_benchmark
//
// Pairs of benchmarks run the same work: *_Hand calls the LibTorch modules on tensors;
// *_TensorDict runs them through TensorDictModule / TensorDictSequential on a TensorDict.
// The difference, divided by the number of modules, is the SDK overhead per module hop.
// Noop_* wrap a function that returns its input, so they measure the overhead alone.
// Linear_HandKeepOutput keeps each output alive until the next call, as a TensorDict does.
// One intra-op thread, no autograd (inference), batch sizes 1 and 1024.
#include <benchmark/benchmark.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"

namespace {

using tdp::TensorDict;
using tdp::nn::TensorDictModule;
using tdp::nn::TensorDictModuleOptions;
using tdp::nn::TensorDictSequential;

constexpr int64_t kObs = 17;
constexpr int64_t kHidden = 64;
constexpr int64_t kAction = 6;

TensorDict observation(int64_t batch) {
  return TensorDict({{"observation", torch::randn({batch, kObs})}}, {batch});
}

void Noop_Hand(benchmark::State& state) {
  at::Tensor x = torch::randn({state.range(0), kObs});
  auto fn = [](const at::Tensor& t) { return t; };
  for (auto _ : state) benchmark::DoNotOptimize(fn(x));
}

void Noop_TensorDict(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  TensorDictModule module([](const at::Tensor& t) { return t; },
                          TensorDictModuleOptions({"observation"}, {"copy"}));
  TensorDict td = observation(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(module(td));
}

void Linear_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::nn::Linear linear(kObs, kAction);
  at::Tensor x = torch::randn({state.range(0), kObs});
  for (auto _ : state) benchmark::DoNotOptimize(linear(x));
}

// Like Linear_Hand, but the previous output stays alive until the new one replaces it, as an
// entry of a TensorDict does: separates allocation effects from the SDK's bookkeeping.
void Linear_HandKeepOutput(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::nn::Linear linear(kObs, kAction);
  at::Tensor x = torch::randn({state.range(0), kObs});
  at::Tensor kept;
  for (auto _ : state) {
    kept = linear(x);
    benchmark::DoNotOptimize(kept);
  }
}

void Linear_TensorDict(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  TensorDictModule module(torch::nn::Linear(kObs, kAction),
                          TensorDictModuleOptions({"observation"}, {"action"}));
  TensorDict td = observation(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(module(td));
}

void Mlp3_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::nn::Linear l1(kObs, kHidden), l2(kHidden, kHidden), l3(kHidden, kAction);
  at::Tensor x = torch::randn({state.range(0), kObs});
  for (auto _ : state) benchmark::DoNotOptimize(l3(l2(l1(x))));
}

void Mlp3_TensorDict(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  TensorDictSequential policy(
      {TensorDictModule(torch::nn::Linear(kObs, kHidden), TensorDictModuleOptions({"observation"}, {"h1"})),
       TensorDictModule(torch::nn::Linear(kHidden, kHidden), TensorDictModuleOptions({"h1"}, {"h2"})),
       TensorDictModule(torch::nn::Linear(kHidden, kAction), TensorDictModuleOptions({"h2"}, {"action"}))});
  TensorDict td = observation(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(policy(td));
}

void Noop3_TensorDict(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto same = [](const at::Tensor& t) { return t; };
  TensorDictSequential seq({TensorDictModule(same, TensorDictModuleOptions({"observation"}, {"h1"})),
                            TensorDictModule(same, TensorDictModuleOptions({"h1"}, {"h2"})),
                            TensorDictModule(same, TensorDictModuleOptions({"h2"}, {"action"}))});
  TensorDict td = observation(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(seq(td));
}

BENCHMARK(Noop_Hand)->Arg(1)->Arg(1024);
BENCHMARK(Noop_TensorDict)->Arg(1)->Arg(1024);
BENCHMARK(Noop3_TensorDict)->Arg(1)->Arg(1024);
BENCHMARK(Linear_Hand)->Arg(1)->Arg(1024);
BENCHMARK(Linear_HandKeepOutput)->Arg(1)->Arg(1024);
BENCHMARK(Linear_TensorDict)->Arg(1)->Arg(1024);
BENCHMARK(Mlp3_Hand)->Arg(1)->Arg(1024);
BENCHMARK(Mlp3_TensorDict)->Arg(1)->Arg(1024);

}  // namespace
