#include "sdk/actor/actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include "sdk/actor/backend.h"
#include "sdk/actor/cuda_graph_backend.h"
#include "sdk/actor/fused_backend.h"
#include "sdk/actor/libtorch_backend.h"
#include "sdk/log/log.h"
#include "sdk/policy/policy.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::actor {
namespace {

// The actor's own random stream lives on its device: CUDA sampling kernels only take a CUDA
// generator. A CUDA device needs the CUDA backend linked in (--config=cuda links libtorch_cuda)
// and a visible GPU; without them this is a load error, not a failure at the first act().
at::Generator make_generator(const c10::Device& device, uint64_t seed) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
  if (!device.is_cuda()) {
    throw std::invalid_argument(absl::StrCat("device ", device.str(), " requested; an actor runs on the cpu or a cuda device"));
  }
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

bool aggregation_mode(const ActorOptions& options) {
  return options.composite_lp_aggregate() ? *options.composite_lp_aggregate() : nn::composite_lp_aggregate();
}

// A policy assembled by hand has no signature yet: it is computed here, in the actor's mode.
policy::Policy with_signature(policy::Policy policy, bool lp_aggregate) {
  if (policy.module == nullptr) throw std::invalid_argument("Actor: the policy has no module");
  if (policy.signature.outputs.empty()) {
    nn::CompositeLpAggregateGuard aggregate(lp_aggregate, /*thread_local_only=*/true);
    absl::StatusOr<policy::Signature> signature = policy::compute_signature(policy.spec, *policy.module);
    if (!signature.ok()) throw std::invalid_argument(absl::StrCat("Actor: ", signature.status().message()));
    policy.signature = *std::move(signature);
  }
  return policy;
}

// The index of the first of n floats outside [-kLargestInput, kLargestInput] (NaN and +-Inf
// included), or -1: a plain loop, which at batch 1 costs a few nanoseconds where a dispatched
// check would cost microseconds. Blocks of a fixed size without an early exit, which the
// compiler turns into vector compares (a MuJoCo observation of 17 floats at batch 64 took 4% of
// the fused call one float at a time); a block with a bad value is then searched.
int64_t first_out_of_range(const float* data, int64_t n) {
  auto in_range = [](float x) { return std::fabs(x) <= kLargestInput; };  // false for NaN
  constexpr int64_t kBlock = 64;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int out = 0;  // an int: a bool reduction stays scalar at -O2
    for (int64_t j = 0; j < kBlock; ++j) out |= !in_range(data[i + j]);
    if (out != 0) break;
  }
  for (; i < n; ++i) {
    if (!in_range(data[i])) return i;
  }
  return -1;
}

std::string out_of_range_error(const char* who, const std::string& name, double value, int64_t element,
                               int64_t per_row) {
  const int64_t row = per_row > 0 ? element / per_row : 0;
  const std::string shown =
      std::isnan(value) ? "nan" : (std::isinf(value) ? (value > 0 ? "inf" : "-inf") : absl::StrCat(value));
  return absl::StrCat(who, ": input \"", name, "\" has ", shown, " in row ", row, " (element ", element,
                      "); expected finite values within +-", kLargestInput, " (ActorOptions::check_finite)");
}

// `observation`'s tensor at each of `signature`'s inputs, in its order; undefined where it has
// none, or a TensorDict there (as if absent, so the backend's check names the input).
c10::SmallVector<at::Tensor, 4> look_up_inputs(const policy::Signature& signature, const TensorDict& observation) {
  c10::SmallVector<at::Tensor, 4> inputs;
  for (const policy::TensorSignature& input : signature.inputs) {
    try {
      inputs.push_back(observation.get(input.key, at::Tensor()));
    } catch (const std::invalid_argument&) {  // TensorDict.get of a key that holds a TensorDict
      inputs.emplace_back();
    }
  }
  return inputs;
}

}  // namespace

ActCall::ActCall(const policy::Signature& signature, const TensorDict& observation,
                 std::optional<nn::InteractionType> type, std::optional<at::Generator> generator)
    : observation(observation), type(type), generator(std::move(generator)),
      inputs(look_up_inputs(signature, observation)) {}

