// The C API over tdp::actor::Actor (tdp_c.h). Every exported function runs its body inside
// guarded(), which turns any exception (std::bad_alloc, c10::Error, std::invalid_argument, ...)
// into a tdp_status and the thread's last-error message, so nothing C++ crosses the boundary.
#include "sdk/c/tdp_c.h"

#include <ATen/ATen.h>
#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <c10/core/Device.h>
#include <c10/core/InferenceMode.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/actor/batching_actor.h"
#include "sdk/distributions/distribution.h"
#include "sdk/nn/errors.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/signature.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"
#include "tdpolicy/spec.pb.h"

struct tdp_actor_options {
  tdp::actor::ActorOptions options;
};

struct tdp_actor {
  // An input or output: what the metadata queries return and what act() checks against.
  struct Slot {
    std::string name;  // the spec's form, "a/b"
    tdp::NestedKey key;
    tdp_dtype dtype;
    at::ScalarType scalar;
    std::vector<int64_t> shape;  // per environment
    size_t per_env = 1;          // product of shape
    // An input the caller may leave out: a recurrent state the actor keeps, or an is_init
    // (false when absent).
    bool may_omit = false;
  };
  // Shared with the batcher of a tdp_batching_actor, which owns this tdp_actor.
  std::shared_ptr<tdp::actor::Actor> actor;
  std::string name;
  std::string version;
  std::vector<Slot> inputs;
  std::vector<Slot> outputs;
};

struct tdp_batching_actor {
  std::unique_ptr<tdp_actor> actor;
  // Declared after the actor: destroyed (its worker stopped) before it.
  std::unique_ptr<tdp::actor::BatchingActor> batcher;
};

namespace {

// The message of this thread's last call. `fixed` is used when the message itself cannot be
// allocated (out of memory), so tdp_last_error() always has something to say.
thread_local std::string last_message;
thread_local const char* fixed_message = nullptr;

// Thrown inside guarded() bodies for errors the wrapper itself finds.
struct CallError {
  tdp_status status;
  std::string message;
};

[[noreturn]] void fail(tdp_status status, std::string message) { throw CallError{status, std::move(message)}; }

tdp_status record(tdp_status status, const char* function, const char* what) noexcept {
  try {
    last_message = absl::StrCat(function, ": ", what);
    fixed_message = nullptr;
  } catch (...) {
    fixed_message = "tdpolicy: out of memory while recording an error message";
  }
  return status;
}

tdp_status from_absl(const absl::Status& status) {
  if (tdp::policy::is_out_of_memory(status)) return TDP_OUT_OF_MEMORY;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return TDP_OK;
    case absl::StatusCode::kInvalidArgument:
      return TDP_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound:
      return TDP_NOT_FOUND;
    case absl::StatusCode::kFailedPrecondition:
      return TDP_FAILED_PRECONDITION;
    case absl::StatusCode::kOutOfRange:
      return TDP_OUT_OF_RANGE;
    case absl::StatusCode::kResourceExhausted:
      return TDP_RESOURCE_EXHAUSTED;
    case absl::StatusCode::kUnimplemented:
      return TDP_UNIMPLEMENTED;
    case absl::StatusCode::kPermissionDenied:
      return TDP_PERMISSION_DENIED;
    default:
      return TDP_INTERNAL;
  }
}

