// Many simulator threads, one policy: central batching (tdp::actor::BatchingActor) against each
// thread calling an Actor itself. Each client thread steps its own CartPole batch
// (samples/envs/cartpole.h, 1 or 16 environments) with policies/cartpole_categorical.pbtxt
// (RANDOM, the default backend kAuto: the fused CPU plan up to batch 64) for a fixed wall time,
// through one of
//   batching: one BatchingActor (default options: max_batch_size 64, min_batch_size 1,
//             max_delay 10 ms) shared by every client;
//   local:    one Actor per client thread;
//   shared:   one Actor called directly by every client.
// It prints a Markdown table: environment steps per second (all clients together), the process's
// CPU time (user + system) per environment step, the mean batch fill of the batcher's calls
// (rows / 64), and p50 / p99 of one policy call as a client sees it (submit to result for the
// batcher). Each row is the median of --repetitions runs of --seconds, the three paths taking
// turns so that a change in the machine's other load spreads over all of them; the load average
// is printed before and after. On a shared machine steps/s also measures how much CPU the
// scheduler gave the process (threads that block and wake, as the batcher's clients do, get a
// larger share against CPU-bound neighbours); CPU time per step depends far less on it.
//
//   ./bazelw run -c opt //tests/benchmarks:batching_benchmark -- [--seconds=1] [--repetitions=3]
//       [--clients=1,8,64] [--envs=1,16] [--paths=batching,local,shared] [--backend=auto|libtorch]
//       [--device=cpu|cuda[:N]]
//
// --backend=libtorch runs every actor on LibTorch (tens of microseconds per call at batch 1
// instead of the fused plan's ~2): the case of a policy that costs much per call and little per row.
// --device=cuda runs every actor on that GPU with CUDA graphs at the default buckets (a
// --config=cuda build; tests/gpu/gpu_check.sh runs it there): the environments stay on the CPU,
// so each step copies its observations to the GPU and its actions back, as a CPU simulator does.
//
// One intra-op thread in every thread (at::set_num_threads(1), as benchmark_main.cc), so clients
// and the batcher's worker are the only parallelism; glibc's malloc tuned as there.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "samples/envs/cartpole.h"
#include "sdk/actor/actor.h"
#include "sdk/actor/batching_actor.h"
#include "sdk/actor/cpu_allocator.h"
#include "sdk/tensordict/tensordict.h"

