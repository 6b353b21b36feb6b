// Collector: a BatchedEnv and an Actor stepped together in C++, handing back batches of
// transitions laid out as TorchRL's collectors lay them out, for a trainer (C++, or Python through
// tdpolicy.Collector) to consume. Environments reset themselves when an episode ends; recurrent
// state is carried per environment and zeroed at each reset.
//
//   std::shared_ptr<tdp::env::BatchedEnv> env = *tdp::env::make_env("cartpole", tdp::env::EnvOptions(8));
//   std::shared_ptr<tdp::actor::Actor> actor = *tdp::actor::Actor::load("policies/cartpole_categorical.pbtxt");
//   tdp::env::Collector collector(env, actor, tdp::env::CollectorOptions(/*frames_per_batch=*/1024));
//   while (std::optional<tdp::TensorDict> batch = collector.next())   // batch_size [8, 128]
//     train(*batch);                          // (*batch)["next", "reward"]: [8, 128, 1]
//
// Each batch has batch_size [N, T] (N environments, T = frames_per_batch / N steps), as TorchRL's
// SyncDataCollector gives it over a batched environment:
// - the observation entries the actor read, and everything the actor returned (the action,
//   "sample_log_prob" or the per-part log-probs of a composite policy, ...), at the root;
// - "done", "terminated", "truncated" [N, T, 1] bool at the root (false: every step starts from a
//   live state, as after TorchRL's auto-reset);
// - ("next", "observation"): the observation the step reached, before any reset (so a truncated
//   episode bootstraps from it); ("next", "reward") [N, T, 1] float; ("next", "done"),
//   ("next", "terminated"), ("next", "truncated") [N, T, 1] bool;
// - ("collector", "traj_ids") [N, T] int64: environment i starts with trajectory id i, and every
//   reset takes the next unused id (in environment order), so ids grow along a row;
// - for a recurrent policy, its state keys at the root (what the step read: zeros at a
//   trajectory's start) and at ("next", key) (what it wrote), and "is_init" [N, T, 1] when the
//   policy reads one (true on a trajectory's first step).
// The step after the last of a batch is the first of the next batch: episodes run across batches.
// A batch's tensors are allocated at its first step and each step copies its entries into them;
// they are ordinary tensors (not inference tensors), contiguous, and the caller's alone.
//
// The actor may run on a GPU (it moves each observation there); its outputs come back to the CPU,
// where the environments and the batches live.
//
// Threads: next() collects on the calling thread, or, with prefetch, on the collector's own
// thread while the caller works on the batch just returned. update_actor() runs a function on the
// actor when no step is in flight; which batch sees the change is documented there. A Collector
// is driven from one thread at a time; the env and actor it was given must not be used elsewhere
// while it runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <torch/arg.h>

#include "sdk/actor/actor.h"
#include "sdk/env/batched_env.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::env {

struct CollectorOptions {
  explicit CollectorOptions(int64_t frames_per_batch) : frames_per_batch_(frames_per_batch) {}

  // Frames (environment steps, summed over the N environments) per batch; a multiple of N.
  TORCH_ARG(int64_t, frames_per_batch);
  // next() returns ceil(total_frames / frames_per_batch) batches, then nothing; -1: no end.
  TORCH_ARG(int64_t, total_frames) = -1;
  // The environments' first reset(seed).
  TORCH_ARG(uint64_t, seed) = 0;
  // How the actor acts while collecting; empty: the actor's own interaction type.
  TORCH_ARG(std::optional<nn::InteractionType>, interaction_type);
  // Collect the next batch on the collector's thread while the caller uses the current one.
  TORCH_ARG(bool, prefetch) = false;
};

class Collector {
 public:
  // Throws std::invalid_argument naming the option or key: frames_per_batch not a positive
  // multiple of num_envs, total_frames 0 or below -1, an input of the actor that the environment
  // does not observe (other than recurrent state and is_init), an action the actor does not write.
  Collector(std::shared_ptr<BatchedEnv> env, std::shared_ptr<actor::Actor> actor, CollectorOptions options);
  // Stops the collector's thread (see shutdown()).
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // The next batch, or nothing once total_frames are collected (or after shutdown()). An error
  // from the environment or the actor is rethrown here.
  std::optional<TensorDict> next();

  // Runs `fn` on the actor (a weights update: Actor::refresh_parameters after copying weights
  // into actor.module(), ...) while no step is in flight. Without prefetch, the next batch
  // next() returns is collected with the change. With prefetch, the batch being collected in
  // the background when update_actor is called (the one the next next() returns) is finished
  // with the old weights first, and the batch after it sees the change: the same one-batch lag
  // as TorchRL's asynchronous collectors.
  void update_actor(const std::function<void(actor::Actor&)>& fn);

  // Reseeds the environments and starts new episodes in all of them (new trajectory ids,
  // recurrent state zeroed). With prefetch, a batch collected in the background is dropped.
  void set_seed(uint64_t seed);

  // Stops the collector's thread and ends iteration: next() returns nothing afterwards. Idempotent.
  void shutdown();

  // Batches next() returns in all (-1 without total_frames), frames returned so far.
  int64_t num_batches() const;
  int64_t frames() const { return frames_; }
  const CollectorOptions& options() const { return options_; }
  const BatchedEnv& env() const { return *env_; }
  const actor::Actor& actor() const { return *actor_; }

 private:
  TensorDict collect();
  void start_episodes(uint64_t seed);
  void worker_loop();
  // Waits for the background batch in flight, if any (lock held on mutex_).
  void wait_idle(std::unique_lock<std::mutex>& lock);

  std::shared_ptr<BatchedEnv> env_;
  std::shared_ptr<actor::Actor> actor_;
  CollectorOptions options_;
  int64_t steps_per_batch_;

  // What the actor reads from the environment's observation, and where its state lives.
  std::vector<NestedKey> observation_keys_;
  std::vector<NestedKey> next_observation_keys_;  // ("next", key) for each of them
  std::vector<NestedKey> state_keys_;
  std::vector<NestedKey> next_state_keys_;        // where the actor writes the next state
  std::vector<NestedKey> next_state_write_keys_;  // ("next", state key): where the batch holds it
  std::vector<at::Tensor> state_zeros_;  // [N, ...] per state key
  std::optional<NestedKey> is_init_key_;
  std::vector<int64_t> is_init_shape_;
  at::ScalarType is_init_dtype_ = at::kBool;

  // The rollout's position: the current observation, state, trajectory ids, and whether each
  // environment's next step starts a trajectory.
  TensorDict observation_;
  std::vector<at::Tensor> state_;
  at::Tensor traj_ids_;
  at::Tensor is_init_;
  int64_t next_traj_id_ = 0;

  int64_t batches_returned_ = 0;
  int64_t frames_ = 0;
  bool shut_down_ = false;

  // Prefetch: the collector's thread and what it hands over.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread worker_;
  bool requested_ = false;   // a batch is wanted
  bool busy_ = false;        // the worker is collecting
  bool stopping_ = false;
  std::optional<TensorDict> ready_;
  std::exception_ptr error_;
};

}  // namespace tdp::env