template <typename Body>
tdp_status guarded(const char* function, Body&& body) noexcept {
  last_message.clear();
  fixed_message = nullptr;
  try {
    absl::Status status = body();
    if (status.ok()) return TDP_OK;
    return record(from_absl(status), function, std::string(status.message()).c_str());
  } catch (const CallError& error) {
    return record(error.status, function, error.message.c_str());
  } catch (const std::bad_alloc&) {
    fixed_message = "tdpolicy: out of memory";
    return TDP_OUT_OF_MEMORY;
  } catch (const c10::OutOfMemoryError& error) {
    return record(TDP_OUT_OF_MEMORY, function, error.what_without_backtrace());
  } catch (const c10::IndexError& error) {
    return record(TDP_OUT_OF_RANGE, function, error.what_without_backtrace());
  } catch (const c10::ValueError& error) {
    return record(TDP_INVALID_ARGUMENT, function, error.what_without_backtrace());
  } catch (const c10::TypeError& error) {
    return record(TDP_INVALID_ARGUMENT, function, error.what_without_backtrace());
  } catch (const c10::Error& error) {
    return record(tdp::nn::detail::is_allocation_failure(error) ? TDP_OUT_OF_MEMORY : TDP_INTERNAL, function,
                  error.what_without_backtrace());
  } catch (const tdp::dist::NotImplementedError& error) {
    // An interaction type the distribution has no value for (MEDIAN or MEAN of a categorical):
    // the caller's choice, not a failure inside the SDK.
    return record(TDP_INVALID_ARGUMENT, function,
                  absl::StrCat(error.what(), " (the interaction type asked has no value for this distribution)").c_str());
  } catch (const std::invalid_argument& error) {
    return record(TDP_INVALID_ARGUMENT, function, error.what());
  } catch (const std::out_of_range& error) {
    return record(TDP_OUT_OF_RANGE, function, error.what());
  } catch (const std::exception& error) {
    return record(TDP_INTERNAL, function, error.what());
  } catch (...) {
    return record(TDP_INTERNAL, function, "an unknown exception");
  }
}

void require(const void* pointer, const char* what) {
  if (pointer == nullptr) fail(TDP_INVALID_ARGUMENT, absl::StrCat(what, " is NULL"));
}

// tdp_dtype and the spec's DType share their numbers.
std::optional<at::ScalarType> scalar_type(int dtype) {
  switch (dtype) {
    case TDP_FLOAT32: return at::kFloat;
    case TDP_FLOAT64: return at::kDouble;
    case TDP_FLOAT16: return at::kHalf;
    case TDP_BFLOAT16: return at::kBFloat16;
    case TDP_INT64: return at::kLong;
    case TDP_INT32: return at::kInt;
    case TDP_INT16: return at::kShort;
    case TDP_INT8: return at::kChar;
    case TDP_UINT8: return at::kByte;
    case TDP_BOOL: return at::kBool;
    default: return std::nullopt;
  }
}

std::optional<tdp_dtype> c_dtype(at::ScalarType type) {
  for (int d = TDP_FLOAT32; d <= TDP_BOOL; ++d) {
    if (scalar_type(d) == type) return static_cast<tdp_dtype>(d);
  }
  return std::nullopt;
}

std::string dtype_name(int dtype) {
  const char* name = tdp_dtype_name(static_cast<tdp_dtype>(dtype));
  return name != nullptr ? name : absl::StrCat("(tdp_dtype ", dtype, ", not a dtype)");
}


// TDP_INTERACTION_ACTOR is not a type: callers handle it before this.
std::optional<tdp::nn::InteractionType> interaction(tdp_interaction type, const char* what) {
  using tdp::nn::InteractionType;
  switch (type) {
    case TDP_INTERACTION_MODULE: return std::nullopt;
    case TDP_INTERACTION_RANDOM: return InteractionType::kRandom;
    case TDP_INTERACTION_MODE: return InteractionType::kMode;
    case TDP_INTERACTION_MEDIAN: return InteractionType::kMedian;
    case TDP_INTERACTION_MEAN: return InteractionType::kMean;
    case TDP_INTERACTION_DETERMINISTIC: return InteractionType::kDeterministic;
    default:
      fail(TDP_INVALID_ARGUMENT,
           absl::StrCat(what, " is ", static_cast<int>(type),
                        ", not a tdp_interaction (expected TDP_INTERACTION_ACTOR (-1), MODULE (0), RANDOM (1), "
                        "MODE (2), MEDIAN (3), MEAN (4) or DETERMINISTIC (5))"));
  }
}

const tdp_actor::Slot* find(const std::vector<tdp_actor::Slot>& slots, const char* name) {
  for (const auto& slot : slots) {
    if (slot.name == name) return &slot;
  }
  return nullptr;
}

std::string names(const std::vector<tdp_actor::Slot>& slots) {
  std::vector<std::string> quoted;
  for (const auto& slot : slots) quoted.push_back(absl::StrCat("\"", slot.name, "\""));
  return quoted.empty() ? "none" : absl::StrJoin(quoted, ", ");
}

std::string describe(const tdp_actor::Slot& slot) {
  return absl::StrCat(dtype_name(slot.dtype), " ", tdp::shape_to_string(slot.shape), " per environment");
}

