// SKIP_WITHOUT_GPU(): the first line of a test case that needs a visible CUDA GPU. Where there is
// none (CI, these build machines) the case skips and says why; on the GPU machine
// (tests/gpu/gpu_check.sh sets TDP_REQUIRE_GPU) a missing GPU fails it instead, so a broken setup
// cannot pass by skipping every case.
//
//   TEST(ActorCudaTest, Something) {
//     SKIP_WITHOUT_GPU();
//     ...
//   }
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>

#define SKIP_WITHOUT_GPU()                                                                     \
  if (!torch::cuda::is_available()) {                                                          \
    if (std::getenv("TDP_REQUIRE_GPU") != nullptr) FAIL() << "TDP_REQUIRE_GPU is set, no GPU"; \
    GTEST_SKIP() << "needs a visible CUDA GPU and a binary built with --config=cuda";          \
  }
