#include "sdk/actor/remote_actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include "inference/grpc_predict_v2.grpc.pb.h"
#include "sdk/policy/keys.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::actor {
namespace {

using Clock = std::chrono::steady_clock;

struct DatatypeName {
  at::ScalarType dtype;
  const char* name;
};

// The protocol's fixed-size datatypes. BYTES (variable-length strings) has no tensor dtype.
constexpr DatatypeName kDatatypes[] = {
    {at::kBool, "BOOL"},    {at::kByte, "UINT8"},   {at::kUInt16, "UINT16"}, {at::kUInt32, "UINT32"},
    {at::kUInt64, "UINT64"}, {at::kChar, "INT8"},   {at::kShort, "INT16"},   {at::kInt, "INT32"},
    {at::kLong, "INT64"},   {at::kHalf, "FP16"},    {at::kFloat, "FP32"},    {at::kDouble, "FP64"},
    {at::kBFloat16, "BF16"},
};


absl::Status from_grpc(const grpc::Status& status) {
  // gRPC's and Abseil's status codes are the same numbers (both are google.rpc.Code).
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Where the flattened [rows, ...] tensors of one call come from and go to.
struct Batch {
  std::vector<int64_t> batch_size;  // the observation's
  int64_t rows = 1;                 // their product
};

// Elements of `contents` for `datatype`, copied into a new [numel] tensor of `dtype`; an error
// when the field the datatype selects holds another number of elements.
absl::StatusOr<at::Tensor> from_typed_contents(const inference::InferTensorContents& contents,
                                               const std::string& datatype, at::ScalarType dtype, int64_t numel) {
  auto copy = [&](const auto& field) -> absl::StatusOr<at::Tensor> {
    if (static_cast<int64_t>(field.size()) != numel) {
      return absl::InvalidArgumentError(absl::StrCat("its typed contents hold ", field.size(), " elements; expected ",
                                                     numel, " (", datatype, ")"));
    }
    using Value = typename std::decay_t<decltype(field)>::value_type;
    at::Tensor wide = at::empty({numel}, c10::CppTypeToScalarType<Value>::value);
    Value* out = static_cast<Value*>(wide.data_ptr());
    for (int64_t i = 0; i < numel; ++i) out[i] = field.Get(static_cast<int>(i));
    return wide.to(dtype);
  };
  switch (dtype) {
    case at::kBool:
      return copy(contents.bool_contents());
    case at::kChar:
    case at::kShort:
    case at::kInt:
      return copy(contents.int_contents());
    case at::kLong:
      return copy(contents.int64_contents());
    case at::kByte:
    case at::kUInt16:
    case at::kUInt32:
      return copy(contents.uint_contents());
    case at::kUInt64:
      return copy(contents.uint64_contents());
    case at::kFloat:
      return copy(contents.fp32_contents());
    case at::kDouble:
      return copy(contents.fp64_contents());
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("it has no raw contents, and ", datatype, " has no typed contents field"));
  }
}

}  // namespace

RemoteCallError::RemoteCallError(absl::Status status)
    : std::runtime_error(status.ToString()), status_(std::move(status)) {}

absl::StatusOr<std::string> oip_datatype(at::ScalarType dtype) {
  for (const DatatypeName& entry : kDatatypes) {
    if (entry.dtype == dtype) return std::string(entry.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", c10::toString(dtype),
                                                 " has no Open Inference Protocol datatype"));
}

absl::StatusOr<at::ScalarType> oip_scalar_type(const std::string& datatype) {
  for (const DatatypeName& entry : kDatatypes) {
    if (datatype == entry.name) return entry.dtype;
  }
  std::vector<std::string> names;
  for (const DatatypeName& entry : kDatatypes) names.emplace_back(entry.name);
  return absl::InvalidArgumentError(absl::StrCat("datatype \"", datatype, "\" is not one of ",
                                                 absl::StrJoin(names, ", ")));
}

class RemoteActor::Impl {
 public:
  Impl(std::shared_ptr<grpc::Channel> channel, std::string target, std::string model_name, RemoteActorOptions options)
      : channel_(std::move(channel)),
        stub_(inference::GRPCInferenceService::NewStub(channel_)),
        target_(std::move(target)),
        model_name_(std::move(model_name)),
        options_(std::move(options)) {
    if (options_.seed()) {
      generator_ = at::make_generator<at::CPUGeneratorImpl>(*options_.seed());
    }
  }

  std::string who() const { return absl::StrCat("RemoteActor(model \"", model_name_, "\" at ", target_, ")"); }

