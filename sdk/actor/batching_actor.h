// BatchingActor: one policy shared by many simulator threads, each stepping one or a few
// environments. Threads submit observations and get futures; a worker thread merges pending
// requests into one batch, runs it once through a wrapped Actor (which on a GPU pads the batch to
// its CUDA-graph buckets itself) and hands each caller its own rows back. Merging turns many
// batch-1 calls into few large ones, which is what a GPU (or a slow LibTorch call) needs.
//
//   auto batcher = tdp::actor::BatchingActor::load("policies/cartpole_categorical.pbtxt");
//   if (!batcher.ok()) return fail(batcher.status());
//   std::future<tdp::TensorDict> next = (*batcher)->submit(env.reset(seed));   // from any thread
//   tdp::TensorDict action = next.get();                                       // this thread's rows
//   auto greedy = (*batcher)->act(obs, BatchingRequest().interaction_type(InteractionType::kDeterministic));
//
// Merge rule (TorchRL's InferenceServer: max_batch_size 64, min_batch_size 1, max_delay 10 ms):
// the oldest pending request decides which interaction type runs next; the pending requests of
// that type are taken in arrival order while their rows fit in max_batch_size. The batch runs as
// soon as it holds min_batch_size rows, or no later request could join it (the next one does
// not fit, or names an environment that the batch or an earlier pending request of another type
// already names: an environment's steps keep their order), or max_delay has passed since the
// oldest pending request arrived. With min_batch_size 1 a batch runs at once, and the requests
// that arrive while it runs are merged into the next one; a larger min_batch_size trades up to
// max_delay of latency for fuller batches. Requests of different interaction types never share a
// call (a request without a type takes the wrapped actor's at submit()).
//
// Recurrent policies (the signature's state keys): the wrapped Actor keeps state per row
// of its own batch, which means nothing across merged requests. So the batcher keeps the state
// per environment id: a request names its rows' environments (BatchingRequest::env_ids), the
// batcher puts each row's kept state (zeros for an id seen first or reset) into the merged
// observation, runs the actor in its stateless form, and keeps the state it writes. A request
// that carries every state key itself is stateless and needs no ids (its state is used as given,
// the kept state neither read nor written). An environment id pending twice is serialized: the
// later request waits for a later batch, so it sees the state the earlier one wrote. Memory:
// one row of state per kept id, at most max_envs; reset(ids) evicts ids, reset() forgets them all.
//
// Errors: submit() checks a request against the spec's declared inputs before it joins a queue
// (one batch dim, every input key, its per-environment shape and dtype, a dense (strided) tensor
// on a real device (not meta), env_ids, the row and queue limits); a bad request fails only its
// own future, with std::invalid_argument naming the key and what was expected and given
// (std::runtime_error for a full queue or a shut-down batcher). When a merged call still throws,
// its requests are run again one by one, so only the requests that fail alone get an error; the
// batcher goes on. Declared inputs only are merged: other entries of an observation are ignored.
// submit() copies the declared inputs it keeps: the caller may reuse its buffers as soon as
// submit() returns. Results are views of the merged call's outputs (each caller's own rows).
//
// Thread safety: submit(), act(), reset() and stats() may be called from any thread. One worker
// thread runs the calls; it sleeps on a condition variable while nothing is due. shutdown() (and
// the destructor) runs the requests already accepted, then stops; later submits fail at once.
// reset() waits for a batch in flight, so it never falls between reading and writing its state.
#pragma once

#include <ATen/core/Tensor.h>
#include <absl/status/statusor.h>
#include <torch/arg.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "sdk/actor/actor.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::actor {

struct BatchingActorOptions {
  // The most rows one call of the wrapped actor gets; a request with more rows is an error.
  TORCH_ARG(int64_t, max_batch_size) = 64;
  // Rows a batch waits for (at most max_delay) before it runs; 1..max_batch_size.
  TORCH_ARG(int64_t, min_batch_size) = 1;
  // The longest the oldest pending request waits for others to join it.
  TORCH_ARG(std::chrono::microseconds, max_delay) = std::chrono::microseconds(10000);
  // Rows accepted but not yet run; beyond, submit() fails its future. At least max_batch_size.
  TORCH_ARG(int64_t, max_queue_rows) = 4096;
  // Recurrent policies: the most environments whose state is kept at once (one row of state
  // each). A request naming a new environment past it fails (naming the bound) until reset(ids)
  // evicts environments that ended. At least 1.
  TORCH_ARG(int64_t, max_envs) = int64_t{1} << 20;
};

// What one request asks besides its observation.
struct BatchingRequest {
  // For this request; empty: the wrapped actor's interaction type.
  TORCH_ARG(std::optional<nn::InteractionType>, interaction_type);
  // int64 [n]: the environment of each of the request's n rows, distinct (recurrent policies;
  // ignored for others).
  TORCH_ARG(std::optional<at::Tensor>, env_ids);
};

struct BatchingStats {
  int64_t requests = 0;        // requests that joined a batch (run, succeeded or not)
  int64_t rejected = 0;        // requests failed at submit()
  int64_t batches = 0;         // calls of the wrapped actor
  int64_t failed_batches = 0;  // merged calls that threw (their requests were then run one by one)
  int64_t retried_requests = 0;  // requests run alone after their merged call threw
  int64_t rows = 0;            // rows run
  int64_t largest_batch = 0;   // most rows in one call
  int64_t max_batch_size = 0;  // the option, for the fill below
  // rows / (batches * max_batch_size): 1 when every call was full.
  double mean_batch_fill() const {
    return batches == 0 ? 0.0 : static_cast<double>(rows) / (static_cast<double>(batches) * max_batch_size);
  }
};

class BatchingActor {
 public:
  // Actor::load, then a batcher over it. Bad options are an InvalidArgument status.
  static absl::StatusOr<std::unique_ptr<BatchingActor>> load(const std::string& spec_path,
                                                             ActorOptions actor_options = {},
                                                             BatchingActorOptions options = {});
  // Starts the worker. Throws std::invalid_argument for a null actor or bad options. The actor
  // may still be called directly; calls through here use its own generator (no per-call one).
  explicit BatchingActor(std::shared_ptr<Actor> actor, BatchingActorOptions options = {});
  // shutdown().
  ~BatchingActor();
  BatchingActor(const BatchingActor&) = delete;
  BatchingActor& operator=(const BatchingActor&) = delete;

  // `observation` has batch_size [n], 1 <= n <= max_batch_size. The future holds the wrapped
  // actor's outputs for these n rows, or the error (see the header comment).
  std::future<TensorDict> submit(TensorDict observation, BatchingRequest request = {});
  // submit(...).get(): blocks; rethrows the request's error.
  TensorDict act(const TensorDict& observation, BatchingRequest request = {});

  // Evicts these environments' kept state (int64 [k]; ids not kept are ignored): their next
  // request starts from zeros, and their rows count no more against max_envs.
  void reset(const at::Tensor& env_ids);
  // Forgets every environment's kept state.
  void reset();

  // Runs what was accepted, then stops the worker. Idempotent; later submits fail.
  void shutdown();

  BatchingStats stats() const;
  const BatchingActorOptions& options() const;
  Actor& actor() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tdp::actor
