// RemoteActor: an Actor whose policy runs on an inference server. It speaks the Open Inference
// Protocol v2 over gRPC (KServe's model server, tdpolicy.serving, Triton, ...), so a simulator on
// one machine acts with a policy served on another through the same act() as Actor and
// BatchingActor: a TensorDict of observations in, a TensorDict of actions out.
//
//   auto actor = tdp::actor::RemoteActor::connect("policy-host:8081", "cartpole",
//                                                 tdp::actor::RemoteActorOptions().seed(0));
//   if (!actor.ok()) return fail(actor.status());             // unreachable, unknown model, ...
//   tdp::TensorDict action = (*actor)->act(env.reset(0));      // exploring, on the server
//   tdp::TensorDict greedy = (*actor)->act(obs, tdp::nn::InteractionType::kDeterministic);
//
// The wire: connect() reads the model's metadata once (ModelMetadata: input and output names,
// datatypes and shapes, -1 for any size) and act() checks each observation against it before
// anything is sent. Tensor names are the keys as specs write them ("goal/position" for
// ("goal", "position")). The observation's batch dims are flattened into the protocol's one
// leading dim and restored on the outputs; inputs travel as raw little-endian bytes
// (raw_input_contents); outputs are read from raw_output_contents, or from the typed contents
// where a server sends those. Per call, two request parameters: `interaction_type` (the
// InteractionType's lower-case name: "random", "deterministic", "mode", "mean", "median"; left
// out when neither the call nor the options name one, so the server's default applies) and
// `seed` (int64; drawn from the call's generator, else from the actor's own generator when
// options.seed is set, else left out and the server uses its own random stream). A server that
// ignores the seed gives random actions that are not reproducible.
//
// Faults: every call has a deadline (options.deadline, retries included). A call that fails with
// UNAVAILABLE (no server listening, a server restarting, a dropped connection) is retried with
// exponential backoff (initial_backoff doubling up to max_backoff) while the deadline allows:
// a policy call changes nothing on the server, so running it twice is harmless. Any other status
// is returned at once.
//
// Errors follow Actor's rule: connect() returns absl::Status (the gRPC status code and message,
// the target and model); act() throws std::invalid_argument naming the key, what the model's
// metadata expects and what was given, and RemoteCallError (a std::runtime_error carrying the
// absl::Status) for a failed call or a response that does not match the metadata.
//
// Recurrent policies: the server keeps no state per client; a model whose metadata declares the
// state keys as inputs gets them from the observation (the stateless form), and the next state
// comes back among the outputs. Thread safety: act() and the health calls may be called from
// many threads at once (one gRPC channel, shared). Outputs are CPU tensors.
//
// This header includes no gRPC or protobuf headers; link //sdk/actor:remote_actor.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <c10/core/ScalarType.h>
#include <torch/arg.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace tdp::actor {

struct RemoteActorOptions {
  // The model version to ask for; empty: the server's choice.
  TORCH_ARG(std::string, model_version);
  // How act() takes actions unless a call says otherwise (as ActorOptions). Empty: no
  // interaction_type parameter is sent, and the server's default applies.
  TORCH_ARG(std::optional<nn::InteractionType>, interaction_type) = nn::InteractionType::kRandom;
  // Seeds the actor's own generator, from which each call without a generator of its own draws
  // the `seed` it sends. Empty: calls without a generator send no seed.
  TORCH_ARG(std::optional<uint64_t>, seed);
  // The most one call (connect's metadata read, act, a health call) may take, retries included.
  TORCH_ARG(std::chrono::milliseconds, deadline) = std::chrono::milliseconds(5000);
  // The first wait before retrying after UNAVAILABLE; it doubles up to max_backoff. max_backoff
  // also bounds how long the channel waits before it tries to reconnect to a server that went
  // away (gRPC's default is up to two minutes).
  TORCH_ARG(std::chrono::milliseconds, initial_backoff) = std::chrono::milliseconds(20);
  TORCH_ARG(std::chrono::milliseconds, max_backoff) = std::chrono::milliseconds(500);
  // The largest request or response accepted, in bytes (gRPC's default receive limit is 4 MiB).
  TORCH_ARG(int64_t, max_message_bytes) = int64_t{64} << 20;
};

// A call that failed: the server's (or gRPC's) status code and message, with the call, target,
// model and key where one is concerned. What act() throws for everything but a bad observation.
class RemoteCallError : public std::runtime_error {
 public:
  explicit RemoteCallError(absl::Status status);
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

// One input or output of the served model, as its metadata declares it.
struct RemoteTensorInfo {
  std::string name;             // the protocol's tensor name: "goal/position"
  NestedKey key;                // ("goal", "position")
  std::string datatype;         // the protocol's: "FP32", "INT64", "BOOL", ...
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;   // with the leading batch dim; -1 where any size goes
};

class RemoteActor {
 public:
  // Opens a channel to `target` ("host:port", "unix:/path", any gRPC target), reads the model's
  // metadata and checks it (one batch dim first, datatypes this client can carry). An error names
  // the target, the model, the call and the gRPC status.
  static absl::StatusOr<std::unique_ptr<RemoteActor>> connect(const std::string& target,
                                                              const std::string& model_name,
                                                              RemoteActorOptions options = {});
  // The same over a channel the caller made (its own credentials, arguments, an in-process one).
  static absl::StatusOr<std::unique_ptr<RemoteActor>> connect(std::shared_ptr<grpc::Channel> channel,
                                                              const std::string& model_name,
                                                              RemoteActorOptions options = {});
  ~RemoteActor();
  RemoteActor(const RemoteActor&) = delete;
  RemoteActor& operator=(const RemoteActor&) = delete;

  // The model's outputs for the batch in `observation`, with its batch_size. Every input the
  // metadata declares must be present with batch_size + the declared per-environment shape and
  // the declared dtype; other entries are not sent.
  TensorDict act(const TensorDict& observation);
  // `type` for this call only (empty: options().interaction_type()); `generator` (a CPU one)
  // gives the seed sent with this call.
  TensorDict act(const TensorDict& observation, std::optional<nn::InteractionType> type,
                 std::optional<at::Generator> generator = std::nullopt);
  // Named tensors instead of a TensorDict; the batch dims come from the declared input shapes.
  TensorDict act(const std::vector<std::pair<NestedKey, at::Tensor>>& observation);

  // The protocol's health calls, each within the deadline (retrying UNAVAILABLE as act() does).
  absl::StatusOr<bool> server_live() const;
  absl::StatusOr<bool> server_ready() const;
  absl::StatusOr<bool> model_ready() const;

  const std::vector<RemoteTensorInfo>& inputs() const;
  const std::vector<RemoteTensorInfo>& outputs() const;
  const std::string& model_name() const;
  const std::string& target() const;
  const RemoteActorOptions& options() const;

 private:
  class Impl;
  explicit RemoteActor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The protocol's datatype name for a dtype ("FP32" for float) and back; an error for a dtype the
// protocol has no fixed-size name for (complex, BYTES, ...).
absl::StatusOr<std::string> oip_datatype(at::ScalarType dtype);
absl::StatusOr<at::ScalarType> oip_scalar_type(const std::string& datatype);

}  // namespace tdp::actor