// A buffer's element count against batch x the slot's per-environment count.
void check_buffer(const tdp_actor::Slot& slot, const char* kind, size_t index, int dtype, const void* data,
                  size_t count, int64_t batch) {
  if (dtype != slot.dtype) {
    fail(TDP_INVALID_ARGUMENT, absl::StrCat(kind, "s[", index, "] \"", slot.name, "\": dtype ", dtype_name(dtype),
                                            ", but the policy's ", kind, " is ", describe(slot)));
  }
  // batch x per_env must not wrap around: a huge batch would pass the count check.
  if (slot.per_env != 0 && static_cast<uint64_t>(batch) > std::numeric_limits<size_t>::max() / slot.per_env) {
    fail(TDP_INVALID_ARGUMENT, absl::StrCat(kind, "s[", index, "] \"", slot.name, "\": batch ", batch, " x ",
                                            describe(slot), " is more elements than a size_t holds"));
  }
  const size_t expected = static_cast<size_t>(batch) * slot.per_env;
  if (count != expected) {
    fail(TDP_INVALID_ARGUMENT,
         absl::StrCat(kind, "s[", index, "] \"", slot.name, "\": ", count, " elements, expected ", expected,
                      " (batch ", batch, " x ", describe(slot), ")"));
  }
  if (data == nullptr && expected > 0) {
    fail(TDP_INVALID_ARGUMENT, absl::StrCat(kind, "s[", index, "] \"", slot.name, "\": data is NULL"));
  }
}

std::vector<int64_t> batched(int64_t batch, const std::vector<int64_t>& shape) {
  std::vector<int64_t> sizes{batch};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  return sizes;
}

// A C-API slot of a signature entry; an error names a dtype the C API has no tdp_dtype for.
absl::StatusOr<tdp_actor::Slot> slot_of(const tdp::policy::TensorSignature& entry, const char* kind) {
  std::optional<tdp_dtype> dtype = c_dtype(entry.dtype);
  if (!dtype) {
    return absl::UnimplementedError(absl::StrCat(kind, " \"", entry.name, "\" has dtype ", c10::toString(entry.dtype),
                                                 ", which the C API has no tdp_dtype for"));
  }
  tdp_actor::Slot slot;
  slot.name = entry.name;
  slot.key = entry.key;
  slot.dtype = *dtype;
  slot.scalar = entry.dtype;
  slot.shape = entry.shape;
  slot.per_env = static_cast<size_t>(entry.numel_per_env());
  slot.may_omit = entry.state || entry.optional;
  return slot;
}

absl::Status load(const char* spec_path, const tdp_actor_options* options, tdp_actor** result) {
  require(result, "actor (the tdp_actor** to fill)");
  *result = nullptr;
  require(spec_path, "spec_path");
  tdp::actor::ActorOptions actor_options = options != nullptr ? options->options : tdp::actor::ActorOptions();
  absl::StatusOr<std::unique_ptr<tdp::actor::Actor>> loaded = tdp::actor::Actor::load(spec_path, actor_options);
  if (!loaded.ok()) return loaded.status();
  auto self = std::make_unique<tdp_actor>();
  self->actor = *std::move(loaded);
  self->name = self->actor->spec().name();
  self->version = self->actor->spec().version();
  const tdp::policy::Signature& signature = self->actor->signature();
  for (const tdp::policy::TensorSignature& input : signature.inputs) {
    absl::StatusOr<tdp_actor::Slot> slot = slot_of(input, "input");
    if (!slot.ok()) return absl::Status(slot.status().code(), absl::StrCat(spec_path, ": ", slot.status().message()));
    self->inputs.push_back(*std::move(slot));
  }
  for (const tdp::policy::TensorSignature& output : signature.outputs) {
    absl::StatusOr<tdp_actor::Slot> slot = slot_of(output, "output");
    if (!slot.ok()) return absl::Status(slot.status().code(), absl::StrCat(spec_path, ": ", slot.status().message()));
    self->outputs.push_back(*std::move(slot));
  }
  *result = self.release();
  return absl::OkStatus();
}

void check_actor(const tdp_actor* actor) { require(actor, "actor"); }

