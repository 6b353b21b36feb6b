#include "sdk/actor/batching_actor.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sdk/policy/signature.h"
#include "sdk/tensordict/tensordict.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::actor {
namespace {

// "Sparse", "SparseCsr", ...: c10::toString(Layout) would convert to a whole TensorOptions.
std::string layout_name(c10::Layout layout) {
  std::ostringstream name;
  name << layout;
  return name.str();
}


using Clock = std::chrono::steady_clock;


// A request accepted by submit(), waiting for its batch.
struct Pending {
  TensorDict observation;  // the declared inputs only, batch_size [rows]
  int64_t rows;
  std::optional<nn::InteractionType> type;
  int type_id;                   // the grouping key: the type, or -1 for the modules' defaults
  std::vector<int64_t> env_ids;  // empty: stateless (no state keys, or they are in the observation)
  Clock::time_point arrival;
  std::promise<TensorDict> promise;
};

void check_options(const BatchingActorOptions& options) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument(absl::StrCat("BatchingActorOptions: ", what));
  };
  if (options.max_batch_size() < 1)
    fail(absl::StrCat("max_batch_size must be at least 1, not ", options.max_batch_size()));
  if (options.min_batch_size() < 1 || options.min_batch_size() > options.max_batch_size()) {
    fail(absl::StrCat("min_batch_size must be in [1, max_batch_size = ", options.max_batch_size(), "], not ",
                      options.min_batch_size()));
  }
  if (options.max_delay().count() < 0) fail("max_delay must not be negative");
  if (options.max_envs() < 1) fail(absl::StrCat("max_envs must be at least 1, not ", options.max_envs()));
  if (options.max_queue_rows() < options.max_batch_size()) {
    fail(absl::StrCat("max_queue_rows (", options.max_queue_rows(), ") must be at least max_batch_size (",
                      options.max_batch_size(), ")"));
  }
}

// When the oldest pending request's wait ends: saturated at the clock's end for a max_delay too
// large to add (microseconds::max() means "wait for min_batch_size").
Clock::time_point deadline_of(Clock::time_point arrival, std::chrono::microseconds max_delay) {
  const auto room = std::chrono::duration_cast<std::chrono::microseconds>(Clock::time_point::max() - arrival);
  if (max_delay >= room) return Clock::time_point::max();
  return arrival + std::chrono::duration_cast<Clock::duration>(max_delay);
}

}  // namespace

class BatchingActor::Impl {
 public:
  Impl(std::shared_ptr<Actor> wrapped, BatchingActorOptions batching_options)
      : actor(std::move(wrapped)), options(std::move(batching_options)) {
    if (actor == nullptr) throw std::invalid_argument("BatchingActor: the actor is null");
    check_options(options);
    for (const policy::TensorSignature& input : actor->signature().inputs) {
      if (!input.state) continue;
      state_inputs.push_back(input);
      const std::vector<NestedKey>& keys = actor->signature().state_keys;
      next_state_keys.push_back(
          actor->signature().next_state_keys[std::find(keys.begin(), keys.end(), input.key) - keys.begin()]);
    }
    for (const policy::TensorSignature& input : state_inputs) state_names.push_back(input.name);
    worker = std::thread([this] { run(); });
  }

  std::shared_ptr<Actor> actor;
  BatchingActorOptions options;
  std::vector<policy::TensorSignature> state_inputs;
  // Where a call writes each state input's next value (the key itself, or ("next", key)).
  std::vector<NestedKey> next_state_keys;
  std::vector<std::string> state_names;

  // ---- the queue (guarded by mutex) ----
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<Pending> queue;
  int64_t queued_rows = 0;
  bool stopping = false;
  BatchingStats counters;
  std::thread worker;
  std::once_flag joined;

  // ---- the kept recurrent state (guarded by state_mutex; the worker holds it for a whole batch) ----
  std::mutex state_mutex;
  std::unordered_map<int64_t, int64_t> slot_of;  // env id -> row of the tables
  std::vector<at::Tensor> tables;                // per state key: [capacity, shape...]
  int64_t used_slots = 0;                        // rows ever handed out
  std::vector<int64_t> free_slots;               // rows of evicted ids, zeroed, for new ids

