#include "sdk/env/collector.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace tdp::env {
namespace {

bool contains(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::vector<NestedKey> keys_of(const std::vector<EntrySpec>& specs) {
  std::vector<NestedKey> keys;
  for (const EntrySpec& spec : specs) keys.push_back(spec.key);
  return keys;
}

}  // namespace

Collector::Collector(std::shared_ptr<BatchedEnv> env, std::shared_ptr<actor::Actor> actor, CollectorOptions options)
    : env_(std::move(env)), actor_(std::move(actor)), options_(std::move(options)) {
  if (env_ == nullptr) throw std::invalid_argument("Collector: env is null");
  if (actor_ == nullptr) throw std::invalid_argument("Collector: actor is null");
  const int64_t n = env_->num_envs();
  if (options_.frames_per_batch() <= 0 || options_.frames_per_batch() % n != 0) {
    throw std::invalid_argument(absl::StrCat("Collector: frames_per_batch=", options_.frames_per_batch(),
                                             " must be a positive multiple of the number of environments (", n,
                                             " in ", env_->name(), ")"));
  }
  if (options_.total_frames() == 0 || options_.total_frames() < -1) {
    throw std::invalid_argument(absl::StrCat("Collector: total_frames=", options_.total_frames(),
                                             ": expected a positive count, or -1 for no end"));
  }
  steps_per_batch_ = options_.frames_per_batch() / n;

  const policy::Signature& signature = actor_->signature();
  const std::vector<EntrySpec> observation_spec = env_->observation_spec();
  const std::vector<NestedKey> observed = keys_of(observation_spec);
  state_keys_ = signature.state_keys;
  next_state_keys_ = signature.next_state_keys;
  for (const policy::TensorSignature& input : signature.inputs) {
    if (input.state) {
      std::vector<int64_t> shape{n};
      shape.insert(shape.end(), input.shape.begin(), input.shape.end());
      state_zeros_.push_back(at::zeros(shape, at::TensorOptions().dtype(input.dtype)));
    } else if (contains(observed, input.key)) {
      const EntrySpec& entry = observation_spec[std::find(observed.begin(), observed.end(), input.key) - observed.begin()];
      if (entry.shape != input.shape) {
        throw std::invalid_argument(absl::StrCat("Collector: the actor reads ", input.name, " of shape [",
                                                 absl::StrJoin(input.shape, ", "), "] per environment but ",
                                                 env_->name(), " observes [", absl::StrJoin(entry.shape, ", "), "]"));
      }
      observation_keys_.push_back(input.key);
    } else if (input.optional) {
      // A recurrent module's is_init: true on each trajectory's first step (TorchRL's InitTracker).
      is_init_key_ = input.key;
      is_init_shape_ = input.shape;
      is_init_dtype_ = input.dtype;
    } else {
      throw std::invalid_argument(absl::StrCat("Collector: the actor reads ", input.name, " but ", env_->name(),
                                               " observes only ", keys_to_string(observed)));
    }
  }
  const std::vector<NestedKey> written = signature.output_keys();
  for (const EntrySpec& action : env_->action_spec()) {
    if (!contains(written, action.key)) {
      throw std::invalid_argument(absl::StrCat("Collector: ", env_->name(), " reads the action ", action.key.to_string(),
                                               " but the actor writes only ", keys_to_string(written)));
    }
  }
  start_episodes(options_.seed());
  if (options_.prefetch()) worker_ = std::thread([this] { worker_loop(); });
}

Collector::~Collector() { shutdown(); }

void Collector::start_episodes(uint64_t seed) {
  observation_ = env_->reset(seed);
  const int64_t n = env_->num_envs();
  traj_ids_ = at::arange(next_traj_id_, next_traj_id_ + n, at::kLong);
  next_traj_id_ += n;
  state_ = state_zeros_;
  is_init_ = at::ones({n}, at::kBool);
}

TensorDict Collector::collect() {
  const int64_t n = env_->num_envs();
  std::vector<TensorDict> steps;
  steps.reserve(steps_per_batch_);
  const at::Tensor live = at::zeros({n, 1}, at::kBool);
  const std::optional<nn::InteractionType> type =
      options_.interaction_type() ? options_.interaction_type() : actor_->options().interaction_type();
  for (int64_t t = 0; t < steps_per_batch_; ++t) {
    TensorDict inputs({n});
    for (const NestedKey& key : observation_keys_) inputs.set(key, observation_.get(key));
    for (size_t i = 0; i < state_keys_.size(); ++i) inputs.set(state_keys_[i], state_[i]);
    if (is_init_key_) {
      std::vector<int64_t> shape{n};
      shape.insert(shape.end(), is_init_shape_.begin(), is_init_shape_.end());
      at::Tensor flag = is_init_;
      for (size_t d = 0; d < is_init_shape_.size(); ++d) flag = flag.unsqueeze(-1);
      inputs.set(*is_init_key_, flag.expand(shape).to(is_init_dtype_).contiguous());
    }
    TensorDict out = actor_->act(inputs, type);
    // An actor on a GPU answers there; the simulators and the batch live on the CPU.
    if (std::optional<c10::Device> device = out.device(); device && !device->is_cpu()) out = out.to(at::kCPU);
    // The next state is kept apart from the step's root entries: at ("next", state key).
    std::vector<at::Tensor> next_state;
    for (const NestedKey& key : next_state_keys_) next_state.push_back(out.pop(key));

    TensorDict result = env_->step(out);
    at::Tensor terminated = result.get("terminated");
    at::Tensor truncated = result.get("truncated");
    at::Tensor done = terminated.logical_or(truncated);

    TensorDict step = inputs;  // the observation, state and is_init the actor read
    step.update(out);
    step.set("done", live).set("terminated", live).set("truncated", live);
    step.set({"collector", "traj_ids"}, traj_ids_);
    TensorDict next({n});
    for (const NestedKey& key : observation_keys_) {
      next.set(key, key == NestedKey("observation") ? result.get("final_observation") : result.get(key));
    }
    next.set("reward", result.get("reward")).set("done", done).set("terminated", terminated).set("truncated", truncated);
    for (size_t i = 0; i < state_keys_.size(); ++i) next.set(state_keys_[i], next_state[i]);
    step.set("next", next);
    steps.push_back(std::move(step));

    // Advance: the reset environments start new trajectories, with zero state.
    observation_ = result;
    const at::Tensor reset = done.view({n});
    is_init_ = reset;
    if (reset.any().item<bool>()) {
      const int64_t count = reset.sum().item<int64_t>();
      at::Tensor fresh = at::arange(next_traj_id_, next_traj_id_ + count, at::kLong);
      next_traj_id_ += count;
      traj_ids_ = traj_ids_.masked_scatter(reset, fresh);
      for (size_t i = 0; i < state_.size(); ++i) {
        std::vector<int64_t> shape(next_state[i].dim(), 1);
        shape[0] = n;
        state_[i] = at::where(reset.view(shape), state_zeros_[i], next_state[i]);
      }
    } else {
      for (size_t i = 0; i < state_.size(); ++i) state_[i] = next_state[i];
    }
  }
  return TensorDict::stack(steps, /*dim=*/1);
}

std::optional<TensorDict> Collector::next() {
  if (shut_down_ || (num_batches() >= 0 && batches_returned_ >= num_batches())) return std::nullopt;
  std::optional<TensorDict> batch;
  if (!options_.prefetch()) {
    batch = collect();
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!ready_ && !busy_) {
      requested_ = true;
      changed_.notify_all();
    }
    changed_.wait(lock, [&] { return ready_.has_value() || error_ != nullptr || stopping_; });
    if (error_) {
      std::exception_ptr error = std::exchange(error_, nullptr);
      std::rethrow_exception(error);
    }
    if (!ready_) return std::nullopt;
    batch = std::exchange(ready_, std::nullopt);
    // The next one is collected while the caller works on this one, unless this was the last.
    if (num_batches() < 0 || batches_returned_ + 1 < num_batches()) {
      requested_ = true;
      changed_.notify_all();
    }
  }
  ++batches_returned_;
  frames_ += options_.frames_per_batch();
  return batch;
}

