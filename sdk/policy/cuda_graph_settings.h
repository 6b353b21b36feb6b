// The rules for a policy's CUDA-graph settings, shared by the spec's `cuda_graph` block (checked
// by validate_spec and `tdp validate`) and tdp::actor::CudaGraphOptions (checked when an actor is
// made), so both say the same thing about the same mistake.
//
//   if (auto problem = tdp::policy::check_cuda_graph_settings(2, {1, 64, 32})) {
//     // problem->field == "batch_buckets[2]", problem->message says why
//   }
#pragma once

#include <absl/types/span.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace tdp::policy {

// What an enabled block without batch_buckets captures, and its warmup when it gives none.
inline constexpr std::array<int64_t, 6> kDefaultBatchBuckets = {1, 16, 64, 256, 1024, 4096};
inline constexpr int64_t kDefaultCudaGraphWarmup = 2;
// A bucket is a batch size captured once per interaction type; beyond this a bucket is a
// mistake (its static buffers alone would be gigabytes for any real policy).
inline constexpr int64_t kMaxBatchBucket = int64_t{1} << 20;
// Each bucket is captured (and its warmup calls run) once per interaction type when the actor is
// made: more than these is a mistake that would hold the load for hours, not a tuning choice.
inline constexpr int64_t kMaxBatchBuckets = 64;
inline constexpr int64_t kMaxCudaGraphWarmup = 100;

struct CudaGraphSettingProblem {
  std::string field;    // relative to the block: "warmup", "batch_buckets[2]"
  std::string message;  // what is wrong and what is expected
};

// 1 <= warmup <= kMaxCudaGraphWarmup; at most kMaxBatchBuckets buckets, each in [1, kMaxBatchBucket],
// strictly increasing (sorted, unique).
std::optional<CudaGraphSettingProblem> check_cuda_graph_settings(int64_t warmup, absl::Span<const int64_t> batch_buckets);

}  // namespace tdp::policy
