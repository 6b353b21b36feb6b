// The main() of every benchmark here: one intra-op thread (the SDK's per-call costs are what is
// measured, and the machines these run on have 2 cores; TDP_BENCH_THREADS=N gives N, for the
// large batches that the plan and LibTorch both spread over threads), and glibc's malloc told to keep freed
// tensor memory mapped (see sdk/actor/cpu_allocator.h) unless TDP_DEFAULT_MALLOC is set, so
// large-batch rows measure compute rather than the heap shrinking and regrowing between calls.
// The setting is process-wide: both sides of every SDK-vs-hand comparison run under it.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>

#include "sdk/actor/cpu_allocator.h"

int main(int argc, char** argv) {
  const char* threads = std::getenv("TDP_BENCH_THREADS");
  at::set_num_threads(threads != nullptr && std::atoi(threads) > 1 ? std::atoi(threads) : 1);
  if (std::getenv("TDP_DEFAULT_MALLOC") == nullptr) {
    if (absl::Status tuned = tdp::actor::tune_cpu_allocator(); !tuned.ok()) {
      std::cerr << tuned << "\n";
      return 1;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