  // Checks a request against the declared inputs; returns what joins the queue. Throws
  // std::invalid_argument naming what is wrong.
  Pending validate(const TensorDict& observation, const BatchingRequest& request) const {
    auto fail = [](const std::string& what) {
      throw std::invalid_argument(absl::StrCat("BatchingActor.submit: ", what));
    };
    if (observation.batch_dims() != 1) {
      fail(absl::StrCat("the observation has batch_size ", shape_to_string(observation.batch_size()),
                        "; a request has exactly one batch dim (its rows)"));
    }
    const int64_t rows = observation.batch_size()[0];
    if (rows < 1 || rows > options.max_batch_size()) {
      fail(absl::StrCat("the observation has ", rows,
                        " rows; a request has 1 to max_batch_size = ", options.max_batch_size()));
    }
    std::vector<std::string> given_state;
    for (const policy::TensorSignature& input : state_inputs) {
      if (observation.contains(input.key)) given_state.push_back(input.name);
    }
    const bool stateless_form = !state_inputs.empty() && given_state.size() == state_inputs.size();
    if (!given_state.empty() && !stateless_form) {
      std::vector<std::string> missing;
      for (const policy::TensorSignature& input : state_inputs) {
        if (!observation.contains(input.key)) missing.push_back(input.name);
      }
      fail(absl::StrCat("the observation carries the recurrent state ", absl::StrJoin(given_state, ", "), " but not ",
                        absl::StrJoin(missing, ", "), "; pass every state key or none (and env_ids)"));
    }
    // Checked here, not in the merged call: a tensor LibTorch cannot merge or copy would fail
    // every request merged with it.
    for (const policy::TensorSignature& input : actor->signature().inputs) {
      const at::Tensor given = observation.get(input.key, at::Tensor());
      if (!given.defined()) continue;
      if (given.layout() != at::kStrided) {
        fail(absl::StrCat("input ", input.name, " is a ", layout_name(given.layout()),
                          " tensor; expected a dense (strided) tensor"));
      }
      if (given.is_meta()) fail(absl::StrCat("input ", input.name, " is on the meta device; expected data on a real device"));
    }
    actor->signature().check_observation(observation, "BatchingActor.submit", /*state_optional=*/!stateless_form);
    // The wrapped actor's rule for non-finite inputs, here, so that a bad row fails its own request.
    if (actor->options().check_finite()) check_finite_inputs(actor->signature(), observation, "BatchingActor.submit");
    TensorDict selected({rows});
    for (const policy::TensorSignature& input : actor->signature().inputs) {
      if (input.state && !stateless_form) continue;
      if (input.optional && !observation.contains(input.key)) {
        // Every request of a merged call carries the same keys: a missing is_init is false.
        std::vector<int64_t> shape{rows};
        shape.insert(shape.end(), input.shape.begin(), input.shape.end());
        selected.set(input.key, at::zeros(shape, at::TensorOptions().dtype(input.dtype)));
        continue;
      }
      // A copy: the caller may overwrite its buffer once submit() returns.
      selected.set(input.key, observation.get(input.key).clone(at::MemoryFormat::Contiguous));
    }
    Pending pending{std::move(selected), rows, std::nullopt, -1, {}, Clock::now(), {}};
    pending.type = request.interaction_type() ? request.interaction_type() : actor->options().interaction_type();
    pending.type_id = pending.type ? static_cast<int>(*pending.type) : -1;
    if (request.env_ids()) {
      const at::Tensor& ids = *request.env_ids();
      if (ids.scalar_type() != at::kLong || ids.dim() != 1 || ids.size(0) != rows) {
        fail(absl::StrCat("env_ids must be int64 [", rows, "] (one per row), not ", c10::toString(ids.scalar_type()),
                          " ", shape_to_string(ids.sizes())));
      }
      if (!state_inputs.empty() && !stateless_form) {
        const at::Tensor host = ids.to(at::kCPU).contiguous();
        pending.env_ids.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + rows);
        std::unordered_set<int64_t> seen;
        for (int64_t id : pending.env_ids) {
          if (!seen.insert(id).second) fail(absl::StrCat("env_ids names environment ", id, " twice"));
        }
      }
    } else if (!state_inputs.empty() && !stateless_form) {
      fail(absl::StrCat("the policy is recurrent (state ", absl::StrJoin(state_names, ", "),
                        "): give env_ids for the rows, or pass the state in the observation"));
    }
    return pending;
  }

  // Which pending requests the next batch takes: the oldest request's type, in arrival order,
  // while the rows fit and no environment repeats one already taken or one of an earlier request
  // of another type (which must run first: an environment's steps keep their order). `closed`: no
  // later request can join.
  struct Plan {
    std::vector<size_t> members;
    int64_t rows = 0;
    bool closed = false;
  };
  Plan plan() const {
    Plan next;
    const int type_id = queue.front().type_id;
    std::unordered_set<int64_t> taken;
    std::unordered_set<int64_t> waiting;  // of earlier requests of other types
    for (size_t i = 0; i < queue.size(); ++i) {
      const Pending& pending = queue[i];
      if (pending.type_id != type_id) {
        waiting.insert(pending.env_ids.begin(), pending.env_ids.end());
        continue;
      }
      bool repeats = false;
      for (int64_t id : pending.env_ids) repeats = repeats || taken.count(id) > 0 || waiting.count(id) > 0;
      if (repeats || next.rows + pending.rows > options.max_batch_size()) {
        next.closed = true;
        break;
      }
      taken.insert(pending.env_ids.begin(), pending.env_ids.end());
      next.members.push_back(i);
      next.rows += pending.rows;
    }
    next.closed = next.closed || next.rows == options.max_batch_size();
    return next;
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, nothing left
      const Clock::time_point deadline = deadline_of(queue.front().arrival, options.max_delay());
      Plan next = plan();
      while (!stopping && !next.closed && next.rows < options.min_batch_size() && Clock::now() < deadline) {
        wake.wait_until(lock, deadline);
        next = plan();
      }
      std::vector<Pending> batch;
      batch.reserve(next.members.size());
      std::deque<Pending> rest;
      size_t member = 0;
      for (size_t i = 0; i < queue.size(); ++i) {
        if (member < next.members.size() && next.members[member] == i) {
          batch.push_back(std::move(queue[i]));
          ++member;
        } else {
          rest.push_back(std::move(queue[i]));
        }
      }
      queue.swap(rest);
      queued_rows -= next.rows;
      lock.unlock();
      std::vector<Pending*> members;
      for (Pending& pending : batch) members.push_back(&pending);
      Outcome outcome = run_batch(members);
      // A merged call that threw: each request again on its own, so that one bad request (a row
      // the policy cannot compute) fails alone instead of failing everyone merged with it.
      std::vector<std::exception_ptr> errors(batch.size(), outcome.error);
      std::vector<TensorDict> results = std::move(outcome.results);
      const bool retried = outcome.error && batch.size() > 1;
      if (retried) {
        results.resize(batch.size(), TensorDict(std::vector<int64_t>{0}));
        for (size_t i = 0; i < batch.size(); ++i) {
          Outcome alone = run_batch({&batch[i]});
          errors[i] = alone.error;
          if (!alone.error) results[i] = std::move(alone.results[0]);
        }
      }
      lock.lock();
      // Counted before any caller wakes, so a caller that saw its result sees it counted.
      counters.requests += static_cast<int64_t>(batch.size());
      counters.batches += 1;
      counters.failed_batches += outcome.error ? 1 : 0;
      counters.retried_requests += retried ? static_cast<int64_t>(batch.size()) : 0;
      counters.rows += next.rows;
      counters.largest_batch = std::max(counters.largest_batch, next.rows);
      lock.unlock();
      for (size_t i = 0; i < batch.size(); ++i) {
        if (errors[i]) {
          batch[i].promise.set_exception(errors[i]);
        } else {
          batch[i].promise.set_value(std::move(results[i]));
        }
      }
      lock.lock();
    }
  }

  // What one call gave: each request's rows, or the error every request of the batch gets.
  struct Outcome {
    std::vector<TensorDict> results;
    std::exception_ptr error;
  };

  // One call of the wrapped actor for `batch`. A call that throws writes no kept state.
  Outcome run_batch(const std::vector<Pending*>& batch) {
    Outcome outcome;
    try {
      c10::InferenceMode inference;
      const c10::Device device = actor->options().device();
      std::lock_guard<std::mutex> state_lock(state_mutex);
      // Recurrent state: one gather for every row that names its environment.
      std::vector<int64_t> slots;   // of those rows, in batch order
      std::vector<int64_t> at_row;  // where they sit in the batch
      int64_t offset = 0;
      for (const Pending* pending : batch) {
        for (int64_t r = 0; r < static_cast<int64_t>(pending->env_ids.size()); ++r) {
          slots.push_back(slot_for(pending->env_ids[r]));
          at_row.push_back(offset + r);
        }
        offset += pending->rows;
      }
      const bool all_kept = static_cast<int64_t>(slots.size()) == offset;
      at::Tensor slot_index;
      std::vector<at::Tensor> kept(state_inputs.size());
      if (!slots.empty()) {
        slot_index = at::tensor(slots, at::kLong).to(device);
        for (size_t k = 0; k < state_inputs.size(); ++k) kept[k] = tables[k].index_select(0, slot_index);
      }
      std::vector<TensorDict> parts;
      parts.reserve(batch.size());
      int64_t kept_offset = 0;
      for (const Pending* member : batch) {
        const Pending& pending = *member;
        TensorDict part = pending.observation.device() == device ? pending.observation : pending.observation.to(device);
        // Mixed with stateless requests (which carry their state), each kept-state request gets
        // its own rows of the gather, so every part has the same keys.
        if (!all_kept && !pending.env_ids.empty()) {
          for (size_t k = 0; k < state_inputs.size(); ++k) {
            part.set(state_inputs[k].key, kept[k].narrow(0, kept_offset, pending.rows));
          }
          kept_offset += pending.rows;
        }
        parts.push_back(std::move(part));
      }
      TensorDict merged = parts.size() == 1 ? parts[0] : TensorDict::cat(parts);
      if (all_kept && !slots.empty()) {
        for (size_t k = 0; k < state_inputs.size(); ++k) merged.set(state_inputs[k].key, kept[k]);
      }
      TensorDict out = actor->act(merged, batch.front()->type);
      if (!slots.empty()) {
        const at::Tensor row_index = all_kept ? at::Tensor() : at::tensor(at_row, at::kLong).to(device);
        for (size_t k = 0; k < state_inputs.size(); ++k) {
          const at::Tensor written = out.get(next_state_keys[k]);
          tables[k].index_copy_(0, slot_index, all_kept ? written : written.index_select(0, row_index));
        }
      }
      offset = 0;
      for (const Pending* pending : batch) {
        outcome.results.push_back(batch.size() == 1 ? out : out.narrow(0, offset, pending->rows));
        offset += pending->rows;
      }
    } catch (...) {
      outcome.results.clear();
      outcome.error = std::current_exception();
    }
    return outcome;
  }

  // The row of the state tables for an environment: zeros for one seen first. Needs state_mutex
  // and InferenceMode (the tables are inference tensors, written in place). Throws past max_envs.
  int64_t slot_for(int64_t env_id) {
    auto found = slot_of.find(env_id);
    if (found != slot_of.end()) return found->second;
    if (static_cast<int64_t>(slot_of.size()) >= options.max_envs()) {
      throw std::invalid_argument(absl::StrCat(
          "BatchingActor: environment ", env_id, " is new, but the state of max_envs = ", options.max_envs(),
          " environments is kept already; reset(env_ids) the environments that ended to evict them"));
    }
    if (!free_slots.empty()) {  // zeroed when evicted
      const int64_t slot = free_slots.back();
      free_slots.pop_back();
      slot_of.emplace(env_id, slot);
      return slot;
    }
    const int64_t capacity = tables.empty() ? 0 : tables[0].size(0);
    if (used_slots == capacity) {
      const int64_t grown = std::max<int64_t>(64, 2 * capacity);
      if (tables.empty()) tables.resize(state_inputs.size());
      for (size_t k = 0; k < state_inputs.size(); ++k) {
        std::vector<int64_t> shape = {grown - capacity};
        shape.insert(shape.end(), state_inputs[k].shape.begin(), state_inputs[k].shape.end());
        at::Tensor zeros =
            at::zeros(shape, at::TensorOptions().dtype(state_inputs[k].dtype).device(actor->options().device()));
        tables[k] = capacity == 0 ? zeros : at::cat({tables[k], zeros});
      }
    }
    slot_of.emplace(env_id, used_slots);
    return used_slots++;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    std::call_once(joined, [this] {
      if (worker.joinable()) worker.join();
    });
  }
};