void check_finite(const policy::Signature& signature, c10::ArrayRef<at::Tensor> inputs, const char* who) {
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    const policy::TensorSignature& input = signature.inputs[i];
    const at::Tensor& x = inputs[i];
    if (!at::isFloatingType(input.dtype)) continue;
    if (!x.defined() || x.layout() != at::kStrided || x.is_meta() || !at::isFloatingType(x.scalar_type())) continue;
    int64_t per_row = 1;
    for (int64_t d : input.shape) per_row *= d;
    if (x.scalar_type() == at::kFloat && x.device().is_cpu() && x.is_contiguous()) {
      const float* data = static_cast<const float*>(x.const_data_ptr());  // float32, checked above
      const int64_t bad = first_out_of_range(data, x.numel());
      if (bad >= 0) throw std::invalid_argument(out_of_range_error(who, input.name, data[bad], bad, per_row));
      continue;
    }
    c10::InferenceMode inference;
    // abs() <= limit is false for NaN, as the loop above.
    const at::Tensor in_range = x.abs().le(kLargestInput).reshape(-1);
    if (in_range.all().item<bool>()) continue;
    const int64_t bad = in_range.logical_not().nonzero()[0][0].item<int64_t>();
    throw std::invalid_argument(
        out_of_range_error(who, input.name, x.reshape(-1)[bad].item<double>(), bad, per_row));
  }
}

void check_finite_inputs(const policy::Signature& signature, const TensorDict& observation, const std::string& who) {
  check_finite(signature, look_up_inputs(signature, observation), who.c_str());
}

ActorCore::ActorCore(policy::Policy loaded, ActorOptions actor_options)
    : policy(with_signature(std::move(loaded), aggregation_mode(actor_options))),
      options(std::move(actor_options)),
      lp_aggregate(aggregation_mode(options)),
      generator(make_generator(options.device(), options.seed())),
      state(policy.signature, options.device()),
      returned_keys(policy.signature.output_keys()) {}

bool takes_in_place(const at::Tensor& into, c10::IntArrayRef sizes, at::ScalarType dtype, c10::Device device) {
  if (!into.defined() || into.layout() != at::kStrided || into.scalar_type() != dtype || into.device() != device ||
      !into.has_storage()) {
    return false;
  }
  // Dim by dim, inline: ArrayRef's == calls memcmp out of line, and a batch-1 act() asks per output.
  const c10::IntArrayRef have = into.sizes();
  if (have.size() != sizes.size()) return false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (have[d] != sizes[d]) return false;
  }
  return into.is_contiguous() && !into.requires_grad() &&
         (into.numel() == 0 || into.unsafeGetTensorImpl()->unsafe_storage().data() != nullptr);
}

bool shares_memory(const at::Tensor& into, const at::Tensor& other) {
  if (!other.defined() || !other.has_storage() || into.device() != other.device()) return false;
  const char* begin = static_cast<const char*>(into.const_data_ptr());
  const char* end = begin + into.nbytes();
  const c10::Storage& storage = other.unsafeGetTensorImpl()->unsafe_storage();  // no reference taken
  const char* other_begin = static_cast<const char*>(storage.data());
  return other_begin < end && begin < other_begin + storage.nbytes();
}

void write_outputs(const TensorDict& result, const TensorDict& observation, TensorDict& out) {
  std::vector<at::Tensor> read;
  for (const Entry& entry : observation.values(/*include_nested=*/true, /*leaves_only=*/true)) {
    read.push_back(entry.tensor());
  }
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (into, value)
  std::vector<std::pair<NestedKey, at::Tensor>> sets;
  for (const auto& [key, entry] : result.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    const at::Tensor& value = entry.tensor();
    at::Tensor into = out.get(key, at::Tensor());
    if (into.defined() && into.is_same(value)) continue;
    auto shared = [&](const at::Tensor& t) { return shares_memory(into, t); };
    if (takes_in_place(into, value.sizes(), value.scalar_type(), value.device()) &&
        std::none_of(read.begin(), read.end(), shared) &&
        std::none_of(copies.begin(), copies.end(), [&](const auto& copy) { return shared(copy.first); })) {
      copies.emplace_back(std::move(into), value);
    } else {
      sets.emplace_back(key, value);
    }
  }
  for (auto& [into, value] : copies) {
    c10::InferenceMode inference(into.is_inference());  // a normal tensor counts the write
    into.copy_(value);
  }
  for (auto& [key, value] : sets) out.set(key, std::move(value));
}

bool ActorInfo::runs_fused(int64_t batch, nn::InteractionType type) const {
  return fused_status.ok() && batch <= fused_max_batch &&
         std::find(fused_interaction_types.begin(), fused_interaction_types.end(), type) !=
             fused_interaction_types.end();
}

