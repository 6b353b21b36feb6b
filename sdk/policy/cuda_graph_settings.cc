#include "sdk/policy/cuda_graph_settings.h"

#include <absl/strings/str_cat.h>

namespace tdp::policy {

std::optional<CudaGraphSettingProblem> check_cuda_graph_settings(int64_t warmup,
                                                                 absl::Span<const int64_t> batch_buckets) {
  if (warmup < 1) {
    return CudaGraphSettingProblem{
        "warmup", absl::StrCat(warmup, " eager calls before the capture; at least 1 is needed (lazy initialization "
                               "must happen outside the graph)")};
  }
  if (warmup > kMaxCudaGraphWarmup) {
    return CudaGraphSettingProblem{"warmup", absl::StrCat(warmup, " eager calls before the capture; at most ",
                                                          kMaxCudaGraphWarmup, " (tensordict's default is 2)")};
  }
  if (static_cast<int64_t>(batch_buckets.size()) > kMaxBatchBuckets) {
    return CudaGraphSettingProblem{"batch_buckets",
                                   absl::StrCat(batch_buckets.size(), " buckets; at most ", kMaxBatchBuckets,
                                                ", each captured when the actor is made")};
  }
  for (size_t i = 0; i < batch_buckets.size(); ++i) {
    const std::string field = absl::StrCat("batch_buckets[", i, "]");
    const int64_t bucket = batch_buckets[i];
    if (bucket < 1 || bucket > kMaxBatchBucket) {
      return CudaGraphSettingProblem{field, absl::StrCat("batch size ", bucket, " is outside [1, ", kMaxBatchBucket, "]")};
    }
    if (i > 0 && bucket <= batch_buckets[i - 1]) {
      return CudaGraphSettingProblem{
          field, absl::StrCat(bucket, " does not follow ", batch_buckets[i - 1],
                              "; list the buckets in increasing order, each once")};
    }
  }
  return std::nullopt;
}

}  // namespace tdp::policy
