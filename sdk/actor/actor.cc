#include "sdk/actor/actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <absl/strings/str_cat.h>
#include <c10/core/InferenceMode.h>

#include <mutex>
#include <set>
#include <stdexcept>

#include "sdk/probabilistic/generator_scope.h"
#include "sdk/spec/keys.h"

namespace tdp::actor {
namespace {

// The actor's own random stream lives on its device: CUDA sampling kernels only take a CUDA
// generator. A CUDA device needs the CUDA backend linked in (--config=cuda links libtorch_cuda)
// and a visible GPU; without them this is a load error, not a failure at the first act().
at::Generator make_generator(const c10::Device& device, uint64_t seed) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
  if (device.is_cuda() && !at::hasCUDA()) {
    throw std::invalid_argument(absl::StrCat(
        "device ", device.str(), " requested, but ",
        at::detail::getCUDAHooks().isBuilt() ? "no CUDA GPU is visible"
                                             : "this binary was built without CUDA (build it with --config=cuda)"));
  }
  at::Generator generator = at::globalContext().defaultGenerator(device).clone();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(seed);
  return generator;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Actor>> Actor::Load(const std::string& spec_path, ActorOptions options) {
  spec::LoadOptions load;
  load.run_self_tests = options.run_self_tests();
  auto policy = spec::load_policy(spec_path, load);
  if (!policy.ok()) return policy.status();
  try {
    return std::make_unique<Actor>(std::move(*policy), options);
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(spec_path, ": ", error.what()));
  }
}

Actor::Actor(spec::Policy policy, ActorOptions options)
    : policy_(std::move(policy)), options_(options), generator_(make_generator(options.device(), options.seed())) {
  policy_.module->to(options_.device());
  policy_.module->eval();
  for (const std::string& key : policy_.spec.output_keys()) output_keys_.push_back(*spec::parse_key(key));
  // State: declared inputs that some module overwrites on purpose.
  std::set<std::string> overwritten;
  std::function<void(const tdpolicy::Module&)> collect = [&](const tdpolicy::Module& module) {
    for (const std::string& key : module.overwrite_keys()) overwritten.insert(key);
    for (const auto& child : module.sequential().modules()) collect(child);
    for (const auto& child : module.probabilistic_sequential().modules()) collect(child);
  };
  collect(policy_.spec.module());
  for (const auto& input : policy_.spec.inputs()) {
    if (overwritten.count(input.key())) {
      state_keys_.push_back(*spec::parse_key(input.key()));
      state_shapes_.emplace_back(input.shape().begin(), input.shape().end());
    }
  }
}

TensorDict Actor::act(const TensorDict& observation, nn::InteractionType type, std::optional<at::Generator> generator) {
  c10::InferenceMode inference;
  nn::InteractionTypeGuard scope(type, /*thread_local_only=*/true);
  nn::GeneratorGuard stream(generator.value_or(generator_));
  // to() builds a new TensorDict (sharing tensors already on the device), as clone does: one
  // copy of the structure, not two, when the observation does not carry the actor's device.
  TensorDict td = observation.device() == options_.device() ? observation.clone(/*deep=*/false)
                                                            : observation.to(options_.device());
  bool uses_kept_state = false;
  if (!state_keys_.empty() && !td.contains(state_keys_[0])) {
    uses_kept_state = true;
    std::lock_guard<std::mutex> lock(state_mutex_);
    const std::vector<int64_t> batch = td.batch_size().vec();
    if (!state_ || state_->batch_size() != c10::IntArrayRef(batch)) {
      state_ = TensorDict(batch, options_.device());
      for (size_t i = 0; i < state_keys_.size(); ++i) {
        std::vector<int64_t> shape = batch;
        shape.insert(shape.end(), state_shapes_[i].begin(), state_shapes_[i].end());
        state_->set(state_keys_[i], at::zeros(shape, at::TensorOptions().device(options_.device())));
      }
    }
    for (const NestedKey& key : state_keys_) td.set(key, state_->get(key));
  }
  TensorDict out = policy_.module->forward(td);
  std::vector<NestedKey> keys = output_keys_;
  for (const NestedKey& key : state_keys_) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  TensorDict result = out.select(keys, /*strict=*/false);
  if (uses_kept_state) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    for (const NestedKey& key : state_keys_) state_->set(key, out.get(key));
  }
  return result;
}

TensorDict Actor::act(const std::vector<std::pair<NestedKey, at::Tensor>>& observation) {
  std::vector<int64_t> batch;
  bool found = false;
  for (const auto& input : policy_.spec.inputs()) {
    NestedKey key = *spec::parse_key(input.key());
    for (const auto& [name, tensor] : observation) {
      if (name == key && !found) {
        const int64_t dims = tensor.dim() - input.shape_size();
        if (dims < 0) {
          throw std::invalid_argument(absl::StrCat("Actor.act: input ", key.to_string(), " has ", tensor.dim(),
                                                   " dims but its declared shape has ", input.shape_size()));
        }
        batch.assign(tensor.sizes().begin(), tensor.sizes().begin() + dims);
        found = true;
      }
    }
  }
  TensorDict td(batch);
  for (const auto& [key, tensor] : observation) td.set(key, tensor);
  return act(td, options_.interaction_type());
}

void Actor::reset(const at::Tensor& env_mask) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (!state_) return;
  if (env_mask.scalar_type() != at::kBool || env_mask.dim() != 1 || env_mask.size(0) != state_->batch_size()[0]) {
    throw std::invalid_argument(absl::StrCat("Actor.reset: env_mask must be a bool tensor of shape [",
                                             state_->batch_size()[0], "]"));
  }
  c10::InferenceMode inference;
  at::Tensor mask = env_mask.to(options_.device());
  for (const NestedKey& key : state_keys_) {
    at::Tensor kept = state_->get(key);
    std::vector<int64_t> view(kept.dim(), 1);
    view[0] = kept.size(0);
    state_->set(key, kept.masked_fill(mask.view(view), 0));
  }
}

void Actor::reset() {
  std::lock_guard<std::mutex> lock(state_mutex_);
  state_.reset();
}

}  // namespace tdp::actor
