// The fused path's Linear kernels on the same float32 data and shapes, the measurement behind
// linear()'s choice (sdk/fused/kernels.h): the portable hand-written loops and the AVX2 / AVX-512
// micro-kernels (sdk/fused/gemm.h) against Eigen 3.4's GEMM compiled for AVX2 + FMA
// (tests/benchmarks/eigen_linear.h) and the cblas_sgemm of Debian's single-threaded OpenBLAS
// (libopenblas0-serial) and BLIS (libblis4-serial), opened at run time
// (tests/benchmarks/cblas_loader.h; without the package, its rows report it as an error). One
// layer, and a whole tanh MLP as the plan runs it (Linear, activation, Linear, ...), at the batch
// sizes the fused plan serves. All write y = x @ W + b over row-major x [rows, in], the weights
// pre-transposed to [in, out] as the plan's arena holds them.
//
// Timed: each layer's product, bias and activation (for the libraries: their cblas_sgemm with its
// argument checks, dispatch and packing, then the bias added and activate() run over the output,
// as for Eigen). Not timed: opening the libraries and setting them to one thread, the data. A
// library's first-call setup (its work buffers) falls in the first timed iteration, amortized over
// the thousands that follow.
//
//   ./bazelw run -c opt //tests/benchmarks:kernels_benchmark -- --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/benchmarks/cblas_loader.h"
#include "tests/benchmarks/eigen_linear.h"
#include "sdk/fused/gemm.h"
#include "sdk/fused/kernels.h"

namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

// One layer's pre-transposed weights [in, out] and bias [out].
struct Layer {
  int64_t in;
  int64_t out;
  std::vector<float> wt;
  std::vector<float> bias;
  Layer(int64_t in_features, int64_t out_features, uint32_t seed)
      : in(in_features),
        out(out_features),
        wt(random_floats(in_features * out_features, seed)),
        bias(random_floats(out_features, seed + 1)) {}
};

// The widths of an MLP: CartPole's 4 -> 64 -> 64 -> 2 and a 17 -> 256 -> 256 -> 12 locomotion-size one.
std::vector<Layer> mlp(const std::vector<int64_t>& widths) {
  std::vector<Layer> layers;
  for (size_t i = 0; i + 1 < widths.size(); ++i) layers.emplace_back(widths[i], widths[i + 1], 7 + 2 * i);
  return layers;
}

const std::vector<int64_t>& widths_of(int64_t id) {
  static const std::vector<int64_t> kCartPole = {4, 64, 64, 2};
  static const std::vector<int64_t> kLocomotion = {17, 256, 256, 12};
  return id == 0 ? kCartPole : kLocomotion;
}

enum class Kernels { kLoops, kEigen, kOpenBlas, kBlis, kAvx2, kAvx512 };

using tdp::fused::Activation;
using tdp::fused::internal::Cblas;
using tdp::fused::internal::CblasLibrary;
using tdp::fused::internal::Isa;

const Cblas& library_of(Kernels kernels) {
  return tdp::fused::internal::cblas(kernels == Kernels::kOpenBlas ? CblasLibrary::kOpenBlas : CblasLibrary::kBlis);
}

// Why this machine cannot run `kernels` (the benchmark then reports it and measures nothing), or
// empty when it can.
std::string unrunnable(Kernels kernels) {
  const char* no_cpu = "this CPU cannot run these kernels";
  switch (kernels) {
    case Kernels::kLoops: return "";
    case Kernels::kEigen: return tdp::fused::internal::cpu_has_avx2_fma() ? "" : no_cpu;
    case Kernels::kOpenBlas:
    case Kernels::kBlis: return library_of(kernels).error;
    case Kernels::kAvx2: return tdp::fused::internal::linear_variant(Isa::kAvx2) != nullptr ? "" : no_cpu;
    case Kernels::kAvx512: return tdp::fused::internal::linear_variant(Isa::kAvx512) != nullptr ? "" : no_cpu;
  }
  return no_cpu;
}

// The library and the kernel set it picked for this CPU, beside the shape in the output.
std::string label(Kernels kernels, const std::string& shape) {
  if (kernels != Kernels::kOpenBlas && kernels != Kernels::kBlis) return shape;
  return shape + " (" + library_of(kernels).description + ")";
}