absl::Status describe_slot(const std::vector<tdp_actor::Slot>& slots, const char* kind, size_t index,
                           const char** name, tdp_dtype* dtype, const int64_t** dims, size_t* ndim) {
  if (index >= slots.size()) {
    fail(TDP_OUT_OF_RANGE,
         absl::StrCat(kind, " index ", index, " is out of range: the policy has ", slots.size(), " ", kind, "s"));
  }
  const tdp_actor::Slot& slot = slots[index];
  if (name != nullptr) *name = slot.name.c_str();
  if (dtype != nullptr) *dtype = slot.dtype;
  if (dims != nullptr) *dims = slot.shape.data();
  if (ndim != nullptr) *ndim = slot.shape.size();
  return absl::OkStatus();
}

// A call's inputs as an observation (views of the caller's arrays) and the outputs it asks for,
// checked against the policy's slots.
struct PreparedCall {
  tdp::TensorDict observation;
  std::vector<const tdp_actor::Slot*> wanted;
};

PreparedCall prepare(const tdp_actor* self, int64_t batch, const tdp_input* inputs, size_t num_inputs,
                     const tdp_output* outputs, size_t num_outputs) {
  if (batch < 1) fail(TDP_INVALID_ARGUMENT, absl::StrCat("batch is ", batch, ", expected at least 1"));
  if (num_inputs > 0) require(inputs, "inputs");
  if (num_outputs > 0) require(outputs, "outputs");
  PreparedCall call{tdp::TensorDict(std::vector<int64_t>{batch}), {}};
  std::vector<const tdp_actor::Slot*> given;
  for (size_t i = 0; i < num_inputs; ++i) {
    const tdp_input& input = inputs[i];
    if (input.name == nullptr) fail(TDP_INVALID_ARGUMENT, absl::StrCat("inputs[", i, "].name is NULL"));
    const tdp_actor::Slot* slot = find(self->inputs, input.name);
    if (slot == nullptr) {
      fail(TDP_INVALID_ARGUMENT, absl::StrCat("inputs[", i, "]: \"", input.name,
                                              "\" is not an input of the policy; its inputs are ", names(self->inputs)));
    }
    if (std::find(given.begin(), given.end(), slot) != given.end()) {
      fail(TDP_INVALID_ARGUMENT, absl::StrCat("inputs[", i, "]: \"", input.name, "\" is given twice"));
    }
    given.push_back(slot);
    check_buffer(*slot, "input", i, input.dtype, input.data, input.count, batch);
    call.observation.set(slot->key, at::from_blob(const_cast<void*>(input.data), batched(batch, slot->shape),
                                                  at::TensorOptions().dtype(slot->scalar)));
  }
  for (const auto& slot : self->inputs) {
    if (!slot.may_omit && std::find(given.begin(), given.end(), &slot) == given.end()) {
      fail(TDP_INVALID_ARGUMENT, absl::StrCat("missing input \"", slot.name, "\" (", describe(slot), ")"));
    }
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    const tdp_output& output = outputs[i];
    if (output.name == nullptr) fail(TDP_INVALID_ARGUMENT, absl::StrCat("outputs[", i, "].name is NULL"));
    const tdp_actor::Slot* slot = find(self->outputs, output.name);
    if (slot == nullptr) {
      fail(TDP_INVALID_ARGUMENT, absl::StrCat("outputs[", i, "]: \"", output.name,
                                              "\" is not an output of the policy; its outputs are ", names(self->outputs)));
    }
    check_buffer(*slot, "output", i, output.dtype, output.data, output.count, batch);
    call.wanted.push_back(slot);
  }
  return call;
}

// Copies the asked outputs of `result` into the caller's arrays.
void deliver(const tdp::TensorDict& result, const std::vector<const tdp_actor::Slot*>& wanted,
             const tdp_output* outputs, size_t num_outputs) {
  for (size_t i = 0; i < num_outputs; ++i) {
    const tdp_actor::Slot& slot = *wanted[i];
    if (!result.contains(slot.key)) {
      fail(TDP_INTERNAL, absl::StrCat("outputs[", i, "]: the policy did not write \"", slot.name, "\" in this call"));
    }
    at::Tensor value = result.get(slot.key);
    if (static_cast<size_t>(value.numel()) != outputs[i].count) {
      fail(TDP_INTERNAL, absl::StrCat("outputs[", i, "] \"", slot.name, "\": the policy wrote ", value.numel(),
                                      " elements (shape ", tdp::shape_to_string(value.sizes()), "), expected ",
                                      outputs[i].count));
    }
    if (value.const_data_ptr() == outputs[i].data) continue;  // written in place (act_into)
    at::from_blob(outputs[i].data, value.sizes(), at::TensorOptions().dtype(slot.scalar)).copy_(value);
  }
}

