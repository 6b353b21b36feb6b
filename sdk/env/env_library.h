// Env libraries: a user's own C++ simulator, compiled into a shared library against the SDK's
// headers and the same LibTorch, made available by name to make_env (C++), tdpolicy.envs.make_env
// (Python), the collector and the samples, without rebuilding the SDK. The library derives its
// simulator from BatchedEnv and declares it once, at namespace scope:
//
//   class MountainCar : public tdp::env::BatchedEnv { ... };
//   std::unique_ptr<tdp::env::BatchedEnv> make(const std::string& name, const tdp::env::EnvOptions& o) {
//     return std::make_unique<MountainCar>(o);
//   }
//   TDP_ENV_LIBRARY(&make, "mountaincar")        // the names it answers to, lower-case
//
// A program then loads it once: tdp::env::load_env_library("libmountain_car.so") (Python:
// tdpolicy.envs.load_library(path)), and make_env("mountaincar", options) builds one.
// samples/custom_env holds a complete example.
//
// Why a C entry point rather than a static registrar: the library links its own copy of the
// SDK's env code, so a registry inside it would not be the program's. The program opens the
// library (dlopen, RTLD_LOCAL), finds the one C symbol TDP_ENV_LIBRARY defines, and checks
// what the library was compiled against (this header's version, LibTorch's major.minor and the
// C++ string ABI: a library built with _GLIBCXX_USE_CXX11_ABI=0 next to LibTorch's new ABI would
// crash on the first std::string crossing) before it calls anything. Libraries stay loaded for
// the life of the process. Thread safety: every function here may be called from any thread.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <torch/version.h>

#include <memory>
#include <string>
#include <vector>

#include "sdk/env/batched_env.h"

namespace tdp::env {

// Bumped whenever BatchedEnv's layout or this struct changes.
inline constexpr int kEnvLibraryAbi = 1;

// What TDP_ENV_LIBRARY exports; read by load_env_library.
struct EnvLibraryInfo {
  int abi;
  int torch_major;
  int torch_minor;
  int cxx11_abi;
  const char* const* names;  // null-terminated
  std::unique_ptr<BatchedEnv> (*make)(const std::string& name, const EnvOptions& options);
};

// Opens the shared library at `path` and makes its environments known to make_env. Loading the
// same file again does nothing. Errors (InvalidArgument unless noted) name the file: it cannot
// be opened (NotFound when missing, with the loader's message), it declares no TDP_ENV_LIBRARY,
// it was compiled against another SDK env ABI, LibTorch or C++ string ABI
// (FailedPrecondition), or a name is empty, not lower-case, or already taken by another library.
// Returns the names it added.
absl::StatusOr<std::vector<std::string>> load_env_library(const std::string& path);

// The names loaded libraries answer to, sorted.
std::vector<std::string> library_env_names();

// An environment of a loaded library: NotFound when no library answers to `name` (lower-case);
// the library's std::invalid_argument becomes InvalidArgument, any other exception Internal,
// each naming the environment and its library.
absl::StatusOr<std::unique_ptr<BatchedEnv>> make_library_env(const std::string& name, const EnvOptions& options);

}  // namespace tdp::env

#define TDP_ENV_LIBRARY(make_function, ...)                                                            \
  extern "C" __attribute__((visibility("default"))) const ::tdp::env::EnvLibraryInfo* tdp_env_library() { \
    static const char* const names[] = {__VA_ARGS__, nullptr};                                          \
    static const ::tdp::env::EnvLibraryInfo info{::tdp::env::kEnvLibraryAbi, TORCH_VERSION_MAJOR,          \
                                                 TORCH_VERSION_MINOR, _GLIBCXX_USE_CXX11_ABI, names,     \
                                                 (make_function)};                                       \
    return &info;                                                                                         \
  }