class Actor::Impl {
 public:
  Impl(policy::Policy policy, ActorOptions options)
      : core(std::move(policy), std::move(options)), fused(core), libtorch(core) {
    // Lowered (by FusedBackend) before the module moves to the device: the plan copies its
    // weights from the CPU module.
    core.policy.module->to(core.options.device());
    core.policy.module->eval();
    if (std::optional<CudaGraphOptions> settings = CudaGraphBackend::settings(core.options, core.policy.spec)) {
      if (core.options.device().is_cuda()) {
        graphs = std::make_unique<CudaGraphBackend>(core, *std::move(settings));
      } else {
        logger()->warn("{}: cuda_graph is enabled but the actor runs on {}; calls run eagerly", core.policy.spec.name(),
                       core.options.device().str());
      }
    }
    backends = {&fused};
    if (graphs) backends.push_back(graphs.get());
    backends.push_back(&libtorch);
  }

  ActorCore core;
  FusedBackend fused;
  LibTorchBackend libtorch;
  std::unique_ptr<CudaGraphBackend> graphs;
  // Asked in this order; LibTorch takes every call.
  std::vector<ActorBackend*> backends;
};

absl::StatusOr<std::unique_ptr<Actor>> Actor::load(const std::string& spec_path, ActorOptions options) {
  return load(spec_path, std::move(options), policy::LoadOptions{});
}

absl::StatusOr<std::unique_ptr<Actor>> Actor::load(const std::string& spec_path, ActorOptions options,
                                                   const policy::LoadOptions& load_options) {
  policy::LoadOptions load = load_options;
  load.run_self_tests = options.run_self_tests();
  // The policy is built (and its self tests run) under the actor's aggregation mode.
  std::optional<nn::CompositeLpAggregateGuard> mode;
  if (options.composite_lp_aggregate()) mode.emplace(*options.composite_lp_aggregate(), /*thread_local_only=*/true);
  auto policy = policy::load_policy(spec_path, load);
  if (!policy.ok()) return policy.status();
  try {
    return std::make_unique<Actor>(std::move(*policy), options);
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(spec_path, ": ", error.what()));
  }
}

Actor::Actor(policy::Policy policy, ActorOptions options)
    : impl_(std::make_unique<Impl>(std::move(policy), std::move(options))) {}

Actor::~Actor() = default;
Actor::Actor(Actor&& other) noexcept = default;
Actor& Actor::operator=(Actor&& other) noexcept = default;

TensorDict Actor::act(const TensorDict& observation) {
  return act(observation, impl_->core.options.interaction_type());
}

TensorDict Actor::act(const TensorDict& observation, std::optional<nn::InteractionType> type,
                      std::optional<at::Generator> generator) {
  const policy::Signature& signature = impl_->core.policy.signature;
  const ActCall call(signature, observation, type, std::move(generator));
  if (impl_->core.options.check_finite()) check_finite(signature, call.inputs, "Actor.act");
  for (ActorBackend* backend : impl_->backends) {
    if (backend->accepts(call)) return backend->act(call);
  }
  return impl_->libtorch.act(call);
}

void Actor::act_into(const TensorDict& observation, TensorDict& out) {
  act_into(observation, out, impl_->core.options.interaction_type());
}

void Actor::act_into(const TensorDict& observation, TensorDict& out, std::optional<nn::InteractionType> type,
                     std::optional<at::Generator> generator) {
  const policy::Signature& signature = impl_->core.policy.signature;
  const ActCall call(signature, observation, type, std::move(generator));
  if (impl_->core.options.check_finite()) check_finite(signature, call.inputs, "Actor.act_into");
  std::optional<std::vector<int64_t>> was;  // an empty out's batch size, given back should the call fail
  if (out.batch_size() != observation.batch_size()) {
    if (!out.is_empty()) {
      throw std::invalid_argument(absl::StrCat("Actor.act_into: out has batch size ", shape_to_string(out.batch_size()),
                                               " but the observation has ", shape_to_string(observation.batch_size()),
                                               "; expected the same, or an empty out"));
    }
    was = out.batch_size().vec();
    out.set_batch_size(observation.batch_size().vec());
  }
  try {
    for (ActorBackend* backend : impl_->backends) {
      if (backend->accepts(call)) return backend->act_into(call, out);
    }
    impl_->libtorch.act_into(call, out);
  } catch (...) {
    if (was) out.set_batch_size(*std::move(was));
    throw;
  }
}