// One layer and its activation: the loops, Eigen and the libraries then run activate() over the
// output (as the plan ran Eigen), the micro-kernels apply it in their epilogue.
void linear(Kernels kernels, const float* x, int64_t rows, const Layer& layer, float* y, Activation activation) {
  switch (kernels) {
    case Kernels::kLoops:
      tdp::fused::internal::linear_loops(x, rows, layer.in, layer.wt.data(), layer.bias.data(), layer.out, y);
      tdp::fused::activate(activation, y, rows * layer.out);
      return;
    case Kernels::kEigen:
      tdp::fused::internal::eigen_linear(x, rows, layer.in, layer.wt.data(), layer.bias.data(), layer.out, y);
      tdp::fused::activate(activation, y, rows * layer.out);
      return;
    case Kernels::kOpenBlas:
    case Kernels::kBlis:
      tdp::fused::internal::cblas_linear(library_of(kernels), x, rows, layer.in, layer.wt.data(), layer.bias.data(),
                                         layer.out, y);
      tdp::fused::activate(activation, y, rows * layer.out);
      return;
    case Kernels::kAvx2:
    case Kernels::kAvx512:
      tdp::fused::internal::linear_variant(kernels == Kernels::kAvx2 ? Isa::kAvx2 : Isa::kAvx512)(
          x, rows, layer.in, layer.wt.data(), layer.bias.data(), layer.out, y, activation);
      return;
  }
}

template <Kernels kKernels>
void BM_Mlp(benchmark::State& state) {
  if (const std::string why = unrunnable(kKernels); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const std::vector<Layer> layers = mlp(widths_of(state.range(0)));
  const int64_t rows = state.range(1);
  const std::vector<float> x = random_floats(rows * layers.front().in, 3);
  std::vector<float> a(rows * 256), b(rows * 256);
  for (auto _ : state) {
    const float* in = x.data();
    float* out = a.data();
    for (size_t l = 0; l < layers.size(); ++l) {
      const Layer& layer = layers[l];
      linear(kKernels, in, rows, layer, out, l + 1 < layers.size() ? Activation::kTanh : Activation::kIdentity);
      in = out;
      out = out == a.data() ? b.data() : a.data();
    }
    benchmark::DoNotOptimize(in);
    benchmark::ClobberMemory();
  }
  int64_t macs = 0;
  for (const Layer& layer : layers) macs += rows * layer.in * layer.out;
  // Multiply-adds per second: compare with PeakFma_* (peak_fma.cc) of the same run.
  state.counters["MACs"] = benchmark::Counter(static_cast<double>(macs), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(label(kKernels, state.range(0) == 0 ? "4-64-64-2" : "17-256-256-12"));
}

template <Kernels kKernels>
void BM_Linear(benchmark::State& state) {
  if (const std::string why = unrunnable(kKernels); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const Layer layer(state.range(0), state.range(1), 11);
  const int64_t rows = state.range(2);
  const std::vector<float> x = random_floats(rows * layer.in, 5);
  std::vector<float> y(rows * layer.out);
  state.SetLabel(label(kKernels, std::to_string(layer.in) + "->" + std::to_string(layer.out)));
  for (auto _ : state) {
    linear(kKernels, x.data(), rows, layer, y.data(), Activation::kIdentity);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
}

void mlp_args(benchmark::internal::Benchmark* b) {
  for (int64_t id : {0, 1}) {
    for (int64_t rows : {1, 8, 64, 1024}) b->Args({id, rows});
  }
}

void linear_args(benchmark::internal::Benchmark* b) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{4, 64}, {64, 64}, {64, 2}, {256, 256}}) {
    for (int64_t rows : {1, 64}) b->Args({in, out, rows});
  }
}

BENCHMARK_TEMPLATE(BM_Mlp, Kernels::kLoops)->Apply(mlp_args);
BENCHMARK_TEMPLATE(BM_Mlp, Kernels::kEigen)->Apply(mlp_args);
BENCHMARK_TEMPLATE(BM_Mlp, Kernels::kOpenBlas)->Apply(mlp_args);
BENCHMARK_TEMPLATE(BM_Mlp, Kernels::kBlis)->Apply(mlp_args);
BENCHMARK_TEMPLATE(BM_Mlp, Kernels::kAvx2)->Apply(mlp_args);
BENCHMARK_TEMPLATE(BM_Mlp, Kernels::kAvx512)->Apply(mlp_args);
BENCHMARK_TEMPLATE(BM_Linear, Kernels::kLoops)->Apply(linear_args);
BENCHMARK_TEMPLATE(BM_Linear, Kernels::kEigen)->Apply(linear_args);
BENCHMARK_TEMPLATE(BM_Linear, Kernels::kOpenBlas)->Apply(linear_args);
BENCHMARK_TEMPLATE(BM_Linear, Kernels::kBlis)->Apply(linear_args);
BENCHMARK_TEMPLATE(BM_Linear, Kernels::kAvx2)->Apply(linear_args);
BENCHMARK_TEMPLATE(BM_Linear, Kernels::kAvx512)->Apply(linear_args);

}  // namespace