absl::Status act(tdp_actor* self, int64_t batch, const tdp_input* inputs, size_t num_inputs,
                 const tdp_output* outputs, size_t num_outputs, tdp_interaction type,
                 std::optional<uint64_t> seed = std::nullopt) {
  check_actor(self);
  const std::optional<tdp::nn::InteractionType> call_type =
      type == TDP_INTERACTION_ACTOR ? self->actor->options().interaction_type() : interaction(type, "type");
  c10::InferenceMode inference;
  PreparedCall call = prepare(self, batch, inputs, num_inputs, outputs, num_outputs);
  std::optional<at::Generator> generator;
  if (seed) {
    // A stream of the actor's kind (CPU or CUDA) seeded as an actor loaded with this seed seeds its own.
    generator = at::globalContext().defaultGenerator(self->actor->options().device()).clone();
    std::lock_guard<std::mutex> lock(generator->mutex());
    generator->set_current_seed(*seed);
  }
  // The caller's arrays as the outputs' tensors: the actor writes into them in place where it
  // can (the fused plan, a CPU actor), and deliver copies what it could not.
  tdp::TensorDict out(std::vector<int64_t>{batch});
  for (size_t i = 0; i < num_outputs; ++i) {
    const tdp_actor::Slot& slot = *call.wanted[i];
    out.set(slot.key, at::from_blob(outputs[i].data, batched(batch, slot.shape), at::TensorOptions().dtype(slot.scalar)));
  }
  self->actor->act_into(call.observation, out, call_type, std::move(generator));
  deliver(out, call.wanted, outputs, num_outputs);
  return absl::OkStatus();
}

absl::Status batching_load(const char* spec_path, const tdp_actor_options* options, int64_t max_batch_size,
                           int64_t max_delay_us, tdp_batching_actor** result) {
  require(result, "batcher (the tdp_batching_actor** to fill)");
  *result = nullptr;
  if (max_batch_size < 1) {
    fail(TDP_INVALID_ARGUMENT, absl::StrCat("max_batch_size is ", max_batch_size, ", expected at least 1"));
  }
  if (max_delay_us < 0) fail(TDP_INVALID_ARGUMENT, absl::StrCat("max_delay_us is ", max_delay_us, ", expected at least 0"));
  tdp_actor* loaded = nullptr;
  absl::Status status = load(spec_path, options, &loaded);
  if (!status.ok()) return status;
  auto self = std::make_unique<tdp_batching_actor>();
  self->actor.reset(loaded);
  tdp::actor::BatchingActorOptions batching;
  batching.max_batch_size(max_batch_size);
  batching.max_delay(std::chrono::microseconds(max_delay_us));
  batching.max_queue_rows(std::max<int64_t>(batching.max_queue_rows(), max_batch_size));
  self->batcher = std::make_unique<tdp::actor::BatchingActor>(self->actor->actor, batching);
  *result = self.release();
  return absl::OkStatus();
}

absl::Status batching_act(tdp_batching_actor* self, int64_t batch, const tdp_input* inputs, size_t num_inputs,
                          const tdp_output* outputs, size_t num_outputs, tdp_interaction type) {
  require(self, "batcher");
  tdp::actor::BatchingRequest request;
  if (type == TDP_INTERACTION_MODULE) {
    fail(TDP_INVALID_ARGUMENT,
         "TDP_INTERACTION_MODULE is not available through a batcher: load the actor with "
         "tdp_options_set_interaction(TDP_INTERACTION_MODULE) and pass TDP_INTERACTION_ACTOR");
  }
  if (type != TDP_INTERACTION_ACTOR) request.interaction_type(interaction(type, "type"));
  c10::InferenceMode inference;
  PreparedCall call = prepare(self->actor.get(), batch, inputs, num_inputs, outputs, num_outputs);
  // submit() copies the inputs it keeps, so the caller's arrays are only read during this call.
  deliver(self->batcher->act(call.observation, request), call.wanted, outputs, num_outputs);
  return absl::OkStatus();
}

