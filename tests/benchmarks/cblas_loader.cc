#include "tests/benchmarks/cblas_loader.h"

#include <dlfcn.h>

#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tdp::fused::internal {
namespace {

constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;

// A library's cblas_sgemm calls its own Fortran-named functions (BLIS's calls sgemm_), which the
// dynamic linker would otherwise bind to the first definition in the process: LibTorch, linked
// into the benchmarks, exports an sgemm_ of its own. RTLD_DEEPBIND makes the library prefer its
// own symbols. The sanitizer runtimes refuse RTLD_DEEPBIND; those builds open without it and
// check below that no other sgemm_ is in the process.
// (gcc says so with __SANITIZE_*__, clang with __has_feature.)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TDP_CBLAS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TDP_CBLAS_SANITIZED 1
#endif
#endif
#if defined(TDP_CBLAS_SANITIZED)
constexpr bool kDeepBind = false;
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr bool kDeepBind = true;
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

template <typename Fn>
Fn lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

std::string dl_error() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

// OpenBLAS: openblas_set_num_threads / openblas_get_num_threads (int), and its build string,
// which names the kernel set (e.g. "SKYLAKEX") and says USE64BITINT for an ILP64 build.
void configure_openblas(void* handle, Cblas& blas) {
  const auto get_config = lookup<const char* (*)()>(handle, "openblas_get_config");
  const auto get_corename = lookup<const char* (*)()>(handle, "openblas_get_corename");
  const std::string config = get_config != nullptr ? get_config() : "";
  if (config.find("USE64BITINT") != std::string::npos) {
    blas.error = std::string(blas.package) + ": " + blas.path + " is built with 64-bit integers (" + config +
                 "); expected the LP64 build";
    return;
  }
  const auto set_threads = lookup<void (*)(int)>(handle, "openblas_set_num_threads");
  const auto get_threads = lookup<int (*)()>(handle, "openblas_get_num_threads");
  if (set_threads != nullptr) set_threads(1);
  if (get_threads != nullptr && get_threads() != 1) {
    blas.error = std::string(blas.package) + ": runs " + std::to_string(get_threads()) +
                 " threads after openblas_set_num_threads(1); expected 1";
    return;
  }
  blas.description = config.empty() ? "OpenBLAS" : config;
  if (get_corename != nullptr) blas.description += std::string(" core ") + get_corename();
}

// BLIS: its integers (dim_t) are 64-bit in Debian's build, its BLAS/CBLAS integers 32-bit (both
// checked); bli_thread_set_num_threads / bli_thread_get_num_threads; the sub-configuration it
// picked for this CPU (bli_arch_query_id, e.g. "skx").
void configure_blis(void* handle, Cblas& blas) {
  const auto int_size = lookup<int64_t (*)()>(handle, "bli_info_get_int_type_size");
  const auto blas_int_size = lookup<int64_t (*)()>(handle, "bli_info_get_blas_int_type_size");
  if (int_size == nullptr || int_size() != 64 || (blas_int_size != nullptr && blas_int_size() != 32)) {
    blas.error = std::string(blas.package) + ": " + blas.path +
                 " is not the build this loader declares (expected 64-bit dim_t and 32-bit BLAS integers)";
    return;
  }
  const auto set_threads = lookup<void (*)(int64_t)>(handle, "bli_thread_set_num_threads");
  const auto get_threads = lookup<int64_t (*)()>(handle, "bli_thread_get_num_threads");
  if (set_threads != nullptr) set_threads(1);
  if (get_threads != nullptr && get_threads() != 1) {
    blas.error = std::string(blas.package) + ": runs " + std::to_string(get_threads()) +
                 " threads after bli_thread_set_num_threads(1); expected 1";
    return;
  }
  const auto version = lookup<const char* (*)()>(handle, "bli_info_get_version_str");
  const auto arch_id = lookup<int (*)()>(handle, "bli_arch_query_id");
  const auto arch_name = lookup<const char* (*)(int)>(handle, "bli_arch_string");
  blas.description = std::string("BLIS ") + (version != nullptr ? version() : "");
  if (arch_id != nullptr && arch_name != nullptr) blas.description += std::string(" ") + arch_name(arch_id());
}

Cblas load(CblasLibrary library) {
  Cblas blas;
  blas.library = library;
  // The serial packages' own folders, not the libblas.so.3 / libopenblas.so.0 alternatives, which
  // point at whichever variant (pthread, openmp, serial) was installed last.
  if (library == CblasLibrary::kOpenBlas) {
    blas.package = "libopenblas0-serial";
    blas.path = "/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0";
  } else {
    blas.package = "libblis4-serial";
    blas.path = "/usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4";
  }
  void* handle = dlopen(blas.path, kOpenFlags);
  if (handle == nullptr) {
    blas.error = std::string(blas.package) + " not installed: " + dl_error() + " (apt-get install " + blas.package +
                 ", or run ./bazelw, which installs it)";
    return blas;
  }
  blas.installed = true;
  const auto sgemm = lookup<CblasSgemmFn>(handle, "cblas_sgemm");
  if (sgemm == nullptr) {
    blas.error = std::string(blas.package) + ": " + blas.path + " has no cblas_sgemm: " + dl_error();
    return blas;
  }
  if (!kDeepBind) {
    void* own = dlsym(handle, "sgemm_");
    void* first = dlsym(RTLD_DEFAULT, "sgemm_");
    if (first != nullptr && first != own) {
      blas.error = std::string(blas.package) +
                   ": another library in this process defines sgemm_, which its cblas_sgemm may call "
                   "instead of its own (a sanitizer build cannot open it with RTLD_DEEPBIND)";
      return blas;
    }
  }
  if (library == CblasLibrary::kOpenBlas) {
    configure_openblas(handle, blas);
  } else {
    configure_blis(handle, blas);
  }
  if (blas.error.empty()) blas.sgemm = sgemm;
  return blas;
}

}  // namespace

const Cblas& cblas(CblasLibrary library) {
  static const Cblas openblas = load(CblasLibrary::kOpenBlas);
  static const Cblas blis = load(CblasLibrary::kBlis);
  return library == CblasLibrary::kOpenBlas ? openblas : blis;
}

void cblas_linear(const Cblas& blas, const float* x, int64_t rows, int64_t in, const float* wt, const float* bias,
                  int64_t out, float* y) {
  if (!blas.loaded()) throw std::logic_error("cblas_linear: " + blas.error);
  if (rows > INT_MAX || in > INT_MAX || out > INT_MAX) {
    throw std::invalid_argument("cblas_linear: rows " + std::to_string(rows) + ", in " + std::to_string(in) +
                                ", out " + std::to_string(out) + " exceed CBLAS's 32-bit sizes");
  }
  const int m = static_cast<int>(rows), k = static_cast<int>(in), n = static_cast<int>(out);
  blas.sgemm(kCblasRowMajor, kCblasNoTrans, kCblasNoTrans, m, n, k, 1.0f, x, k, wt, n, 0.0f, y, n);
  if (bias == nullptr) return;
  // Vectorized (-O3, SSE: this file has no CPU check); small beside the product.
  const float* __restrict b = bias;
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict row = y + r * out;
    for (int64_t o = 0; o < out; ++o) row[o] += b[o];
  }
}

}  // namespace tdp::fused::internal
