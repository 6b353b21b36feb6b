#include "sdk/fused/kernels.h"

#include <cmath>

#include "sdk/fused/math.h"

namespace tdp::fused {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TDP_FUSED_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TDP_FUSED_CLONES
#endif

TDP_FUSED_CLONES
void linear(const float* __restrict x, int64_t rows, int64_t in, const float* __restrict wt,
            const float* __restrict bias, int64_t out, float* __restrict y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * in;
    float* yr = y + r * out;
    if (bias != nullptr) {
      for (int64_t o = 0; o < out; ++o) yr[o] = bias[o];
    } else {
      for (int64_t o = 0; o < out; ++o) yr[o] = 0.0f;
    }
    for (int64_t i = 0; i < in; ++i) {
      const float xi = xr[i];
      const float* w = wt + i * out;
      for (int64_t o = 0; o < out; ++o) yr[o] += xi * w[o];
    }
  }
}

void layer_norm(float* x, int64_t rows, int64_t width, const float* gamma, const float* beta, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * width;
    double mean = 0;
    for (int64_t i = 0; i < width; ++i) mean += xr[i];
    mean /= static_cast<double>(width);
    double var = 0;
    for (int64_t i = 0; i < width; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(width);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
    for (int64_t i = 0; i < width; ++i) xr[i] = (xr[i] - m) * inv * gamma[i] + beta[i];
  }
}

TDP_FUSED_CLONES
void activate(Activation activation, float* __restrict x, int64_t n) {
  switch (activation) {
    case Activation::kIdentity:
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = fast_tanh(x[i]);
      return;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
      return;
    case Activation::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : std::expm1(x[i]);
      return;
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
      return;
    case Activation::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.01f * x[i];
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + fast_exp(-x[i]));
      return;
    case Activation::kSoftplus:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 20.0f ? x[i] : std::log1p(std::exp(x[i]));
      return;
  }
}

}  // namespace tdp::fused