absl::Status act_flat(tdp_actor* self, int64_t batch, const float* observation, float* action, float* log_prob,
                      tdp_interaction type) {
  check_actor(self);
  if (batch < 1) fail(TDP_INVALID_ARGUMENT, absl::StrCat("batch is ", batch, ", expected at least 1"));
  require(observation, "observation");
  require(action, "action");
  if (type == TDP_INTERACTION_MODULE) {
    fail(TDP_INVALID_ARGUMENT,
         "TDP_INTERACTION_MODULE is not available on the flat API: pass TDP_INTERACTION_ACTOR or a type");
  }
  const std::optional<tdp::nn::InteractionType> call_type =
      type == TDP_INTERACTION_ACTOR ? std::nullopt : interaction(type, "type");
  return self->actor->act_flat(observation, batch, action, log_prob, call_type);
}

absl::Status reset(tdp_actor* self, const uint8_t* env_mask, int64_t batch) {
  check_actor(self);
  if (env_mask == nullptr) {
    self->actor->reset();
    return absl::OkStatus();
  }
  if (batch < 1) fail(TDP_INVALID_ARGUMENT, absl::StrCat("batch is ", batch, ", expected at least 1"));
  c10::InferenceMode inference;
  at::Tensor mask = at::from_blob(const_cast<uint8_t*>(env_mask), {batch}, at::kByte).ne(0);
  self->actor->reset(mask);
  return absl::OkStatus();
}

}  // namespace

