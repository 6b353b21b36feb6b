// Actor::act on a GPU, eager against CUDA-graph replay, on the CartPole and Pendulum policies at
// batch 1, 64, 1024 and 4096 (one graph bucket each), RANDOM interaction. Each timed call is act()
// plus a copy of the action to the host, which is what a simulator needs before it steps (and
// waits for the eager kernels as the graph call waits for its replay). Prints a Markdown table of
// medians, eager/graph ratios, actions per second at 4096 and the time to capture all buckets at
// load; then an ensemble of 10 critics, batched against looped (issue 15). Built with
// --config=cuda; run by tests/gpu/gpu_check.sh on the GPU machine:
//
//   ./bazelw build -c opt --config=cuda //tests/benchmarks:cuda_graph_benchmark
//   bazel-bin/tests/benchmarks/cuda_graph_benchmark [policies folder]   # default: ./policies
//
// Without a visible GPU it says so and exits 0 (1 under TDP_REQUIRE_GPU): there is nothing to measure.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/nn/ensemble_module.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/tensordict/tensordict.h"
#include "tdpolicy/spec.pb.h"

namespace {

using tdp::TensorDict;
using tdp::actor::Actor;
using tdp::actor::ActorOptions;
using tdp::actor::CudaGraphOptions;
using Clock = std::chrono::steady_clock;

const std::vector<int64_t> kBatches = {1, 64, 1024, 4096};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::unique_ptr<Actor> load(const std::string& spec, const ActorOptions& options, double* load_seconds) {
  const Clock::time_point start = Clock::now();
  auto actor = Actor::load(spec, options);
  if (!actor.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.c_str(), std::string(actor.status().message()).c_str());
    std::exit(1);
  }
  if (load_seconds != nullptr) *load_seconds = seconds_since(start);
  return std::move(*actor);
}

// Median microseconds of act() + the action on the host, after warming up.
double median_us(Actor& actor, const TensorDict& observation, int calls) {
  for (int i = 0; i < 20; ++i) actor.act(observation).get("action").cpu();
  std::vector<double> times;
  times.reserve(calls);
  for (int i = 0; i < calls; ++i) {
    const Clock::time_point start = Clock::now();
    at::Tensor action = actor.act(observation).get("action").cpu();
    times.push_back(seconds_since(start) * 1e6);
  }
  std::nth_element(times.begin(), times.begin() + calls / 2, times.end());
  return times[calls / 2];
}

// Issue 15's GPU figure: an ensemble of 10 critics (17 -> 256 -> 256 -> 1) on the GPU, the batched
// path (one baddbmm per layer for all copies) against the loop path, eager, under InferenceMode,
// each call until its values are on the host.
void print_ensemble_rows(const c10::Device& cuda) {
  c10::InferenceMode inference;
  auto critic = [] {
    return tdp::nn::TensorDictModule(tdp::nn::Mlp(tdp::nn::MlpOptions(17, {256, 256}, 1).activation("tanh")),
                                     tdp::nn::TensorDictModuleOptions({"observation"}, {"value"}));
  };
  tdp::nn::EnsembleModule batched(critic(), tdp::nn::EnsembleModuleOptions(10).path(tdp::nn::EnsemblePath::kBatched));
  tdp::nn::EnsembleModule looped(critic(), tdp::nn::EnsembleModuleOptions(10).path(tdp::nn::EnsemblePath::kLoop));
  batched->to(cuda);
  looped->to(cuda);
  std::printf("\n| ensemble of 10 critics on %s | batch | batched (us) | loop (us) | loop / batched |\n",
              cuda.str().c_str());
  std::printf("| --- | --- | --- | --- | --- |\n");
  for (int64_t batch : {1, 32, 256, 4096}) {
    TensorDict td({batch});
    td.set("observation", at::randn({batch, 17}, at::TensorOptions().device(cuda)));
    auto time = [&](tdp::nn::EnsembleModule& ensemble) {
      for (int i = 0; i < 20; ++i) ensemble->forward(td).get("value").cpu();
      std::vector<double> times;
      for (int i = 0; i < 300; ++i) {
        const Clock::time_point start = Clock::now();
        at::Tensor values = ensemble->forward(td).get("value").cpu();
        times.push_back(seconds_since(start) * 1e6);
      }
      std::nth_element(times.begin(), times.begin() + 150, times.end());
      return times[150];
    };
    const double batched_us = time(batched);
    const double looped_us = time(looped);
    std::printf("| | %lld | %.1f | %.1f | %.2fx |\n", static_cast<long long>(batch), batched_us, looped_us,
                looped_us / batched_us);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!torch::cuda::is_available()) {
    std::printf(
        "cuda_graph_benchmark: no CUDA GPU is visible (or the binary "
        "was built without --config=cuda); "
        "nothing measured\n");
    // On the GPU machine (tests/gpu/gpu_check.sh) that is a broken setup, not a result.
    return std::getenv("TDP_REQUIRE_GPU") != nullptr ? 1 : 0;
  }
  const std::string folder = argc > 1 ? argv[1] : "policies";
  const c10::Device cuda("cuda:0");
  std::printf(
      "| policy | batch | eager act (us) | graph replay (us) | eager / "
      "graph |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  std::vector<std::string> notes;
  for (const char* name : {"cartpole_categorical", "pendulum_tanh_gaussian"}) {
    const std::string spec = folder + "/" + name + ".pbtxt";
    double eager_load = 0, graph_load = 0;
    auto eager = load(spec, ActorOptions().device(cuda).seed(0), &eager_load);
    auto graph = load(spec, ActorOptions().device(cuda).seed(0).cuda_graph(CudaGraphOptions().batch_buckets(kBatches)),
                      &graph_load);
    const int64_t width = eager->spec().inputs(0).shape(0);
    double graph_4096_us = 0;
    for (int64_t batch : kBatches) {
      TensorDict observation({batch});
      observation.set(eager->spec().inputs(0).key(), at::randn({batch, width}, at::TensorOptions().device(cuda)));
      const int calls = batch >= 1024 ? 300 : 1000;
      const double eager_us = median_us(*eager, observation, calls);
      const double graph_us = median_us(*graph, observation, calls);
      if (batch == 4096) graph_4096_us = graph_us;
      std::printf("| %s | %lld | %.1f | %.1f | %.2fx |\n", name, static_cast<long long>(batch), eager_us, graph_us,
                  eager_us / graph_us);
    }
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s: %.2fM actions/s at batch 4096 (graph); capturing %zu "
                  "buckets at load took %.0f ms "
                  "(load %.0f ms with graphs, %.0f ms without)",
                  name, 4096 / graph_4096_us, kBatches.size(), (graph_load - eager_load) * 1e3, graph_load * 1e3,
                  eager_load * 1e3);
    notes.push_back(line);
  }
  std::printf("\n");
  for (const std::string& note : notes) std::printf("%s\n", note.c_str());
  print_ensemble_rows(cuda);
  return 0;
}
