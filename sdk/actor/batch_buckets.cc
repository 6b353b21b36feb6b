#include "sdk/actor/batch_buckets.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <stdexcept>

namespace tdp::actor {

std::vector<BucketChunk> plan_bucket_chunks(absl::Span<const int64_t> buckets, int64_t rows) {
  if (buckets.empty()) throw std::invalid_argument("plan_bucket_chunks: no batch buckets");
  if (rows < 0) throw std::invalid_argument(absl::StrCat("plan_bucket_chunks: negative row count ", rows));
  std::vector<BucketChunk> chunks;
  const int64_t largest = buckets.back();
  int64_t offset = 0;
  for (; rows - offset > largest; offset += largest) chunks.push_back({offset, largest, largest});
  if (offset < rows) {
    const int64_t rest = rows - offset;
    chunks.push_back({offset, rest, *std::lower_bound(buckets.begin(), buckets.end(), rest)});
  }
  return chunks;
}

TensorDict padded_rows(const TensorDict& td, const std::vector<NestedKey>& keys, const BucketChunk& chunk) {
  TensorDict out({chunk.bucket}, td.device());
  for (const NestedKey& key : keys) {
    at::Tensor rows = td.get(key).narrow(0, chunk.offset, chunk.rows);
    if (chunk.rows < chunk.bucket) {
      std::vector<int64_t> shape = rows.sizes().vec();
      shape[0] = chunk.bucket - chunk.rows;
      rows = at::cat({rows, at::zeros(shape, rows.options())});
    }
    out.set(key, rows);
  }
  return out;
}

}  // namespace tdp::actor