TensorDict Actor::act(const std::vector<std::pair<NestedKey, at::Tensor>>& observation) {
  // The batch dims: those of the first declared input given, before its declared shape.
  std::vector<int64_t> batch;
  for (const policy::TensorSignature& input : impl_->core.policy.signature.inputs) {
    auto given = std::find_if(observation.begin(), observation.end(),
                              [&](const auto& entry) { return entry.first == input.key; });
    if (given == observation.end()) continue;
    const at::Tensor& tensor = given->second;
    const int64_t dims = tensor.dim() - static_cast<int64_t>(input.shape.size());
    if (dims < 0) {
      throw std::invalid_argument(absl::StrCat("Actor.act: input ", input.name, " has ", tensor.dim(),
                                               " dims but its declared shape has ", input.shape.size()));
    }
    batch.assign(tensor.sizes().begin(), tensor.sizes().begin() + dims);
    break;
  }
  TensorDict td(batch);
  for (const auto& [key, tensor] : observation) td.set(key, tensor);
  return act(td, impl_->core.options.interaction_type());
}

absl::Status Actor::act_flat(const float* observation, int64_t batch, float* action, float* log_prob,
                             std::optional<nn::InteractionType> given) {
  // Chosen whole, not assigned into: assigning writes the optional's flag byte alone, and passing
  // the optional on loads it as one 8-byte word, which the core cannot forward from that store.
  const std::optional<nn::InteractionType> type = given ? given : impl_->core.options.interaction_type();
  FusedBackend& fused = impl_->fused;
  const fused::FusedPlan* const layout = fused.layout();
  if (layout == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("Actor.act_flat needs the fused plan: ", impl_->fused.status().message()));
  }
  if (absl::Status flat = fused.flat_status(); !flat.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("Actor.act_flat: ", flat.message()));
  }
  if (impl_->core.options.check_finite() && batch > 0 && observation != nullptr) {
    const int64_t width = layout->observation_size();
    if (const int64_t bad = first_out_of_range(observation, batch * width); bad >= 0) {
      return absl::InvalidArgumentError(out_of_range_error("Actor.act_flat", impl_->core.policy.signature.inputs[0].name,
                                                         observation[bad], bad, width));
    }
  }
  if (fused.runs(batch, type)) return fused.act_flat(observation, batch, action, log_prob, type);
  if (batch < 0 || (batch > 0 && (observation == nullptr || action == nullptr))) {
    return absl::InvalidArgumentError("Actor.act_flat: a negative batch, or a null observation or action buffer");
  }
  // LibTorch: larger batches under kAuto, and interaction types the plan has no closed form for.
  const fused::FusedPlan& plan = *layout;
  try {
    at::Tensor obs = at::from_blob(const_cast<float*>(observation), {batch, plan.observation_size()}, at::kFloat);
    TensorDict out = act(TensorDict({{plan.slot(plan.input_slots()[0]).key, obs}}, {batch}), type);
    auto copy = [&](int slot, float* to) {
      const fused::FusedPlan::Slot& s = plan.slot(slot);
      at::Tensor value = out.get(s.key).to(at::kFloat).contiguous();
      std::copy(value.data_ptr<float>(), value.data_ptr<float>() + batch * s.width, to);
    };
    copy(plan.action_slot(), action);
    if (log_prob != nullptr) {
      if (plan.log_prob_slot() < 0) return absl::InvalidArgumentError("Actor.act_flat: the policy writes no log-prob");
      copy(plan.log_prob_slot(), log_prob);
    }
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("Actor.act_flat: ", error.what()));
  }
  return absl::OkStatus();
}

void Actor::reset(const at::Tensor& env_mask) { impl_->core.state.reset(env_mask); }
void Actor::reset() { impl_->core.state.reset(); }

absl::Status Actor::refresh_parameters() { return impl_->fused.refresh(); }

ActorInfo Actor::describe() const {
  ActorInfo info;
  for (const ActorBackend* backend : impl_->backends) backend->describe(info);
  return info;
}

void Actor::set_interaction_type(std::optional<nn::InteractionType> type) {
  impl_->core.options.interaction_type(type);
}
const ActorOptions& Actor::options() const { return impl_->core.options; }
const tdpolicy::PolicySpec& Actor::spec() const { return impl_->core.policy.spec; }
const policy::Signature& Actor::signature() const { return impl_->core.policy.signature; }
const std::shared_ptr<nn::TensorDictModuleBase>& Actor::module() const { return impl_->core.policy.module; }

}  // namespace tdp::actor
