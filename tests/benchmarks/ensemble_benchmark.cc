// An ensemble of 10 critics (17 -> 256 -> 256 -> 1, tanh) in one tdp::nn::EnsembleModule: the
// batched path (one baddbmm per layer over stacked weights) against the loop path (the copies'
// parameters swapped into one template, one call each) and against a hand-written loop over 10
// separate Mlp modules with the same weights. c10::InferenceMode, one intra-op thread.
//
//   ./bazelw run -c opt //tests/benchmarks:ensemble_benchmark
//
// The ratios batched / loop per batch size set EnsembleModuleOptions::batched_max_elements, the
// size above which kAuto takes the loop.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <vector>

#include "sdk/nn/ensemble_module.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/tensordict/tensordict.h"

namespace {

using tdp::TensorDict;
using tdp::nn::EnsembleModule;
using tdp::nn::EnsembleModuleOptions;
using tdp::nn::EnsemblePath;

constexpr int64_t kCopies = 10;

tdp::nn::TensorDictModule critic() {
  return tdp::nn::TensorDictModule(tdp::nn::Mlp(tdp::nn::MlpOptions(17, {256, 256}, 1).activation("tanh")),
                                   tdp::nn::TensorDictModuleOptions({"observation"}, {"value"}));
}

TensorDict observations(int64_t batch) {
  return TensorDict({{"observation", at::randn({batch, 17}, at::detail::createCPUGenerator(1))}}, {batch});
}

void run_ensemble(benchmark::State& state, EnsemblePath path) {
  c10::InferenceMode inference;
  EnsembleModule ensemble(critic(), EnsembleModuleOptions(kCopies).path(path));
  const TensorDict td = observations(state.range(0));
  TensorDict out;
  for (auto _ : state) {
    out = ensemble->forward(td);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void Ensemble_Batched(benchmark::State& state) { run_ensemble(state, EnsemblePath::kBatched); }
void Ensemble_Loop(benchmark::State& state) { run_ensemble(state, EnsemblePath::kLoop); }

// Ten separate critics, called one after the other, their values stacked.
void Ensemble_HandLoop(benchmark::State& state) {
  c10::InferenceMode inference;
  std::vector<tdp::nn::Mlp> critics;
  for (int64_t i = 0; i < kCopies; ++i) critics.emplace_back(tdp::nn::MlpOptions(17, {256, 256}, 1).activation("tanh"));
  const at::Tensor x = observations(state.range(0)).get("observation");
  std::vector<at::Tensor> values(kCopies);
  at::Tensor out;
  for (auto _ : state) {
    for (int64_t i = 0; i < kCopies; ++i) values[i] = critics[i]->forward(x);
    out = at::stack(values);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(Ensemble_Batched)->Arg(1)->Arg(32)->Arg(256)->Arg(1024);
BENCHMARK(Ensemble_Loop)->Arg(1)->Arg(32)->Arg(256)->Arg(1024);
BENCHMARK(Ensemble_HandLoop)->Arg(1)->Arg(32)->Arg(256)->Arg(1024);

}  // namespace