namespace {

using tdp::TensorDict;
using tdp::actor::Actor;
using tdp::actor::BatchingActor;
using Clock = std::chrono::steady_clock;

constexpr const char* kSpec = "policies/cartpole_categorical.pbtxt";

enum class Path { kBatching, kLocal, kShared };
const char* name(Path path) {
  switch (path) {
    case Path::kBatching:
      return "batching (one BatchingActor)";
    case Path::kLocal:
      return "local (one Actor per client)";
    case Path::kShared:
      return "shared (one Actor, direct calls)";
  }
  return "";
}

// kAuto (the default: the fused plan up to batch 64) or kLibTorch (--backend=libtorch), for every actor.
tdp::actor::Backend backend = tdp::actor::Backend::kAuto;
// --device: the CPU, or a GPU with CUDA graphs.
c10::Device device(c10::kCPU);

std::unique_ptr<Actor> load_actor(uint64_t seed) {
  tdp::actor::ActorOptions options = tdp::actor::ActorOptions().seed(seed).device(device);
  if (device.is_cuda()) {
    options.cuda_graph(tdp::actor::CudaGraphOptions());
  } else {
    options.backend(backend);
  }
  auto actor = Actor::load(kSpec, options);
  if (!actor.ok()) {
    std::cerr << actor.status() << " (run from the repository root, or with bazel run)\n";
    std::exit(1);
  }
  return std::move(*actor);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

struct Row {
  double steps_per_second = 0;
  double fill = -1;  // batcher only
  double p50_us = 0;
  double p99_us = 0;
  double cpu_us_per_step = 0;  // the process's CPU time (user + system) per env step
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

Row measure(Path path, int clients, int64_t envs, double seconds) {
  std::shared_ptr<Actor> shared = load_actor(0);
  std::unique_ptr<BatchingActor> batcher;
  if (path == Path::kBatching) batcher = std::make_unique<BatchingActor>(shared);
  std::vector<std::unique_ptr<Actor>> local;
  if (path == Path::kLocal) {
    for (int c = 0; c < clients; ++c) local.push_back(load_actor(c));
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<int64_t> steps(clients, 0);
  std::vector<std::vector<float>> latencies(clients);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      // OpenMP's thread count is per thread: one intra-op thread in every client, as in main().
      at::set_num_threads(1);
      c10::InferenceMode inference;
      tdp::env::CartPole env{tdp::env::EnvOptions(envs)};
      TensorDict td = env.reset(/*seed=*/c);
      auto act_on_device = [&](const TensorDict& obs) {
        switch (path) {
          case Path::kBatching:
            return batcher->act(obs);
          case Path::kLocal:
            return local[c]->act(obs);
          case Path::kShared:
            return shared->act(obs);
        }
        return TensorDict();
      };
      // The action as the CPU environment steps it: a copy to the host from a GPU actor.
      auto act = [&](const TensorDict& obs) {
        at::Tensor action = act_on_device(obs).get("action");
        return action.is_cuda() ? action.cpu() : action;
      };
      for (int i = 0; i < 20; ++i) {  // warm-up: first calls, allocator, caches
        td.set("action", act(td));
        td = env.step(td);
      }
      latencies[c].reserve(1 << 20);
      ++ready;
      while (!go.load()) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        const Clock::time_point start = Clock::now();
        at::Tensor action = act(td);
        latencies[c].push_back(std::chrono::duration<float, std::micro>(Clock::now() - start).count());
        td.set("action", action);
        td = env.step(td);
        steps[c] += envs;
      }
    });
  }
  while (ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const tdp::actor::BatchingStats before = batcher ? batcher->stats() : tdp::actor::BatchingStats();
  const double cpu_start = cpu_seconds();
  const Clock::time_point start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& thread : threads) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu_start;
  Row row;
  int64_t total = 0;
  std::vector<float> all;
  for (int c = 0; c < clients; ++c) {
    total += steps[c];
    all.insert(all.end(), latencies[c].begin(), latencies[c].end());
  }
  row.steps_per_second = total / elapsed;
  row.cpu_us_per_step = total > 0 ? cpu * 1e6 / total : 0;
  if (!all.empty()) {
    auto at = [&](double q) {
      const size_t k = std::min(all.size() - 1, static_cast<size_t>(q * all.size()));
      std::nth_element(all.begin(), all.begin() + k, all.end());
      return all[k];
    };
    row.p50_us = at(0.50);
    row.p99_us = at(0.99);
  }
  if (batcher) {
    const tdp::actor::BatchingStats after = batcher->stats();
    const int64_t batches = after.batches - before.batches;
    if (batches > 0) row.fill = static_cast<double>(after.rows - before.rows) / (batches * after.max_batch_size);
  }
  return row;
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) values.push_back(std::stoll(item));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1;
  int repetitions = 3;
  std::vector<int64_t> clients = {1, 8, 64};
  std::vector<int64_t> envs = {1, 16};
  std::vector<Path> paths = {Path::kBatching, Path::kLocal, Path::kShared};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--seconds=", 0) == 0) {
      seconds = std::stod(arg.substr(10));
    } else if (arg == "--backend=libtorch") {
      backend = tdp::actor::Backend::kLibTorch;
    } else if (arg == "--backend=auto") {
      backend = tdp::actor::Backend::kAuto;
    } else if (arg.rfind("--device=", 0) == 0) {
      device = c10::Device(arg.substr(9));
    } else if (arg.rfind("--repetitions=", 0) == 0) {
      repetitions = std::max(1, std::stoi(arg.substr(14)));
    } else if (arg.rfind("--clients=", 0) == 0) {
      clients = parse_list(arg.substr(10));
    } else if (arg.rfind("--envs=", 0) == 0) {
      envs = parse_list(arg.substr(7));
    } else if (arg.rfind("--paths=", 0) == 0) {
      paths.clear();
      std::stringstream in(arg.substr(8));
      std::string item;
      while (std::getline(in, item, ',')) {
        if (item == "batching") paths.push_back(Path::kBatching);
        if (item == "local") paths.push_back(Path::kLocal);
        if (item == "shared") paths.push_back(Path::kShared);
      }
    } else {
      std::cerr << "usage: batching_benchmark [--seconds=1] [--repetitions=3] [--clients=1,8,64] [--envs=1,16] "
                   "[--paths=batching,local,shared] [--backend=auto|libtorch] [--device=cpu|cuda[:N]]\n";
      return 1;
    }
  }
  at::set_num_threads(1);
  if (std::getenv("TDP_DEFAULT_MALLOC") == nullptr) {
    if (absl::Status tuned = tdp::actor::tune_cpu_allocator(); !tuned.ok()) std::cerr << tuned << "\n";
  }
  std::printf("hardware threads: %u; load average before: %s; %s; %.1f s per run, %d interleaved runs per row\n\n",
              std::thread::hardware_concurrency(), load_average().c_str(),
              device.is_cuda() ? (device.str() + " (CUDA graphs)").c_str()
                               : (backend == tdp::actor::Backend::kAuto ? "backend kAuto" : "backend kLibTorch"),
              seconds, repetitions);
  std::printf(
      "| path | clients | envs per client | env steps/s | CPU us per env step | mean batch fill | act p50 (us) "
      "| act p99 (us) |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  for (int64_t per_client : envs) {
    for (int64_t n : clients) {
      // The paths take turns, so a change in the machine's other load spreads over all of them.
      std::vector<std::vector<Row>> runs(paths.size());
      for (int r = 0; r < repetitions; ++r) {
        for (size_t p = 0; p < paths.size(); ++p)
          runs[p].push_back(measure(paths[p], static_cast<int>(n), per_client, seconds));
      }
      for (size_t p = 0; p < paths.size(); ++p) {
        auto of = [&](double Row::*field) {
          std::vector<double> values;
          for (const Row& row : runs[p]) values.push_back(row.*field);
          return median(values);
        };
        char fill[32] = "-";
        if (paths[p] == Path::kBatching) std::snprintf(fill, sizeof fill, "%.2f", of(&Row::fill));
        std::printf("| %s | %lld | %lld | %.0f | %.1f | %s | %.1f | %.1f |\n", name(paths[p]),
                    static_cast<long long>(n), static_cast<long long>(per_client), of(&Row::steps_per_second),
                    of(&Row::cpu_us_per_step), fill, of(&Row::p50_us), of(&Row::p99_us));
        std::fflush(stdout);
      }
    }
  }
  std::printf("\nload average after: %s\n", load_average().c_str());
  return 0;
}
