// A library that declares environments for another env-library ABI and LibTorch: what a simulator
// built against an older SDK looks like to load_env_library.
#include "sdk/env/env_library.h"

extern "C" __attribute__((visibility("default"))) const tdp::env::EnvLibraryInfo* tdp_env_library() {
  static const char* const names[] = {"stale", nullptr};
  static const tdp::env::EnvLibraryInfo info{tdp::env::kEnvLibraryAbi + 1, 1, 13, _GLIBCXX_USE_CXX11_ABI, names,
                                             nullptr};
  return &info;
}
