// Batch buckets: how an actor on a GPU maps a call of any batch size onto the few batch sizes it
// captured CUDA graphs for. A call is padded up to the smallest bucket that fits; a call larger
// than the largest bucket is split into chunks of that bucket, the last one padded. Padding rows
// are zeros and are cut from the outputs, so they never reach the caller or the recurrent state.
//
//   plan_bucket_chunks({1, 16, 64}, 150)   // {0, 64, 64}, {64, 64, 64}, {128, 22, 64}
//   plan_bucket_chunks({1, 16, 64}, 5)     // {0, 5, 16}
//   TensorDict in = padded_rows(observation, keys, chunk);   // [chunk.bucket, ...] entries
#pragma once

#include <absl/types/span.h>

#include <cstdint>
#include <vector>

#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::actor {

// Rows [offset, offset + rows) of a call, run in the graph captured for `bucket` >= rows.
struct BucketChunk {
  int64_t offset;
  int64_t rows;
  int64_t bucket;
  bool operator==(const BucketChunk& other) const {
    return offset == other.offset && rows == other.rows && bucket == other.bucket;
  }
};

// `buckets`: positive, increasing (tdp::policy::check_cuda_graph_settings); rows >= 0. No chunks
// for zero rows. Throws std::invalid_argument for empty buckets or negative rows.
std::vector<BucketChunk> plan_bucket_chunks(absl::Span<const int64_t> buckets, int64_t rows);

// The chunk's rows of each of `keys` in `td` (batch dims [N]), zero-padded to chunk.bucket rows,
// in a TensorDict of batch size [chunk.bucket]. Views of `td` when no padding is needed.
TensorDict padded_rows(const TensorDict& td, const std::vector<NestedKey>& keys, const BucketChunk& chunk);

}  // namespace tdp::actor