absl::StatusOr<std::unique_ptr<BatchingActor>> BatchingActor::load(const std::string& spec_path,
                                                                   ActorOptions actor_options,
                                                                   BatchingActorOptions options) {
  auto actor = Actor::load(spec_path, std::move(actor_options));
  if (!actor.ok()) return actor.status();
  try {
    return std::make_unique<BatchingActor>(std::shared_ptr<Actor>(std::move(*actor)), std::move(options));
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(spec_path, ": ", error.what()));
  }
}

BatchingActor::BatchingActor(std::shared_ptr<Actor> actor, BatchingActorOptions options)
    : impl_(std::make_unique<Impl>(std::move(actor), std::move(options))) {}

BatchingActor::~BatchingActor() { shutdown(); }

std::future<TensorDict> BatchingActor::submit(TensorDict observation, BatchingRequest request) {
  Impl& self = *impl_;
  auto failed = [&](std::exception_ptr error) {
    std::promise<TensorDict> promise;
    promise.set_exception(std::move(error));
    std::lock_guard<std::mutex> lock(self.mutex);
    ++self.counters.rejected;
    return promise.get_future();
  };
  std::optional<Pending> pending;
  try {
    pending.emplace(self.validate(observation, request));
  } catch (...) {
    return failed(std::current_exception());
  }
  std::future<TensorDict> future = pending->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(self.mutex);
    if (self.stopping) {
      pending->promise.set_exception(std::make_exception_ptr(
          std::runtime_error("BatchingActor.submit: the batcher is shut down; no request is accepted")));
      ++self.counters.rejected;
      return future;
    }
    if (self.queued_rows + pending->rows > self.options.max_queue_rows()) {
      pending->promise.set_exception(std::make_exception_ptr(std::runtime_error(
          absl::StrCat("BatchingActor.submit: the queue is full (", self.queued_rows, " rows pending, ", pending->rows,
                       " more would pass max_queue_rows = ", self.options.max_queue_rows(), ")"))));
      ++self.counters.rejected;
      return future;
    }
    self.queued_rows += pending->rows;
    self.queue.push_back(*std::move(pending));
  }
  self.wake.notify_one();
  return future;
}

