// TensorDict::stack and TensorDict::cat: joining TensorDicts with the same keys along a batch dim.
#include <ATen/Functions.h>
#include <absl/container/flat_hash_set.h>
#include <absl/strings/str_cat.h>

#include "sdk/tensordict/tensordict.h"
#include "sdk/tensordict/tensordict_internal.h"

namespace tdp {

using internal::wrap_dim;

namespace {
// Checks that every TensorDict has the first one's keys and, per key, compatible shapes:
// equal everywhere, or equal except along `free_dim` (for cat).
void check_joinable(const std::vector<TensorDict>& tds, const char* op, std::optional<int64_t> free_dim) {
  if (tds.empty()) throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": the list is empty"));
  const auto first_items = tds[0].items(/*include_nested=*/true, /*leaves_only=*/false);
  auto compatible = [&](c10::IntArrayRef a, c10::IntArrayRef b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i] && !(free_dim && static_cast<int64_t>(i) == *free_dim)) return false;
    }
    return true;
  };
  for (size_t i = 1; i < tds.size(); ++i) {
    if (!compatible(tds[i].batch_size(), tds[0].batch_size())) {
      throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": tensordict ", i, " has batch_size ",
                                               shape_to_string(tds[i].batch_size()), " but tensordict 0 has ",
                                               shape_to_string(tds[0].batch_size())));
    }
    const auto items = tds[i].items(true, false);
    absl::flat_hash_set<NestedKey> keys;
    for (const auto& item : items) keys.insert(item.first);
    for (const auto& [key, entry] : first_items) {
      if (!keys.contains(key)) {
        throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": key ", key.to_string(),
                                                 " is in tensordict 0 but not in tensordict ", i));
      }
      const Entry other = tds[i].get_entry(key);
      if (entry.is_tensor() != other.is_tensor()) {
        throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": key ", key.to_string(),
                                                 " is a tensor in one tensordict and a TensorDict in another"));
      }
      if (entry.is_tensor() && entry.tensor().device() != other.tensor().device()) {
        throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": tensors on different devices at key ",
                                                 key.to_string(), ": ", entry.tensor().device().str(),
                                                 " in tensordict 0, ", other.tensor().device().str(),
                                                 " in tensordict ", i));
      }
      c10::IntArrayRef a = entry.is_tensor() ? entry.tensor().sizes() : entry.tensordict().batch_size();
      c10::IntArrayRef b = other.is_tensor() ? other.tensor().sizes() : other.tensordict().batch_size();
      if (!compatible(b, a)) {
        throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": key ", key.to_string(), " has shape ",
                                                 shape_to_string(a), " in tensordict 0 but ", shape_to_string(b),
                                                 " in tensordict ", i));
      }
    }
    if (items.size() != first_items.size()) {
      absl::flat_hash_set<NestedKey> first_keys;
      for (const auto& item : first_items) first_keys.insert(item.first);
      for (const auto& item : items) {
        if (!first_keys.contains(item.first)) {
          throw std::invalid_argument(absl::StrCat("TensorDict.", op, ": key ", item.first.to_string(),
                                                   " is in tensordict ", i, " but not in tensordict 0"));
        }
      }
    }
  }
}

std::optional<c10::Device> common_device(const std::vector<TensorDict>& tds) {
  std::optional<c10::Device> device = tds[0].device();
  for (const TensorDict& td : tds) {
    if (td.device() != device) return std::nullopt;
  }
  return device;
}

// Joins leaf by leaf; `join` gets the tensors (or, through recursion, nested TensorDicts).
TensorDict join_all(const std::vector<TensorDict>& tds, std::vector<int64_t> batch,
                    const std::function<at::Tensor(const std::vector<at::Tensor>&)>& join,
                    const std::function<std::vector<int64_t>(const std::vector<TensorDict>&)>& nested_batch) {
  TensorDict out(std::move(batch), common_device(tds));
  for (const NestedKey& key : tds[0].keys()) {
    if (tds[0].is_tensordict(key)) {
      std::vector<TensorDict> nested;
      for (const TensorDict& td : tds) nested.push_back(td.get_tensordict(key));
      out.set(key, join_all(nested, nested_batch(nested), join, nested_batch));
    } else {
      std::vector<at::Tensor> tensors;
      for (const TensorDict& td : tds) tensors.push_back(td.get(key));
      out.set(key, join(tensors));
    }
  }
  return out;
}
}  // namespace

TensorDict TensorDict::stack(const std::vector<TensorDict>& tensordicts, int64_t dim) {
  check_joinable(tensordicts, "stack", std::nullopt);
  const int64_t d = wrap_dim(dim, tensordicts[0].ndim() + 1, "stack");
  auto stacked_batch = [d, n = static_cast<int64_t>(tensordicts.size())](const std::vector<TensorDict>& tds) {
    std::vector<int64_t> batch = tds[0].batch_size().vec();
    batch.insert(batch.begin() + d, n);
    return batch;
  };
  return join_all(tensordicts, stacked_batch(tensordicts),
                  [d](const std::vector<at::Tensor>& tensors) { return at::stack(tensors, d); }, stacked_batch);
}

TensorDict TensorDict::cat(const std::vector<TensorDict>& tensordicts, int64_t dim) {
  if (tensordicts.empty()) throw std::invalid_argument("TensorDict.cat: the list is empty");
  const int64_t d = wrap_dim(dim, tensordicts[0].ndim(), "cat");
  check_joinable(tensordicts, "cat", d);
  auto cat_batch = [d](const std::vector<TensorDict>& tds) {
    std::vector<int64_t> batch = tds[0].batch_size().vec();
    batch[d] = 0;
    for (const TensorDict& td : tds) batch[d] += td.batch_size()[d];
    return batch;
  };
  return join_all(tensordicts, cat_batch(tensordicts),
                  [d](const std::vector<at::Tensor>& tensors) { return at::cat(tensors, d); }, cat_batch);
}

}  // namespace tdp
