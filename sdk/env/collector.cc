#include "sdk/env/collector.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace tdp::env {
namespace {

// The keys every step reads or writes, made once.
const NestedKey kObservation("observation");
const NestedKey kFinalObservation("final_observation");
const NestedKey kReward("reward");
const NestedKey kDone("done");
const NestedKey kTerminated("terminated");
const NestedKey kTruncated("truncated");
const NestedKey kTrajIds{"collector", "traj_ids"};
const NestedKey kNextReward{"next", "reward"};
const NestedKey kNextDone{"next", "done"};
const NestedKey kNextTerminated{"next", "terminated"};
const NestedKey kNextTruncated{"next", "truncated"};

bool contains(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::vector<NestedKey> keys_of(const std::vector<EntrySpec>& specs) {
  std::vector<NestedKey> keys;
  for (const EntrySpec& spec : specs) keys.push_back(spec.key);
  return keys;
}

// A batch being collected: each entry's [N, T, ...] tensor, allocated at the step that first
// writes it, into which every step copies its [N, ...] value. Steps write their entries in the
// same order, so the entry a write goes to is found by position (and checked by key). A
// TensorDict per step, stacked at the end, would cost more than a fast simulator's step.
class BatchBuilder {
 public:
  BatchBuilder(int64_t n, int64_t steps) : n_(n), steps_(steps) {}

  void begin_step(int64_t t) {
    t_ = t;
    next_ = 0;
  }

  // `value` ([N, ...]) as this step's entry `key`.
  void write(const NestedKey& key, const at::Tensor& value) {
    Column& column =
        column_for(key, value.sizes().slice(std::min<int64_t>(1, value.dim())), value.scalar_type(), /*zeros=*/false);
    if (value.dim() < 1 || value.size(0) != n_ || value.sizes().slice(1) != column.data.sizes().slice(2)) {
      std::vector<int64_t> expected{n_};
      expected.insert(expected.end(), column.data.sizes().begin() + 2, column.data.sizes().end());
      throw std::runtime_error(absl::StrCat("Collector: step ", t_, " gave ", key.to_string(), " of shape ",
                                            shape_to_string(value.sizes()), "; expected ", shape_to_string(expected),
                                            " (", n_, " environments, each entry's shape fixed at the first step)"));
    }
    if (value.device().is_cpu() && value.scalar_type() == column.data.scalar_type() && value.is_contiguous()) {
      const char* from = static_cast<const char*>(value.const_data_ptr());
      char* to = static_cast<char*>(column.data.data_ptr());
      const int64_t row = column.row_bytes;
      for (int64_t i = 0; i < n_; ++i) std::memcpy(to + (i * steps_ + t_) * row, from + i * row, row);
    } else {
      column.data.select(1, t_).copy_(value);
    }
  }

  // An entry that is false at every step: allocated as zeros, never written.
  void write_false(const NestedKey& key, c10::IntArrayRef shape) { column_for(key, shape, at::kBool, /*zeros=*/true); }

  TensorDict finish() {
    TensorDict batch({n_, steps_});
    for (Column& column : columns_) batch.set(column.key, std::move(column.data));
    columns_.clear();
    return batch;
  }

 private:
  struct Column {
    NestedKey key;
    at::Tensor data;  // [N, T, ...]
    int64_t row_bytes;
  };

  Column& column_for(const NestedKey& key, c10::IntArrayRef shape, at::ScalarType dtype, bool zeros) {
    if (t_ == 0) {
      std::vector<int64_t> sizes{n_, steps_};
      sizes.insert(sizes.end(), shape.begin(), shape.end());
      const at::TensorOptions options = at::TensorOptions().dtype(dtype);
      at::Tensor data = zeros ? at::zeros(sizes, options) : at::empty(sizes, options);
      columns_.push_back({key, data, static_cast<int64_t>(data.nbytes()) / (n_ * steps_)});
    } else if (next_ >= columns_.size() || columns_[next_].key != key) {
      throw std::runtime_error(absl::StrCat("Collector: step ", t_, " gave ", key.to_string(), " where step 0 gave ",
                                            next_ < columns_.size() ? columns_[next_].key.to_string() : "nothing",
                                            "; the actor and the environment must write the same entries every step"));
    }
    return columns_[next_++];
  }

  int64_t n_;
  int64_t steps_;
  int64_t t_ = 0;
  size_t next_ = 0;
  std::vector<Column> columns_;
};

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
  for (const NestedKey& key : state_keys_) next_state_write_keys_.push_back(NestedKey{"next", key});
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
      next_observation_keys_.push_back(NestedKey{"next", input.key});
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
  BatchBuilder batch(n, steps_per_batch_);
  const std::optional<nn::InteractionType> type =
      options_.interaction_type() ? options_.interaction_type() : actor_->options().interaction_type();
  TensorDict inputs({n});  // the actor's inputs, overwritten every step
  for (int64_t t = 0; t < steps_per_batch_; ++t) {
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
    // BatchedEnv::step gives the three flags as fresh bool [N, 1] tensors.
    const at::Tensor done = result.get(kDone);
    const bool* ended = done.const_data_ptr<bool>();
    const int64_t ended_count = std::count(ended, ended + n, true);

    // The step's entries, in the order of TorchRL's batches: what the actor read and wrote, the
    // root flags (false: every step starts from a live state), the trajectory ids, then "next".
    batch.begin_step(t);
    for (const auto& [key, entry] : inputs.items(/*include_nested=*/true, /*leaves_only=*/true)) {
      batch.write(key, entry.tensor());
    }
    for (const auto& [key, entry] : out.items(/*include_nested=*/true, /*leaves_only=*/true)) {
      batch.write(key, entry.tensor());
    }
    for (const NestedKey& flag : {kDone, kTerminated, kTruncated}) batch.write_false(flag, {1});
    batch.write(kTrajIds, traj_ids_);
    for (size_t i = 0; i < observation_keys_.size(); ++i) {
      batch.write(next_observation_keys_[i], result.get(observation_keys_[i] == kObservation ? kFinalObservation
                                                                                              : observation_keys_[i]));
    }
    batch.write(kNextReward, result.get(kReward));
    batch.write(kNextDone, done);
    batch.write(kNextTerminated, result.get(kTerminated));
    batch.write(kNextTruncated, result.get(kTruncated));
    for (size_t i = 0; i < state_keys_.size(); ++i) batch.write(next_state_write_keys_[i], next_state[i]);

    // Advance: the reset environments start new trajectories, with zero state.
    observation_ = result;
    if (ended_count > 0) {
      const at::Tensor reset = done.view({n});
      at::Tensor fresh = at::arange(next_traj_id_, next_traj_id_ + ended_count, at::kLong);
      next_traj_id_ += ended_count;
      traj_ids_ = traj_ids_.masked_scatter(reset, fresh);
      for (size_t i = 0; i < state_.size(); ++i) {
        std::vector<int64_t> shape(next_state[i].dim(), 1);
        shape[0] = n;
        state_[i] = at::where(reset.view(shape), state_zeros_[i], next_state[i]);
      }
    } else {
      for (size_t i = 0; i < state_.size(); ++i) state_[i] = next_state[i];
    }
    if (is_init_key_) is_init_ = done.view({n});
  }
  return batch.finish();
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