  absl::Status check_options() const {
    if (model_name_.empty()) return absl::InvalidArgumentError(absl::StrCat(who(), ": the model name is empty"));
    if (options_.deadline().count() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(who(), ": RemoteActorOptions.deadline must be positive, not ",
                                                     options_.deadline().count(), " ms"));
    }
    if (options_.initial_backoff().count() <= 0 || options_.max_backoff() < options_.initial_backoff()) {
      return absl::InvalidArgumentError(absl::StrCat(
          who(), ": RemoteActorOptions needs 0 < initial_backoff <= max_backoff; got ",
          options_.initial_backoff().count(), " ms and ", options_.max_backoff().count(), " ms"));
    }
    if (options_.max_message_bytes() < 1024 || options_.max_message_bytes() > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(who(), ": RemoteActorOptions.max_message_bytes must be in [1024, ",
                                                     std::numeric_limits<int>::max(), "], not ",
                                                     options_.max_message_bytes()));
    }
    return absl::OkStatus();
  }

  // Runs `rpc` (one attempt, given a context) until it succeeds, fails with another code than
  // UNAVAILABLE, or the deadline leaves no time for another attempt.
  template <typename Rpc>
  absl::Status call(const char* name, Rpc rpc) const {
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + options_.deadline();
    std::chrono::milliseconds backoff = options_.initial_backoff();
    for (int attempt = 1;; ++attempt) {
      grpc::ClientContext context;
      // gRPC takes system_clock deadlines only; the retry loop keeps to the monotonic clock.
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - Clock::now()));
      grpc::Status status = rpc(context);
      if (status.ok()) return absl::OkStatus();
      const Clock::time_point now = Clock::now();
      if (status.error_code() == grpc::StatusCode::UNAVAILABLE && now + backoff < deadline) {
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, options_.max_backoff());
        continue;
      }
      const double seconds = std::chrono::duration<double>(now - start).count();
      absl::Status failed = from_grpc(status);
      return absl::Status(failed.code(),
                          absl::StrFormat("%s: %s failed: %s: %s (%d attempt%s in %.3f s; deadline %d ms)", who(), name,
                                          absl::StatusCodeToString(failed.code()), failed.message(), attempt,
                                          attempt == 1 ? "" : "s", seconds, options_.deadline().count()));
    }
  }

  absl::Status read_metadata() {
    inference::ModelMetadataRequest request;
    request.set_name(model_name_);
    request.set_version(options_.model_version());
    inference::ModelMetadataResponse response;
    absl::Status status = call("ModelMetadata", [&](grpc::ClientContext& context) {
      return stub_->ModelMetadata(&context, request, &response);
    });
    if (!status.ok()) return status;
    auto parse = [&](const auto& tensors, const char* what, std::vector<RemoteTensorInfo>& out) -> absl::Status {
      for (const auto& tensor : tensors) {
        auto fail = [&](const std::string& why) {
          return absl::FailedPreconditionError(
              absl::StrCat(who(), ": the model's metadata declares ", what, " \"", tensor.name(), "\" ", why));
        };
        RemoteTensorInfo info;
        info.name = tensor.name();
        absl::StatusOr<NestedKey> key = policy::parse_key(tensor.name());
        if (!key.ok()) return fail(absl::StrCat("with a name that is not a key: ", key.status().message()));
        info.key = *std::move(key);
        info.datatype = tensor.datatype();
        absl::StatusOr<at::ScalarType> dtype = oip_scalar_type(tensor.datatype());
        if (!dtype.ok()) return fail(absl::StrCat("with a datatype this client cannot carry: ", dtype.status().message()));
        info.dtype = *dtype;
        info.shape.assign(tensor.shape().begin(), tensor.shape().end());
        if (info.shape.empty() || info.shape[0] != -1) {
          return fail(absl::StrCat("with shape ", shape_to_string(info.shape),
                                   "; expected a leading batch dim of any size (-1)"));
        }
        for (size_t i = 1; i < info.shape.size(); ++i) {
          if (info.shape[i] < -1) return fail(absl::StrCat("with shape ", shape_to_string(info.shape)));
        }
        for (const RemoteTensorInfo& other : out) {
          if (other.name == info.name) return fail("twice");
        }
        out.push_back(std::move(info));
      }
      return absl::OkStatus();
    };
    if (absl::Status s = parse(response.inputs(), "input", inputs_); !s.ok()) return s;
    if (absl::Status s = parse(response.outputs(), "output", outputs_); !s.ok()) return s;
    if (inputs_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(who(), ": the model's metadata declares no inputs"));
    }
    return absl::OkStatus();
  }

  std::string expected(const RemoteTensorInfo& input) const {
    std::vector<std::string> dims;
    for (size_t i = 1; i < input.shape.size(); ++i) {
      dims.push_back(input.shape[i] == -1 ? "any" : std::to_string(input.shape[i]));
    }
    return absl::StrCat(input.datatype, " (", c10::toString(input.dtype), ") of shape batch_size + [",
                        absl::StrJoin(dims, ", "), "]");
  }

  // Checks `observation` against the metadata (throws std::invalid_argument naming the key) and
  // fills the request's inputs with its tensors flattened to [rows, ...].
  Batch encode(const TensorDict& observation, inference::ModelInferRequest& request) const {
    Batch batch;
    batch.batch_size = observation.batch_size().vec();
    for (int64_t size : batch.batch_size) batch.rows *= size;
    for (const RemoteTensorInfo& input : inputs_) {
      if (!observation.contains(input.key) || observation.is_tensordict(input.key)) {
        throw std::invalid_argument(absl::StrCat(who(), ": input \"", input.name, "\" is ",
                                                 observation.contains(input.key) ? "a nested TensorDict" : "missing",
                                                 "; the model expects ", expected(input), " (the observation has ",
                                                 keys_to_string(observation.keys(true, true)), ")"));
      }
      at::Tensor value = observation.get(input.key);
      if (value.layout() != at::kStrided || value.is_meta()) {
        throw std::invalid_argument(absl::StrCat(who(), ": input \"", input.name,
                                                 "\" is not a dense tensor with data; the model expects ",
                                                 expected(input)));
      }
      if (value.scalar_type() != input.dtype) {
        throw std::invalid_argument(absl::StrCat(who(), ": input \"", input.name, "\" has dtype ",
                                                 c10::toString(value.scalar_type()), "; the model expects ",
                                                 expected(input)));
      }
      const size_t batch_dims = batch.batch_size.size();
      bool fits = static_cast<size_t>(value.dim()) == batch_dims + input.shape.size() - 1;
      for (size_t i = 1; fits && i < input.shape.size(); ++i) {
        fits = input.shape[i] == -1 || value.size(batch_dims + i - 1) == input.shape[i];
      }
      if (!fits) {
        throw std::invalid_argument(absl::StrCat(who(), ": input \"", input.name, "\" has shape ",
                                                 shape_to_string(value.sizes()), " with batch_size ",
                                                 shape_to_string(batch.batch_size), "; the model expects ",
                                                 expected(input)));
      }
      std::vector<int64_t> flat{batch.rows};
      flat.insert(flat.end(), value.sizes().begin() + batch_dims, value.sizes().end());
      at::Tensor contiguous = value.to(at::kCPU).reshape(flat).contiguous();
      auto* tensor = request.add_inputs();
      tensor->set_name(input.name);
      tensor->set_datatype(input.datatype);
      for (int64_t size : flat) tensor->add_shape(size);
      request.add_raw_input_contents(static_cast<const char*>(contiguous.data_ptr()), contiguous.nbytes());
    }
    return batch;
  }

  // The response's outputs as a TensorDict of the observation's batch_size; RemoteCallError when it
  // does not match the metadata or the request.
  TensorDict decode(const inference::ModelInferResponse& response, const Batch& batch) const {
    auto fail = [&](const std::string& name, const std::string& why) -> RemoteCallError {
      return RemoteCallError(absl::DataLossError(
          absl::StrCat(who(), ": ModelInfer returned output \"", name, "\" that ", why)));
    };
    const bool raw = response.raw_output_contents_size() > 0;
    if (raw && response.raw_output_contents_size() != response.outputs_size()) {
      throw RemoteCallError(absl::DataLossError(
          absl::StrCat(who(), ": ModelInfer returned ", response.outputs_size(), " outputs and ",
                       response.raw_output_contents_size(), " raw contents; expected one per output")));
    }
    TensorDict result(batch.batch_size);
    for (int i = 0; i < response.outputs_size(); ++i) {
      const auto& output = response.outputs(i);
      const RemoteTensorInfo* declared = nullptr;
      for (const RemoteTensorInfo& info : outputs_) {
        if (info.name == output.name()) declared = &info;
      }
      if (!outputs_.empty() && !declared) throw fail(output.name(), "the model's metadata does not declare");
      absl::StatusOr<at::ScalarType> dtype = oip_scalar_type(output.datatype());
      if (!dtype.ok()) throw fail(output.name(), std::string(dtype.status().message()));
      if (declared && *dtype != declared->dtype) {
        throw fail(output.name(), absl::StrCat("is ", output.datatype(), "; the metadata declares ", declared->datatype));
      }
      std::vector<int64_t> shape(output.shape().begin(), output.shape().end());
      if (shape.empty() || shape[0] != batch.rows) {
        throw fail(output.name(), absl::StrCat("has shape ", shape_to_string(shape), "; expected ", batch.rows,
                                               " rows first (the request's)"));
      }
      int64_t numel = 1;
      for (int64_t size : shape) {
        if (size < 0 || (size > 0 && numel > std::numeric_limits<int64_t>::max() / size)) {
          throw fail(output.name(), absl::StrCat("has shape ", shape_to_string(shape)));
        }
        numel *= size;
      }
      at::Tensor flat;
      if (raw) {
        const std::string& bytes = response.raw_output_contents(i);
        const int64_t expected_bytes = numel * static_cast<int64_t>(c10::elementSize(*dtype));
        if (static_cast<int64_t>(bytes.size()) != expected_bytes) {
          throw fail(output.name(), absl::StrCat("has ", bytes.size(), " raw bytes; expected ", expected_bytes, " for ",
                                                 output.datatype(), " ", shape_to_string(shape)));
        }
        flat = at::empty({numel}, *dtype);
        if (numel > 0) std::memcpy(flat.data_ptr(), bytes.data(), bytes.size());
      } else {
        absl::StatusOr<at::Tensor> typed = from_typed_contents(output.contents(), output.datatype(), *dtype, numel);
        if (!typed.ok()) throw fail(output.name(), std::string(typed.status().message()));
        flat = *std::move(typed);
      }
      std::vector<int64_t> restored = batch.batch_size;
      restored.insert(restored.end(), shape.begin() + 1, shape.end());
      absl::StatusOr<NestedKey> key = policy::parse_key(output.name());
      if (!key.ok()) throw fail(output.name(), absl::StrCat("is not a key: ", key.status().message()));
      result.set(*key, flat.reshape(restored));
    }
    for (const RemoteTensorInfo& info : outputs_) {
      if (!result.contains(info.key)) throw fail(info.name, "is missing from the response (the metadata declares it)");
    }
    return result;
  }

  TensorDict act(const TensorDict& observation, std::optional<nn::InteractionType> type,
                 std::optional<at::Generator> generator) const {
    inference::ModelInferRequest request;
    request.set_model_name(model_name_);
    request.set_model_version(options_.model_version());
    const Batch batch = encode(observation, request);
    if (!type) type = options_.interaction_type();
    if (type) (*request.mutable_parameters())["interaction_type"].set_string_param(std::string(nn::to_string(*type)));
    if (std::optional<int64_t> seed = draw_seed(generator)) {
      (*request.mutable_parameters())["seed"].set_int64_param(*seed);
    }
    inference::ModelInferResponse response;
    absl::Status status =
        call("ModelInfer", [&](grpc::ClientContext& context) { return stub_->ModelInfer(&context, request, &response); });
    if (!status.ok()) throw RemoteCallError(std::move(status));
    return decode(response, batch);
  }

  std::optional<int64_t> draw_seed(std::optional<at::Generator>& generator) const {
    // randint takes the generator's own lock: concurrent calls draw distinct seeds.
    auto draw = [](at::Generator& from) {
      return at::randint(std::numeric_limits<int64_t>::max(), {1}, from, at::kLong).item<int64_t>();
    };
    if (generator) return draw(*generator);
    if (generator_) {
      at::Generator own = *generator_;
      return draw(own);
    }
    return std::nullopt;
  }

  template <typename Request, typename Response, typename Method>
  absl::StatusOr<bool> health(const char* name, Request request, Method method, bool (Response::*field)() const) const {
    Response response;
    absl::Status status =
        call(name, [&](grpc::ClientContext& context) { return ((*stub_).*method)(&context, request, &response); });
    if (!status.ok()) return status;
    return (response.*field)();
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::string target_;
  std::string model_name_;
  RemoteActorOptions options_;
  std::optional<at::Generator> generator_;
  std::vector<RemoteTensorInfo> inputs_;
  std::vector<RemoteTensorInfo> outputs_;
};

