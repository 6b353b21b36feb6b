// PeakFma_Avx2, PeakFma_Avx512: the core's multiply-adds per second of CPU time, the ceiling
// the MACs counters of kernels_benchmark and peers_benchmark compare with. Linked into both, so
// a run measures its peak beside its kernels.
//
// Twelve independent FMA chains, more than the FMA latency (4 cycles) times the FMA ports (2),
// so the loop runs at the units' throughput. The chains must live in registers: an array that
// the compiler keeps in memory (which a memory clobber in the loop forces) turns each FMA into a
// load, an FMA and a store, and the loop runs at a third of the peak.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>

namespace {

constexpr int kChains = 12;

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(0.001f * k);
  const __m256 m = _mm256_set1_ps(0.9999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, b);
  }
  __m256 sum = acc[0];
  for (int k = 1; k < kChains; ++k) sum = _mm256_add_ps(sum, acc[k]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  return out[0];
}

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(0.001f * k);
  const __m512 m = _mm512_set1_ps(0.9999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, b);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < kChains; ++k) sum = _mm512_add_ps(sum, acc[k]);
  float out[16];
  _mm512_storeu_ps(out, sum);
  return out[0];
}

template <int kLanes>
void PeakFma(benchmark::State& state) {
  const bool supported = kLanes == 16 ? __builtin_cpu_supports("avx512f")
                                      : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!supported) return state.SkipWithError("this CPU lacks the instructions");
  constexpr int64_t kIterations = 1 << 16;
  for (auto _ : state) {
    // An opaque count each time: the loops are pure functions of it, which the compiler would
    // otherwise run once, outside the timed loop.
    int64_t iterations = kIterations;
    benchmark::DoNotOptimize(iterations);
    benchmark::DoNotOptimize(kLanes == 16 ? fma_loop_avx512(iterations) : fma_loop_avx2(iterations));
  }
  state.counters["MACs"] = benchmark::Counter(static_cast<double>(kIterations * kChains * kLanes),
                                              benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(PeakFma<8>)->Name("PeakFma_Avx2");
BENCHMARK(PeakFma<16>)->Name("PeakFma_Avx512");

}  // namespace
