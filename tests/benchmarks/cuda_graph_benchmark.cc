// Actor::act on a GPU, eager against CUDA-graph replay, on the CartPole and Pendulum policies at
// batch 1, 64, 1024 and 4096 (one graph bucket each), RANDOM interaction. Each timed call is act()
// plus a copy of the action to the host, which is what a simulator needs before it steps (and
// waits for the eager kernels as the graph call waits for its replay). Prints a Markdown table of
// medians, eager/graph ratios, actions per second at 4096 and the time to capture all buckets at
// load; where a batch-1 graph call spends its time, and the kernels of one call (LibTorch's Kineto
// profiler); then an ensemble of 10 critics, batched against looped. Built with
// --config=cuda; run by tests/gpu/gpu_check.sh on the GPU machine:
//
//   ./bazelw build -c opt --config=cuda //tests/benchmarks:cuda_graph_benchmark
//   bazel-bin/tests/benchmarks/cuda_graph_benchmark [policies folder]   # default: ./policies
//
// Without a visible GPU it says so and exits 0 (1 under TDP_REQUIRE_GPU): there is nothing to measure.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/nn/cuda_graph_module.h"
#include "sdk/nn/ensemble_module.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/probabilistic/interaction_type.h"
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

// `batch` random rows of the policy's one input, on the device.
TensorDict random_observation(const Actor& actor, int64_t batch, const c10::Device& device) {
  TensorDict observation({batch});
  const auto& input = actor.spec().inputs(0);
  observation.set(input.key(), at::randn({batch, input.shape(0)}, at::TensorOptions().device(device)));
  return observation;
}

// Where a batch-1 graph call spends its time: the actor's graph call (padding, copy-in, replay,
// copies of the outputs, the action to the host) against a bare CudaGraphModule around the same
// module with zero_copy (copy-in, replay, synchronize, the action to the host) and that module's
// eager call, all RANDOM, and a graph of one kernel with the same copies around it. The difference
// between the first two is the actor's own work per call; between the second and the third, what
// the policy's captured kernels take.
void print_batch1_breakdown(const std::string& spec, const c10::Device& cuda) {
  auto graph_actor =
      load(spec, ActorOptions().device(cuda).seed(0).cuda_graph(CudaGraphOptions().batch_buckets({1})), nullptr);
  c10::InferenceMode inference;
  const TensorDict observation = random_observation(*graph_actor, 1, cuda);
  const int64_t width = graph_actor->spec().inputs(0).shape(0);
  const double actor_us = median_us(*graph_actor, observation, 2000);
  // The actor's calls are RANDOM (ActorOptions' default): so are these, with the default generator.
  tdp::nn::InteractionTypeGuard random(tdp::nn::InteractionType::kRandom);
  tdp::nn::CudaGraphModule bare(graph_actor->module(),
                                tdp::nn::CudaGraphModuleOptions().zero_copy(true).device(cuda).warmup(2));
  auto time_module = [&](tdp::nn::TensorDictModuleBase& module) {
    for (int i = 0; i < 20; ++i) module.forward(observation.clone(/*deep=*/false)).get("action").cpu();
    std::vector<double> times;
    for (int i = 0; i < 2000; ++i) {
      TensorDict td = observation.clone(/*deep=*/false);
      const Clock::time_point start = Clock::now();
      at::Tensor action = module.forward(td).get("action").cpu();
      times.push_back(seconds_since(start) * 1e6);
    }
    std::nth_element(times.begin(), times.begin() + 1000, times.end());
    return times[1000];
  };
  const double bare_us = time_module(bare);
  const double eager_us = time_module(*graph_actor->module());
  // The floor of any graph call: the same copy-in, replay, synchronize and copy to the host
  // around a graph of one kernel (one Linear layer writing "action").
  tdp::nn::TensorDictModule one_layer(
      tdp::nn::Mlp(tdp::nn::MlpOptions(width, {}, 2)),
      tdp::nn::TensorDictModuleOptions({graph_actor->spec().inputs(0).key()}, {"action"}));
  one_layer->to(cuda);
  tdp::nn::CudaGraphModule floor(one_layer, tdp::nn::CudaGraphModuleOptions().zero_copy(true).device(cuda).warmup(2));
  const double floor_us = time_module(floor);
  std::printf("| %s, batch 1 | %.1f | %.1f | %.1f | %.1f |\n", spec.c_str(), actor_us, bare_us, floor_us, eager_us);
}

// The GPU work of one eager batch-1 call, which a graph replays kernel for kernel: the kernels
// (and copies) LibTorch's Kineto profiler saw over 10 calls, per call, in order of first launch,
// with their mean GPU time. This is what a replay cannot go below.
void print_kernels_per_call(const std::string& spec, const c10::Device& cuda) {
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  auto actor = load(spec, ActorOptions().device(cuda).seed(0), nullptr);
  const TensorDict observation = random_observation(*actor, 1, cuda);
  for (int i = 0; i < 20; ++i) actor->act(observation).get("action").cpu();
  const int calls = 10;
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  const std::set<ActivityType> activities = {ActivityType::CPU, ActivityType::CUDA};
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  for (int i = 0; i < calls; ++i) actor->act(observation).get("action").cpu();
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  std::vector<std::string> order;
  std::map<std::string, std::pair<int64_t, uint64_t>> by_name;  // launches, total ns
  int64_t launches = 0;
  uint64_t total_ns = 0;
  for (const profiler::KinetoEvent& event : result->events()) {
    if (event.deviceType() != c10::DeviceType::CUDA) continue;
    auto [entry, inserted] = by_name.try_emplace(event.name(), 0, 0);
    if (inserted) order.push_back(event.name());
    entry->second.first += 1;
    entry->second.second += event.durationNs();
    launches += 1;
    total_ns += event.durationNs();
  }
  std::printf("\n%s, eager, batch 1: %.1f GPU operations per call, %.1f us of GPU time per call\n", spec.c_str(),
              static_cast<double>(launches) / calls, total_ns / 1e3 / calls);
  std::printf("| per call | mean GPU time (us) | kernel or copy |\n| --- | --- | --- |\n");
  for (const std::string& name : order) {
    const auto& [count, ns] = by_name[name];
    std::printf("| %.1f | %.2f | %s |\n", static_cast<double>(count) / calls, ns / 1e3 / count,
                name.substr(0, 110).c_str());
  }
}

// The GPU figure for ensembles: an ensemble of 10 critics (17 -> 256 -> 256 -> 1) on the GPU, the batched
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
    double graph_4096_us = 0;
    for (int64_t batch : kBatches) {
      const TensorDict observation = random_observation(*eager, batch, cuda);
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
  std::printf(
      "\n| where a batch-1 call goes | Actor::act, graph (us) | bare CudaGraphModule, zero_copy (us) | "
      "one-kernel graph (us) | module, eager (us) |\n| --- | --- | --- | --- | --- |\n");
  for (const char* name : {"cartpole_categorical", "pendulum_tanh_gaussian"}) {
    print_batch1_breakdown(folder + "/" + name + ".pbtxt", cuda);
  }
  for (const char* name : {"cartpole_categorical", "pendulum_tanh_gaussian"}) {
    print_kernels_per_call(folder + "/" + name + ".pbtxt", cuda);
  }
  print_ensemble_rows(cuda);
  return 0;
}