absl::StatusOr<std::unique_ptr<RemoteActor>> RemoteActor::connect(const std::string& target,
                                                                   const std::string& model_name,
                                                                   RemoteActorOptions options) {
  if (target.empty()) return absl::InvalidArgumentError("RemoteActor: the target (host:port) is empty");
  grpc::ChannelArguments arguments;
  const int max_bytes = static_cast<int>(std::clamp<int64_t>(options.max_message_bytes(), 0, std::numeric_limits<int>::max()));
  arguments.SetMaxReceiveMessageSize(max_bytes);
  arguments.SetMaxSendMessageSize(max_bytes);
  // A restarted server is found again within max_backoff instead of gRPC's default (up to 120 s).
  const int backoff_ms = static_cast<int>(options.max_backoff().count());
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::max(1, static_cast<int>(options.initial_backoff().count())));
  // After every address failed, this gRPC's pick_first waits for the resolver's next answer before
  // it connects again, and the resolver answers at most every 30 s by default (5 s seen here).
  arguments.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, std::max(1, backoff_ms));
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the connection attempt's timeout,
  // and a few ms cut off the TCP and HTTP/2 handshakes on a loaded machine.
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, std::max(1, backoff_ms));
  auto impl = std::make_unique<Impl>(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments), target, model_name,
      std::move(options));
  if (absl::Status status = impl->check_options(); !status.ok()) return status;
  if (absl::Status status = impl->read_metadata(); !status.ok()) return status;
  return std::unique_ptr<RemoteActor>(new RemoteActor(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<RemoteActor>> RemoteActor::connect(std::shared_ptr<grpc::Channel> channel,
                                                                   const std::string& model_name,
                                                                   RemoteActorOptions options) {
  if (!channel) return absl::InvalidArgumentError("RemoteActor: the channel is null");
  auto impl = std::make_unique<Impl>(std::move(channel), "a given channel", model_name, std::move(options));
  if (absl::Status status = impl->check_options(); !status.ok()) return status;
  if (absl::Status status = impl->read_metadata(); !status.ok()) return status;
  return std::unique_ptr<RemoteActor>(new RemoteActor(std::move(impl)));
}

RemoteActor::RemoteActor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteActor::~RemoteActor() = default;

TensorDict RemoteActor::act(const TensorDict& observation) { return impl_->act(observation, std::nullopt, std::nullopt); }

TensorDict RemoteActor::act(const TensorDict& observation, std::optional<nn::InteractionType> type,
                            std::optional<at::Generator> generator) {
  return impl_->act(observation, type, std::move(generator));
}

TensorDict RemoteActor::act(const std::vector<std::pair<NestedKey, at::Tensor>>& observation) {
  // The batch dims: those of the first declared input given, beyond its declared per-env rank.
  std::optional<std::vector<int64_t>> batch_size;
  for (const auto& [key, value] : observation) {
    for (const RemoteTensorInfo& input : impl_->inputs_) {
      const int64_t env_rank = static_cast<int64_t>(input.shape.size()) - 1;
      if (input.key == key && !batch_size && value.dim() >= env_rank) {
        batch_size = value.sizes().slice(0, value.dim() - env_rank).vec();
      }
    }
  }
  if (!batch_size) {
    throw std::invalid_argument(absl::StrCat(impl_->who(), ": input \"", impl_->inputs_[0].name,
                                             "\" is missing; the model expects ", impl_->expected(impl_->inputs_[0])));
  }
  TensorDict td(*batch_size);
  for (const auto& [key, value] : observation) {
    try {
      td.set(key, value);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(absl::StrCat(impl_->who(), ": input \"", policy::key_string(key), "\": ", error.what()));
    }
  }
  return act(td);
}

absl::StatusOr<bool> RemoteActor::server_live() const {
  return impl_->health<inference::ServerLiveRequest, inference::ServerLiveResponse>(
      "ServerLive", {}, &inference::GRPCInferenceService::Stub::ServerLive, &inference::ServerLiveResponse::live);
}

absl::StatusOr<bool> RemoteActor::server_ready() const {
  return impl_->health<inference::ServerReadyRequest, inference::ServerReadyResponse>(
      "ServerReady", {}, &inference::GRPCInferenceService::Stub::ServerReady, &inference::ServerReadyResponse::ready);
}

absl::StatusOr<bool> RemoteActor::model_ready() const {
  inference::ModelReadyRequest request;
  request.set_name(impl_->model_name_);
  request.set_version(impl_->options_.model_version());
  return impl_->health<inference::ModelReadyRequest, inference::ModelReadyResponse>(
      "ModelReady", request, &inference::GRPCInferenceService::Stub::ModelReady, &inference::ModelReadyResponse::ready);
}

const std::vector<RemoteTensorInfo>& RemoteActor::inputs() const { return impl_->inputs_; }
const std::vector<RemoteTensorInfo>& RemoteActor::outputs() const { return impl_->outputs_; }
const std::string& RemoteActor::model_name() const { return impl_->model_name_; }
const std::string& RemoteActor::target() const { return impl_->target_; }
const RemoteActorOptions& RemoteActor::options() const { return impl_->options_; }

}  // namespace tdp::actor
