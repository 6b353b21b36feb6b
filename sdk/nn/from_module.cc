#include "sdk/nn/from_module.h"

#include <absl/strings/str_split.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace tdp::nn {
namespace {

NestedKey key_of(const std::string& dotted_name) {
  std::vector<std::string> path = absl::StrSplit(dotted_name, '.');
  return NestedKey(std::move(path));
}

}  // namespace

TensorDict from_module(const torch::nn::Module& module) {
  TensorDict out(std::vector<int64_t>{});
  for (const auto& item : module.named_parameters(/*recurse=*/true)) out.set(key_of(item.key()), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    if (item.value().defined()) out.set(key_of(item.key()), item.value());
  }
  return out;
}

void soft_update(TensorDict& target, const TensorDict& source, double tau) {
  if (!(tau >= 0.0 && tau <= 1.0)) {
    throw std::invalid_argument("soft_update: tau must be in [0, 1], got " + std::to_string(tau));
  }
  torch::NoGradGuard no_grad;
  // Checked before anything is written, so a mismatch leaves `target` as it was.
  const std::vector<NestedKey> keys = target.keys(/*include_nested=*/true, /*leaves_only=*/true);
  for (const NestedKey& key : keys) {
    if (!source.contains(key)) {
      throw std::invalid_argument("soft_update: the source has no entry " + key.to_string());
    }
    if (source.get(key).sizes() != target.get(key).sizes()) {
      throw std::invalid_argument("soft_update: entry " + key.to_string() + " is " +
                                  shape_to_string(source.get(key).sizes()) + " in the source and " +
                                  shape_to_string(target.get(key).sizes()) + " in the target");
    }
  }
  for (const NestedKey& key : keys) {
    at::Tensor destination = target.get(key);
    if (!destination.is_floating_point()) continue;
    destination.lerp_(source.get(key).to(destination.options()), tau);
  }
}

}  // namespace tdp::nn