TensorDict BatchingActor::act(const TensorDict& observation, BatchingRequest request) {
  return submit(observation, std::move(request)).get();
}

void BatchingActor::reset(const at::Tensor& env_ids) {
  Impl& self = *impl_;
  if (env_ids.scalar_type() != at::kLong || env_ids.dim() != 1) {
    throw std::invalid_argument(absl::StrCat("BatchingActor.reset: env_ids must be int64 [k], not ",
                                             c10::toString(env_ids.scalar_type()), " ", shape_to_string(env_ids.sizes())));
  }
  const at::Tensor host = env_ids.to(at::kCPU).contiguous();
  c10::InferenceMode inference;
  std::lock_guard<std::mutex> lock(self.state_mutex);
  std::vector<int64_t> slots;
  for (int64_t i = 0; i < host.size(0); ++i) {
    auto found = self.slot_of.find(host.data_ptr<int64_t>()[i]);
    if (found == self.slot_of.end()) continue;
    slots.push_back(found->second);
    self.slot_of.erase(found);  // evicted: the row goes to the next new id, zeroed here
  }
  if (slots.empty()) return;
  const at::Tensor index = at::tensor(slots, at::kLong).to(self.actor->options().device());
  for (at::Tensor& table : self.tables) table.index_fill_(0, index, 0);
  self.free_slots.insert(self.free_slots.end(), slots.begin(), slots.end());
}

void BatchingActor::reset() {
  std::lock_guard<std::mutex> lock(impl_->state_mutex);
  impl_->slot_of.clear();
  impl_->tables.clear();
  impl_->used_slots = 0;
  impl_->free_slots.clear();
}

void BatchingActor::shutdown() { impl_->stop(); }

BatchingStats BatchingActor::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  BatchingStats stats = impl_->counters;
  stats.max_batch_size = impl_->options.max_batch_size();
  return stats;
}

const BatchingActorOptions& BatchingActor::options() const { return impl_->options; }
Actor& BatchingActor::actor() const { return *impl_->actor; }

}  // namespace tdp::actor