extern "C" {

const char* tdp_version(void) { return "0.1.0"; }

const char* tdp_last_error(void) { return fixed_message != nullptr ? fixed_message : last_message.c_str(); }

const char* tdp_status_name(tdp_status status) {
  switch (status) {
    case TDP_OK: return "TDP_OK";
    case TDP_INVALID_ARGUMENT: return "TDP_INVALID_ARGUMENT";
    case TDP_NOT_FOUND: return "TDP_NOT_FOUND";
    case TDP_FAILED_PRECONDITION: return "TDP_FAILED_PRECONDITION";
    case TDP_OUT_OF_RANGE: return "TDP_OUT_OF_RANGE";
    case TDP_RESOURCE_EXHAUSTED: return "TDP_RESOURCE_EXHAUSTED";
    case TDP_OUT_OF_MEMORY: return "TDP_OUT_OF_MEMORY";
    case TDP_INTERNAL: return "TDP_INTERNAL";
    case TDP_UNIMPLEMENTED: return "TDP_UNIMPLEMENTED";
    case TDP_PERMISSION_DENIED: return "TDP_PERMISSION_DENIED";
  }
  return "unknown tdp_status";
}

const char* tdp_dtype_name(tdp_dtype dtype) {
  switch (dtype) {
    case TDP_FLOAT32: return "float32";
    case TDP_FLOAT64: return "float64";
    case TDP_FLOAT16: return "float16";
    case TDP_BFLOAT16: return "bfloat16";
    case TDP_INT64: return "int64";
    case TDP_INT32: return "int32";
    case TDP_INT16: return "int16";
    case TDP_INT8: return "int8";
    case TDP_UINT8: return "uint8";
    case TDP_BOOL: return "bool";
  }
  return nullptr;
}

size_t tdp_dtype_size(tdp_dtype dtype) {
  std::optional<at::ScalarType> type = scalar_type(dtype);
  return type ? c10::elementSize(*type) : 0;
}

tdp_status tdp_options_create(tdp_actor_options** options) {
  return guarded("tdp_options_create", [&] {
    require(options, "options (the tdp_actor_options** to fill)");
    *options = nullptr;
    *options = new tdp_actor_options();
    return absl::OkStatus();
  });
}

void tdp_options_free(tdp_actor_options* options) { delete options; }

tdp_status tdp_options_set_device(tdp_actor_options* options, const char* device) {
  return guarded("tdp_options_set_device", [&] {
    require(options, "options");
    require(device, "device");
    std::optional<c10::Device> parsed;
    try {
      parsed = c10::Device(std::string(device));
    } catch (const c10::Error& error) {
      fail(TDP_INVALID_ARGUMENT, absl::StrCat("\"", device, "\" is not a device (expected \"cpu\", \"cuda\" or \"cuda:N\"): ",
                                              error.what_without_backtrace()));
    }
    options->options.device(*parsed);
    return absl::OkStatus();
  });
}

tdp_status tdp_options_set_backend(tdp_actor_options* options, tdp_backend backend) {
  return guarded("tdp_options_set_backend", [&] {
    require(options, "options");
    using tdp::actor::Backend;
    switch (backend) {
      case TDP_BACKEND_AUTO: options->options.backend(Backend::kAuto); break;
      case TDP_BACKEND_LIBTORCH: options->options.backend(Backend::kLibTorch); break;
      case TDP_BACKEND_FUSED: options->options.backend(Backend::kFused); break;
      default:
        fail(TDP_INVALID_ARGUMENT, absl::StrCat("backend is ", static_cast<int>(backend),
                                                ", not a tdp_backend (expected TDP_BACKEND_AUTO (0), "
                                                "TDP_BACKEND_LIBTORCH (1) or TDP_BACKEND_FUSED (2))"));
    }
    return absl::OkStatus();
  });
}

tdp_status tdp_options_set_seed(tdp_actor_options* options, uint64_t seed) {
  return guarded("tdp_options_set_seed", [&] {
    require(options, "options");
    options->options.seed(seed);
    return absl::OkStatus();
  });
}

tdp_status tdp_options_set_interaction(tdp_actor_options* options, tdp_interaction type) {
  return guarded("tdp_options_set_interaction", [&] {
    require(options, "options");
    if (type == TDP_INTERACTION_ACTOR) {
      fail(TDP_INVALID_ARGUMENT, "TDP_INTERACTION_ACTOR names the actor's own type; give the type itself");
    }
    options->options.interaction_type(interaction(type, "type"));
    return absl::OkStatus();
  });
}

tdp_status tdp_options_set_run_self_tests(tdp_actor_options* options, int run) {
  return guarded("tdp_options_set_run_self_tests", [&] {
    require(options, "options");
    options->options.run_self_tests(run != 0);
    return absl::OkStatus();
  });
}

tdp_status tdp_options_set_composite_lp_aggregate(tdp_actor_options* options, int aggregate) {
  return guarded("tdp_options_set_composite_lp_aggregate", [&] {
    require(options, "options");
    options->options.composite_lp_aggregate(aggregate != 0);
    return absl::OkStatus();
  });
}

tdp_status tdp_options_set_fused_max_batch(tdp_actor_options* options, int64_t batch) {
  return guarded("tdp_options_set_fused_max_batch", [&] {
    require(options, "options");
    if (batch < 0) fail(TDP_INVALID_ARGUMENT, absl::StrCat("batch is ", batch, ", expected at least 0"));
    options->options.fused_max_batch(batch);
    return absl::OkStatus();
  });
}

tdp_status tdp_actor_load(const char* spec_path, const tdp_actor_options* options, tdp_actor** actor) {
  return guarded("tdp_actor_load", [&] { return load(spec_path, options, actor); });
}

void tdp_actor_free(tdp_actor* actor) { delete actor; }

tdp_status tdp_actor_num_inputs(const tdp_actor* actor, size_t* count) {
  return guarded("tdp_actor_num_inputs", [&] {
    check_actor(actor);
    require(count, "count");
    *count = actor->inputs.size();
    return absl::OkStatus();
  });
}

tdp_status tdp_actor_num_outputs(const tdp_actor* actor, size_t* count) {
  return guarded("tdp_actor_num_outputs", [&] {
    check_actor(actor);
    require(count, "count");
    *count = actor->outputs.size();
    return absl::OkStatus();
  });
}

tdp_status tdp_actor_input(const tdp_actor* actor, size_t index, const char** name, tdp_dtype* dtype,
                           const int64_t** dims, size_t* ndim) {
  return guarded("tdp_actor_input", [&] {
    check_actor(actor);
    return describe_slot(actor->inputs, "input", index, name, dtype, dims, ndim);
  });
}

tdp_status tdp_actor_output(const tdp_actor* actor, size_t index, const char** name, tdp_dtype* dtype,
                            const int64_t** dims, size_t* ndim) {
  return guarded("tdp_actor_output", [&] {
    check_actor(actor);
    return describe_slot(actor->outputs, "output", index, name, dtype, dims, ndim);
  });
}

tdp_status tdp_actor_element_count(const tdp_actor* actor, const char* name, size_t* count) {
  return guarded("tdp_actor_element_count", [&] {
    check_actor(actor);
    require(name, "name");
    require(count, "count");
    const tdp_actor::Slot* slot = find(actor->inputs, name);
    if (slot == nullptr) slot = find(actor->outputs, name);
    if (slot == nullptr) {
      fail(TDP_INVALID_ARGUMENT, absl::StrCat("\"", name, "\" is neither an input (", names(actor->inputs),
                                              ") nor an output (", names(actor->outputs), ") of the policy"));
    }
    *count = slot->per_env;
    return absl::OkStatus();
  });
}

const char* tdp_actor_name(const tdp_actor* actor) { return actor != nullptr ? actor->name.c_str() : ""; }

const char* tdp_actor_spec_version(const tdp_actor* actor) { return actor != nullptr ? actor->version.c_str() : ""; }

tdp_status tdp_actor_act(tdp_actor* actor, int64_t batch, const tdp_input* inputs, size_t num_inputs,
                         const tdp_output* outputs, size_t num_outputs, tdp_interaction type) {
  return guarded("tdp_actor_act", [&] { return act(actor, batch, inputs, num_inputs, outputs, num_outputs, type); });
}

tdp_status tdp_actor_act_seeded(tdp_actor* actor, int64_t batch, const tdp_input* inputs, size_t num_inputs,
                                const tdp_output* outputs, size_t num_outputs, tdp_interaction type, uint64_t seed) {
  return guarded("tdp_actor_act_seeded",
                 [&] { return act(actor, batch, inputs, num_inputs, outputs, num_outputs, type, seed); });
}

tdp_status tdp_actor_flat_sizes(const tdp_actor* actor, int64_t* observation_size, int64_t* action_size) {
  return guarded("tdp_actor_flat_sizes", [&] {
    check_actor(actor);
    // Why there is no flat API: no fused plan, a recurrent policy, several inputs, a composite head.
    const tdp::actor::ActorInfo info = actor->actor->describe();
    if (!info.flat_status.ok()) fail(TDP_FAILED_PRECONDITION, std::string(info.flat_status.message()));
    if (observation_size != nullptr) *observation_size = info.flat_observation_size;
    if (action_size != nullptr) *action_size = info.flat_action_size;
    return absl::OkStatus();
  });
}

tdp_status tdp_actor_act_flat(tdp_actor* actor, int64_t batch, const float* observation, float* action,
                              float* log_prob, tdp_interaction type) {
  return guarded("tdp_actor_act_flat", [&] { return act_flat(actor, batch, observation, action, log_prob, type); });
}

tdp_status tdp_actor_reset(tdp_actor* actor, const uint8_t* env_mask, int64_t batch) {
  return guarded("tdp_actor_reset", [&] { return reset(actor, env_mask, batch); });
}

tdp_status tdp_batching_actor_load(const char* spec_path, const tdp_actor_options* options, int64_t max_batch_size,
                                   int64_t max_delay_us, tdp_batching_actor** batcher) {
  return guarded("tdp_batching_actor_load",
                 [&] { return batching_load(spec_path, options, max_batch_size, max_delay_us, batcher); });
}

void tdp_batching_actor_free(tdp_batching_actor* batcher) { delete batcher; }

tdp_actor* tdp_batching_actor_actor(tdp_batching_actor* batcher) {
  return batcher != nullptr ? batcher->actor.get() : nullptr;
}

tdp_status tdp_batching_actor_act(tdp_batching_actor* batcher, int64_t batch, const tdp_input* inputs,
                                  size_t num_inputs, const tdp_output* outputs, size_t num_outputs,
                                  tdp_interaction type) {
  return guarded("tdp_batching_actor_act",
                 [&] { return batching_act(batcher, batch, inputs, num_inputs, outputs, num_outputs, type); });
}

tdp_status tdp_batching_actor_stats(const tdp_batching_actor* batcher, tdp_batching_stats* stats) {
  return guarded("tdp_batching_actor_stats", [&] {
    require(batcher, "batcher");
    require(stats, "stats");
    const tdp::actor::BatchingStats s = batcher->batcher->stats();
    *stats = tdp_batching_stats{s.requests,         s.rejected, s.batches,       s.failed_batches,
                                s.retried_requests, s.rows,     s.largest_batch, s.max_batch_size};
    return absl::OkStatus();
  });
}

}  // extern "C"
