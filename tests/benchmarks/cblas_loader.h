// A CBLAS library loaded at run time: Debian's single-threaded OpenBLAS (`libopenblas0-serial`)
// or BLIS (`libblis4-serial`), opened with dlopen from the serial package's own folder, its
// `cblas_sgemm` looked up by name, and its thread count set to one and checked. The measured
// alternatives to the fused plan's Linear kernels (tests/benchmarks/kernels_benchmark.cc) and
// checked against a double reference in tests/fused/kernels_test.cc; nothing is linked against
// their -dev packages, so a machine without them builds and reports why a column is missing:
//
//   const Cblas& blas = cblas(CblasLibrary::kOpenBlas);
//   if (!blas.loaded()) return skip(blas.error);  // "libopenblas0-serial not installed: ..."
//   cblas_linear(blas, x, rows, in, wt, bias, out, y);  // y = x @ wt + bias
#pragma once

#include <cstdint>
#include <string>

namespace tdp::fused::internal {

enum class CblasLibrary { kOpenBlas, kBlis };

// CBLAS's documented sgemm (cblas.h): the enums are C ints (CblasRowMajor = 101, CblasNoTrans =
// 111) and the sizes 32-bit ints in the LP64 builds Debian ships (checked at load).
using CblasSgemmFn = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a,
                              int lda, const float* b, int ldb, float beta, float* c, int ldc);

struct Cblas {
  CblasLibrary library = CblasLibrary::kOpenBlas;
  const char* package = "";  // the Debian package, e.g. "libopenblas0-serial"
  const char* path = "";     // the file dlopen'ed
  CblasSgemmFn sgemm = nullptr;
  bool installed = false;   // dlopen found it (it may still be unusable: see error)
  std::string error;        // why it is not usable, naming the package; empty when loaded
  std::string description;  // version and the kernel set it picked for this CPU, e.g. "OpenBLAS 0.3.21 ... SkylakeX"

  bool loaded() const { return sgemm != nullptr; }
};

// The library, opened, set to one thread and checked once per process (thread-safe); the
// handle stays open until the process ends.
const Cblas& cblas(CblasLibrary library);

// y[r, o] = bias[o] + sum_i x[r, i] * wt[i, o] over row-major x [rows, in] and wt [in, out] (the
// plan's pre-transposed layout), as kernels_benchmark's Eigen column computes it: the library's
// sgemm for the product (beta = 0), then the bias (may be null) added row by row. Needs
// blas.loaded().
void cblas_linear(const Cblas& blas, const float* x, int64_t rows, int64_t in, const float* wt, const float* bias,
                  int64_t out, float* y);

}  // namespace tdp::fused::internal
