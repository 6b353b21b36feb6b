#include "sdk/actor/recurrent_state.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sdk/policy/keys.h"

namespace tdp::actor {

RecurrentState::RecurrentState(const policy::Signature& signature, c10::Device device)
    : keys_(signature.state_keys), next_keys_(signature.next_state_keys), device_(device) {
  for (const NestedKey& key : keys_) shapes_.push_back(signature.find_input(key)->shape);
  for (const policy::TensorSignature& input : signature.inputs) {
    if (input.optional) optional_.push_back(input);
  }
}

void RecurrentState::fill_optional(TensorDict& td) const {
  for (const policy::TensorSignature& input : optional_) {
    if (td.contains(input.key)) continue;
    std::vector<int64_t> shape = td.batch_size().vec();
    shape.insert(shape.end(), input.shape.begin(), input.shape.end());
    td.set(input.key, at::zeros(shape, at::TensorOptions().dtype(input.dtype).device(device_)));
  }
}

bool RecurrentState::uses_kept(const TensorDict& observation) const {
  size_t carried = 0;
  for (const NestedKey& key : keys_) carried += observation.contains(key) ? 1 : 0;
  // Every call asks this: key names are built only for the error.
  if (carried == 0 || carried == keys_.size()) return carried == 0 && !keys_.empty();
  std::vector<std::string> given;
  std::vector<std::string> missing;
  for (const NestedKey& key : keys_) (observation.contains(key) ? given : missing).push_back(policy::key_string(key));
  throw std::invalid_argument(absl::StrCat(
      "Actor.act: the observation carries the recurrent state ", absl::StrJoin(given, ", "), " but not ",
      absl::StrJoin(missing, ", "), "; pass every state key or none (the actor then supplies its kept state)"));
}

std::vector<at::Tensor> RecurrentState::get(const std::vector<int64_t>& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!kept_ || kept_->batch_size() != c10::IntArrayRef(batch)) {
    kept_ = TensorDict(batch, device_);
    for (size_t i = 0; i < keys_.size(); ++i) {
      std::vector<int64_t> shape = batch;
      shape.insert(shape.end(), shapes_[i].begin(), shapes_[i].end());
      kept_->set(keys_[i], at::zeros(shape, at::TensorOptions().device(device_)));
    }
  }
  std::vector<at::Tensor> tensors;
  for (const NestedKey& key : keys_) tensors.push_back(kept_->get(key));
  return tensors;
}

void RecurrentState::supply(TensorDict& td) {
  const std::vector<at::Tensor> kept = get(td.batch_size().vec());
  for (size_t i = 0; i < keys_.size(); ++i) td.set(keys_[i], kept[i]);
}

void RecurrentState::keep(const TensorDict& out) {
  std::vector<at::Tensor> next;
  for (const NestedKey& key : next_keys_) next.push_back(out.get(key));
  keep(std::move(next));
}

void RecurrentState::keep(std::vector<at::Tensor> next) {
  if (next.size() != keys_.size() || std::any_of(next.begin(), next.end(), [](const at::Tensor& t) { return !t.defined(); })) {
    throw std::logic_error("RecurrentState::keep: expected one next-state tensor per state key");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!kept_) return;  // reset() while the call ran: the next call starts from zeros
  const c10::IntArrayRef batch = next[0].sizes().slice(0, next[0].dim() - static_cast<int64_t>(shapes_[0].size()));
  if (kept_->batch_size() != batch) {
    // A call at another batch size took the state over while this one ran (threads sharing one
    // recurrent actor): the last call to finish keeps its next state, as if it had come last.
    kept_ = TensorDict(batch.vec(), device_);
  }
  for (size_t i = 0; i < keys_.size(); ++i) kept_->set(keys_[i], std::move(next[i]));
}

void RecurrentState::reset(const at::Tensor& env_mask) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!kept_) return;
  if (env_mask.scalar_type() != at::kBool || env_mask.dim() != 1 || env_mask.size(0) != kept_->batch_size()[0]) {
    throw std::invalid_argument(
        absl::StrCat("Actor.reset: env_mask must be a bool tensor of shape [", kept_->batch_size()[0], "]"));
  }
  c10::InferenceMode inference;
  const at::Tensor mask = env_mask.to(device_);
  for (const NestedKey& key : keys_) {
    at::Tensor kept = kept_->get(key);
    std::vector<int64_t> view(kept.dim(), 1);
    view[0] = kept.size(0);
    kept_->set(key, kept.masked_fill(mask.view(view), 0));
  }
}

void RecurrentState::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  kept_.reset();
}

}  // namespace tdp::actor