void Collector::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return requested_ || stopping_; });
    if (stopping_) return;
    requested_ = false;
    busy_ = true;
    lock.unlock();
    std::optional<TensorDict> batch;
    std::exception_ptr error;
    try {
      batch = collect();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (error) error_ = error; else ready_ = std::move(batch);
    changed_.notify_all();
  }
}

void Collector::wait_idle(std::unique_lock<std::mutex>& lock) {
  // A requested batch counts as in flight even before the worker picks it up: which batch an
  // update reaches must not depend on thread scheduling.
  changed_.wait(lock, [&] { return !busy_ && !requested_; });
}

void Collector::update_actor(const std::function<void(actor::Actor&)>& fn) {
  if (!options_.prefetch()) {
    fn(*actor_);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  // The worker starts a batch only under this lock: holding it past the wait keeps it idle.
  wait_idle(lock);
  fn(*actor_);
}

void Collector::set_seed(uint64_t seed) {
  if (!options_.prefetch()) {
    start_episodes(seed);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  wait_idle(lock);
  const bool was_ready = ready_.has_value();
  ready_.reset();
  error_ = nullptr;
  start_episodes(seed);
  if (was_ready) {
    requested_ = true;
    changed_.notify_all();
  }
}

void Collector::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

int64_t Collector::num_batches() const {
  if (options_.total_frames() < 0) return -1;
  return (options_.total_frames() + options_.frames_per_batch() - 1) / options_.frames_per_batch();
}

}  // namespace tdp::env
