// RemoteActor against the same policy in process: N simulator threads each calling act() in a
// loop on a batch of B observations, through
//   remote: one RemoteActor (shared by the threads, one gRPC channel) -> `python -m
//           tdpolicy.serving` (KServe's model server; one BatchingActor per model, which merges
//           the requests that arrive together) on loopback;
//   local:  one Actor (policies/cartpole_categorical.pbtxt, default options) shared by the threads.
// For N in --clients (1, 8, 64) and B in --batch (1, 64), RANDOM without per-call seeds (the
// server's merged path), it prints a Markdown table: requests/s and rows/s (all threads together),
// p50 and p99 of one act() as a thread sees it, and remote/local ratios of requests/s. Each row is
// the median of --repetitions runs of --seconds, remote and local taking turns. The server runs
// in this process's network namespace: remote_actor_benchmark.sh makes a private one.
//
//   ./bazelw run -c opt //tests/benchmarks:remote_actor_benchmark -- [--seconds=2] [--repetitions=3]
//       [--clients=1,8,64] [--batch=1,64]
//
// One intra-op thread in every thread (at::set_num_threads(1), as the other benchmarks); the
// server process is another process on the same cores, so on a 2-core machine the two compete.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/actor/remote_actor.h"
#include "tests/actor/remote_serving_process.h"

namespace {

using tdp::TensorDict;
using Clock = std::chrono::steady_clock;

struct Flags {
  double seconds = 2.0;
  int repetitions = 3;
  std::vector<int> clients = {1, 8, 64};
  std::vector<int> batch = {1, 64};
};

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> values;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    values.push_back(std::stoi(text.substr(start, end - start)));
    start = end + 1;
  }
  return values;
}

Flags parse_flags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const std::string& name) -> std::string {
      return arg.rfind(name + "=", 0) == 0 ? arg.substr(name.size() + 1) : "";
    };
    if (!value("--seconds").empty()) {
      flags.seconds = std::stod(value("--seconds"));
    } else if (!value("--repetitions").empty()) {
      flags.repetitions = std::stoi(value("--repetitions"));
    } else if (!value("--clients").empty()) {
      flags.clients = parse_list(value("--clients"));
    } else if (!value("--batch").empty()) {
      flags.batch = parse_list(value("--batch"));
    } else {
      std::cerr << "remote_actor_benchmark: unknown argument " << arg
                << " (--seconds=S --repetitions=N --clients=1,8,64 --batch=1,64)\n";
      std::exit(2);
    }
  }
  return flags;
}

struct Run {
  double requests_per_second = 0;
  double p50_us = 0, p99_us = 0;
  int64_t errors = 0;
};

// `clients` threads calling `act(observation)` for `seconds`; per-call latencies of every thread.
template <typename Act>
Run run(int clients, int batch, double seconds, Act act) {
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::vector<double>> latencies(clients);
  std::atomic<int64_t> errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      at::set_num_threads(1);
      c10::InferenceMode inference;
      TensorDict observation({{"observation", at::randn({batch, 4})}}, {batch});
      latencies[c].reserve(1 << 16);
      while (!go) std::this_thread::yield();
      while (!stop) {
        const auto start = Clock::now();
        try {
          act(observation);
        } catch (const std::exception& error) {
          if (errors++ == 0) std::cerr << "remote_actor_benchmark: " << error.what() << "\n";
          continue;
        }
        latencies[c].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
    });
  }
  const auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& thread : threads) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  Run result;
  result.errors = errors;
  if (all.empty()) return result;
  std::sort(all.begin(), all.end());
  result.requests_per_second = static_cast<double>(all.size()) / elapsed;
  result.p50_us = all[all.size() / 2];
  result.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return result;
}

Run median(std::vector<Run> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.requests_per_second < b.requests_per_second; });
  return runs[runs.size() / 2];
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  at::set_num_threads(1);
  const char* policies = std::getenv("TDP_POLICIES");
  const std::string spec = std::string(policies ? policies : "policies") + "/cartpole_categorical.pbtxt";

  tdp::test_util::ServingProcess server(spec, "cartpole", 18080, 18081);
  if (absl::Status started = server.start(); !started.ok()) {
    std::cerr << "remote_actor_benchmark: " << started << "\n";
    return 1;
  }
  auto remote = tdp::actor::RemoteActor::connect(server.target(), "cartpole");
  auto local = tdp::actor::Actor::load(spec);
  if (!remote.ok() || !local.ok()) {
    std::cerr << "remote_actor_benchmark: " << remote.status() << " / " << local.status() << "\n";
    return 1;
  }
  // Warm both paths (first calls, connection, the server's first batch).
  TensorDict warm({{"observation", at::randn({64, 4})}}, {64});
  for (int i = 0; i < 20; ++i) {
    (*remote)->act(warm);
    (*local)->act(warm);
  }

  std::printf("load average before: %s\n\n", load_average().c_str());
  std::printf("| clients | batch | path | requests/s | rows/s | p50 us | p99 us | remote/local requests/s |\n");
  std::printf("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
  int64_t errors = 0;
  for (int batch : flags.batch) {
    for (int clients : flags.clients) {
      std::vector<Run> remote_runs, local_runs;
      for (int r = 0; r < flags.repetitions; ++r) {
        remote_runs.push_back(
            run(clients, batch, flags.seconds, [&](const TensorDict& obs) { (*remote)->act(obs); }));
        local_runs.push_back(run(clients, batch, flags.seconds, [&](const TensorDict& obs) { (*local)->act(obs); }));
        errors += remote_runs.back().errors + local_runs.back().errors;
      }
      const Run rm = median(remote_runs), lc = median(local_runs);
      for (const auto& [name, row] : {std::pair{"remote", rm}, std::pair{"local", lc}}) {
        std::printf("| %d | %d | %s | %.0f | %.0f | %.0f | %.0f | %s |\n", clients, batch, name,
                    row.requests_per_second, row.requests_per_second * batch, row.p50_us, row.p99_us,
                    std::string(name) == "remote"
                        ? std::to_string(rm.requests_per_second / std::max(lc.requests_per_second, 1e-9)).substr(0, 6).c_str()
                        : "");
      }
      std::fflush(stdout);
    }
  }
  std::printf("\nload average after: %s\n", load_average().c_str());
  const int stopped = server.stop();
  if (errors > 0 || stopped != 0) {
    std::cerr << "remote_actor_benchmark: " << errors << " failed calls; server exit code " << stopped << "\n";
    return 1;
  }
  return 0;
}
