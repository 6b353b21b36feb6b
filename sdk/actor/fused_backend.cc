#include "sdk/actor/fused_backend.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <stdexcept>

#include "sdk/policy/keys.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"

namespace tdp::actor {
namespace {

// The outputs' memory. LibTorch's CPU allocator takes its 64-byte alignment from
// posix_memalign, which glibc serves from its bins, never from the per-thread cache that its
// frees fill: at batch 1 each output tensor paid a search of the bins and a consolidation of the
// fast bins on every call. malloc, aligned by hand, is served from that cache. The tensors are
// ordinary CPU tensors (the allocator lives as long as the process, so a resize_ may use it).
class OutputAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kAlignment = 64;  // LibTorch's own (c10::gAlignment)

  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, c10::Device(c10::DeviceType::CPU)};
    void* raw = std::malloc(bytes + kAlignment);
    if (raw == nullptr) throw std::bad_alloc();  // TDP_OUT_OF_MEMORY through the C API
    void* data = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(raw) + kAlignment) & ~(kAlignment - 1));
    return {data, raw, &std::free, c10::Device(c10::DeviceType::CPU)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static OutputAllocator& get() {
    static OutputAllocator* const allocator = new OutputAllocator();  // never destroyed: tensors may outlive statics
    return *allocator;
  }
};

// What a call keeps between calls on its thread (one thread_local: one lookup of the thread's
// storage per call): the inputs' tensors and data, the outputs' tensors and destinations.
struct CallScratch {
  std::vector<at::Tensor> inputs;  // those made contiguous float32 for the plan
  std::vector<const float*> input_data;
  std::vector<at::Tensor> outs;
  std::vector<char> in_place;  // outs[i] is out's own tensor, written in place
  std::vector<fused::FusedPlan::Destination> destinations;
  std::vector<int64_t> shape;
  std::vector<float> integers;  // the integer outputs' values as the plan writes them
  // What act() returned on this thread lately, oldest first, for later calls to write into once
  // their callers have dropped them.
  std::vector<at::Tensor> returned;
};

// How many returned tensors a thread keeps: a simulator's `action = actor.act(obs)` still holds
// the previous call's outputs while the next call runs, so the outputs of two calls, a few
// entries each. Only small ones: making a tensor costs as much as the arithmetic at batch 1, a
// sliver of it at batch 1024, and a thread that acted once on a large batch should not keep its
// outputs' memory.
constexpr size_t kReturnedKept = 8;
constexpr size_t kReturnedMaxBytes = 16384;

// A tensor an earlier act() on this thread returned that nothing but `returned` refers to any
// more (the caller dropped it, no view or weak reference to it or its storage is left), of the
// output's shape and dtype: the call writes into it instead of making a new tensor, which at
// batch 1 costs about as much as the plan's arithmetic (a TensorImpl, a StorageImpl and their
// memory made, then freed by the caller). Never one Python has wrapped: torch keeps its Python
// object alive with it, and a Python weak reference to that object would see the new values.
at::Tensor take_returned(std::vector<at::Tensor>& returned, c10::IntArrayRef shape, at::ScalarType dtype) {
  for (auto it = returned.begin(); it != returned.end(); ++it) {
    if (it->use_count() == 1 && it->weak_use_count() == 1 && it->storage().use_count() == 1 &&
        it->unsafeGetTensorImpl()->pyobj_slot()->load_pyobj() == nullptr &&
        takes_in_place(*it, shape, dtype, c10::Device(c10::kCPU))) {
      at::Tensor taken = std::move(*it);
      returned.erase(it);
      return taken;
    }
  }
  return at::Tensor();
}

// An output tensor: a CPU tensor made directly (at::empty's trip through the dispatcher was a
// third of its cost at batch 1), its memory from OutputAllocator.
at::Tensor new_output(c10::IntArrayRef shape, at::ScalarType dtype) {
  return at::detail::empty_generic(shape, &OutputAllocator::get(), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype,
                                   std::nullopt);
}

// accepts() and the output slots were decided on the first plan: a refreshed plan must read and
// write the same slots, or calls would be run on a plan they were not checked against.
absl::Status same_layout(const fused::FusedPlan& was, const fused::FusedPlan& now) {
  bool same = was.slot_count() == now.slot_count() && was.input_slots() == now.input_slots() &&
              was.output_slots() == now.output_slots() && was.action_slot() == now.action_slot() &&
              was.log_prob_slot() == now.log_prob_slot() && was.description() == now.description();
  for (int s = 0; same && s < was.slot_count(); ++s) {
    const fused::FusedPlan::Slot& a = was.slot(s);
    const fused::FusedPlan::Slot& b = now.slot(s);
    same = a.key == b.key && a.width == b.width && a.shape == b.shape && a.integer == b.integer &&
           a.float64 == b.float64 && a.boolean == b.boolean;
  }
  if (same) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "refresh_parameters: the parameters no longer lower to a plan of the same layout (a parameter changed "
      "shape?); load the policy again");
}

}  // namespace

FusedBackend::FusedBackend(ActorCore& core) : core_(core) {
  const ActorOptions& options = core_.options;
  if (options.backend() == Backend::kLibTorch) {
    status_ = absl::FailedPreconditionError("the actor's backend is kLibTorch");
    return;
  }
  absl::Status precondition = absl::OkStatus();
  if (!options.device().is_cpu()) {
    precondition = absl::FailedPreconditionError(
        absl::StrCat("the fused plan runs on the CPU, the actor on ", options.device().str()));
  }
  // Lowered at most once: kAuto skips it when a precondition already rules the plan out; kFused
  // lowers anyway, because a module-level reason names the module and makes the better error.
  if (!precondition.ok() && options.backend() != Backend::kFused) {
    status_ = precondition;
    return;
  }
  auto lowered = lower();
  if (precondition.ok() && lowered.ok()) {
    layout_ = *std::move(lowered);
    current_.replace(layout_);
    output_slots_ = layout_->output_slots();
    // return_all_entries: every entry the modules write, after the observation's.
    const std::vector<int>& inputs = layout_->input_slots();
    for (int s = 0; s < layout_->slot_count(); ++s) {
      if (std::find(inputs.begin(), inputs.end(), s) == inputs.end() && layout_->slot(s).key != NestedKey("_")) {
        all_slots_.push_back(s);
      }
    }
    return;
  }
  status_ = precondition.ok() ? lowered.status() : precondition;
  if (options.backend() == Backend::kFused) {
    throw std::invalid_argument(
        absl::StrCat("backend kFused: ", lowered.ok() ? status_.message() : lowered.status().message()));
  }
}

// The plan of the policy's module as it is now, lowered under the actor's aggregation mode,
// which fixed the probabilistic modules' log-prob keys.
absl::StatusOr<std::shared_ptr<const fused::FusedPlan>> FusedBackend::lower() const {
  nn::CompositeLpAggregateGuard aggregate(core_.lp_aggregate, /*thread_local_only=*/true);
  return fused::FusedPlan::lower(core_.policy);
}

nn::InteractionType FusedBackend::plan_type(std::optional<nn::InteractionType> type) const {
  return type.value_or(layout_->default_interaction_type());
}

bool FusedBackend::runs(int64_t batch, std::optional<nn::InteractionType> type) const {
  if (!layout_) return false;
  if (core_.options.backend() == Backend::kAuto && batch > core_.options.fused_max_batch()) return false;
  return layout_->check(plan_type(type)).ok();
}

bool FusedBackend::accepts(const ActCall& call) const {
  if (!layout_ || call.generator || call.observation.batch_size().size() != 1) return false;
  if (!runs(call.observation.batch_size()[0], call.type)) return false;
  // Well-formed inputs only (else LibTorch's path says what is wrong); a state key the
  // observation lacks comes from the kept state, a missing is_init is false.
  const std::vector<int>& slots = layout_->input_slots();
  for (size_t i = 0; i < slots.size(); ++i) {
    const fused::FusedPlan::Slot& slot = layout_->slot(slots[i]);
    const policy::TensorSignature& input = core_.policy.signature.inputs[i];
    const at::Tensor& x = call.inputs[i];  // the plan's inputs are the signature's, in its order
    if (!x.defined()) {
      if (!input.optional && (core_.state.empty() || !input.state)) return false;
      continue;
    }
    if (x.scalar_type() != input.dtype || !x.device().is_cpu() || x.layout() != at::kStrided ||
        x.dim() != 1 + static_cast<int64_t>(slot.shape.size()) || x.sizes().slice(1) != c10::IntArrayRef(slot.shape)) {
      return false;
    }
  }
  return true;
}

TensorDict FusedBackend::act(const ActCall& call) {
  const int64_t batch = call.observation.batch_size()[0];
  TensorDict out = core_.options.return_all_entries() ? call.observation.clone(/*deep=*/false) : TensorDict({batch});
  run(call, out, /*reuse=*/false);  // the clone's entries are the caller's tensors: never written
  return out;
}

void FusedBackend::act_into(const ActCall& call, TensorDict& out) {
  // Every entry (a debugging option): act()'s TensorDict, copied, keeps act()'s order of keys.
  if (core_.options.return_all_entries()) return ActorBackend::act_into(call, out);
  run(call, out, /*reuse=*/true);
}

void FusedBackend::run(const ActCall& call, TensorDict& out, bool reuse_out) {
  const TensorDict& observation = call.observation;
  const int64_t batch = observation.batch_size()[0];
  // Held for the call: a refresh during it swaps in a new plan without freeing this one.
  const CurrentPlan::Hold taken = current_.hold();
  const fused::FusedPlan& plan = *taken;
  // Inference mode, as the other backends run, wherever this call makes a tensor (its outputs are
  // then inference tensors, as theirs are); a call whose every output goes in place never enters
  // it and skips the guard's thread-local state changes, which show at batch 1.
  std::optional<c10::InferenceMode> inference;
  auto making_tensors = [&inference] {
    if (!inference) inference.emplace();
  };
  const bool kept = core_.state.uses_kept(observation);
  if (kept) making_tensors();
  const std::vector<at::Tensor> state = kept ? core_.state.get({batch}) : std::vector<at::Tensor>{};
  // Per-thread scratch, reused from call to call: the only allocations per call are the output
  // tensors `out` cannot take in place.
  thread_local CallScratch scratch;
  auto& [inputs, input_data, outs, in_place, destinations, shape, integers, returned] = scratch;
  inputs.clear();
  input_data.clear();
  const std::vector<int>& input_slots = plan.input_slots();
  for (size_t i = 0; i < input_slots.size(); ++i) {
    const int s = input_slots[i];
    const NestedKey& key = plan.slot(s).key;
    const at::Tensor& given = call.inputs[i];
    if (given.defined() && given.scalar_type() == at::kFloat && given.is_contiguous()) {
      input_data.push_back(static_cast<const float*>(given.const_data_ptr()));  // call.inputs holds it
      continue;
    }
    making_tensors();
    if (given.defined()) {
      // A bool input (an is_init, a masked categorical's mask) goes in as 0 / 1 floats; a float64
      // input (which only a to_dtype reads) as its float32 cast, the to_dtype the plan lowered to a
      // copy.
      inputs.push_back(given.to(at::kFloat).contiguous());
    } else if (const std::vector<NestedKey>& keys = core_.state.keys();
               kept && std::find(keys.begin(), keys.end(), key) != keys.end()) {
      inputs.push_back(state[std::find(keys.begin(), keys.end(), key) - keys.begin()].contiguous());
    } else {
      inputs.push_back(at::zeros({batch, plan.slot(s).width}));  // a missing is_init: false
    }
    input_data.push_back(static_cast<const float*>(inputs.back().const_data_ptr()));
  }
  const std::vector<int>& slots = core_.options.return_all_entries() ? all_slots_ : output_slots_;
  // Each output's tensor: out's own where it can take the values in place, else a new one, set
  // into out only after the plan ran (a call that fails leaves out's entries as they were).
  outs.clear();
  in_place.clear();
  destinations.clear();
  // Integer entries (categorical samples) go through a per-thread float buffer and are
  // converted in a loop: cheaper at batch 1 than a dispatched .to(kLong).
  int64_t integer_floats = 0;
  for (int s : slots) integer_floats += plan.slot(s).integer ? batch * plan.slot(s).width : 0;
  if (static_cast<int64_t>(integers.size()) < integer_floats) integers.resize(integer_floats);
  int64_t integer_offset = 0;
  for (int s : slots) {
    const fused::FusedPlan::Slot& slot = plan.slot(s);
    const at::ScalarType dtype = slot.integer ? at::kLong : at::kFloat;
    shape.assign(1, batch);
    shape.insert(shape.end(), slot.shape.begin(), slot.shape.end());
    at::Tensor existing = reuse_out ? out.get(slot.key, at::Tensor()) : at::Tensor();
    // Never into the observation (the plan reads a tile's inputs before it writes its outputs),
    // nor into memory another output is written to (the same buffer given for two keys).
    auto shared = [&](const at::Tensor& t) { return shares_memory(existing, t); };
    const bool reuse = existing.defined() && takes_in_place(existing, shape, dtype, c10::Device(c10::kCPU)) &&
                       std::none_of(call.inputs.begin(), call.inputs.end(), shared) &&
                       std::none_of(outs.begin(), outs.end(), shared);
    in_place.push_back(reuse);
    at::Tensor tensor = reuse ? std::move(existing) : reuse_out ? at::Tensor() : take_returned(returned, shape, dtype);
    if (!tensor.defined()) {
      making_tensors();
      tensor = new_output(shape, dtype);
    }
    outs.push_back(std::move(tensor));
    // Field by field: a braced temporary would be stored as two words and reloaded as one, which
    // the core cannot forward from those stores (a stall per output at batch 1).
    fused::FusedPlan::Destination& destination = destinations.emplace_back();
    destination.slot = s;
    if (slot.integer) {
      destination.data = integers.data() + integer_offset;
      integer_offset += batch * slot.width;
    } else {
      destination.data = static_cast<float*>(outs.back().data_ptr());  // float32: made or checked so
    }
  }
  try {
    plan.run(input_data.data(), batch, plan_type(call.type), {core_.options.seed(), calls_.fetch_add(1)},
             destinations.data(), static_cast<int>(destinations.size()));
  } catch (...) {  // a masked row that allows no class under RANDOM
    inputs.clear();
    outs.clear();
    throw;
  }
  inputs.clear();  // no reference to the caller's tensors outlives the call
  const std::vector<NestedKey>& next_keys = core_.state.next_keys();
  std::vector<at::Tensor> next(kept ? next_keys.size() : 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    const fused::FusedPlan::Slot& slot = plan.slot(slots[i]);
    if (slot.integer) {
      int64_t* to = static_cast<int64_t*>(outs[i].data_ptr());  // int64: made or checked so
      for (int64_t j = 0; j < batch * slot.width; ++j) to[j] = static_cast<int64_t>(destinations[i].data[j]);
    }
    auto k = kept ? std::find(next_keys.begin(), next_keys.end(), slot.key) : next_keys.end();
    if (k != next_keys.end()) {
      // The kept state is the actor's own tensor, never the caller's (which it may overwrite).
      at::Tensor& state_next = next[k - next_keys.begin()];
      if (in_place[i]) {
        state_next = new_output(outs[i].sizes(), outs[i].scalar_type());
        std::memcpy(state_next.data_ptr(), outs[i].const_data_ptr(), outs[i].nbytes());
      } else {
        state_next = outs[i];
      }
    }
    if (in_place[i]) {
      // Written through its data pointer: a tensor made outside inference mode counts the write.
      if (!outs[i].is_inference()) outs[i].unsafeGetTensorImpl()->bump_version();
    } else {
      if (!reuse_out && outs[i].nbytes() <= kReturnedMaxBytes) {
        if (returned.size() == kReturnedKept) returned.erase(returned.begin());
        returned.push_back(outs[i]);
      }
      out.set(slot.key, std::move(outs[i]));
    }
  }
  outs.clear();  // nor to out's
  if (kept) core_.state.keep(std::move(next));
}

absl::Status FusedBackend::flat_status() const {
  if (!layout_) return absl::FailedPreconditionError(absl::StrCat("the policy has no fused plan: ", status_.message()));
  if (!core_.state.empty()) {
    std::vector<std::string> keys;
    for (const NestedKey& key : core_.state.keys()) keys.push_back(policy::key_string(key));
    return absl::FailedPreconditionError(absl::StrCat("the policy is recurrent (state ", absl::StrJoin(keys, ", "),
                                                      "); the flat API carries no state: use act()"));
  }
  return layout_->flat_status();
}

absl::Status FusedBackend::act_flat(const float* observation, int64_t batch, float* action, float* log_prob,
                                    std::optional<nn::InteractionType> type) {
  const CurrentPlan::Hold plan = current_.hold();
  return plan->run_flat(observation, batch, plan_type(type), {core_.options.seed(), calls_.fetch_add(1)},
                        fused::FlatOutputs{action, log_prob});
}

absl::Status FusedBackend::refresh() {
  if (!layout_) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(refresh_mutex_);
  auto lowered = lower();
  if (!lowered.ok()) return lowered.status();
  if (absl::Status same = same_layout(*layout_, **lowered); !same.ok()) return same;
  current_.replace(*std::move(lowered));
  return absl::OkStatus();
}

void FusedBackend::describe(ActorInfo& info) const {
  info.fused_status = status_;
  info.flat_status = flat_status();
  if (!layout_) return;
  info.modules = layout_->description();
  // Of the types the policy runs (its signature's), those the plan computes.
  for (nn::InteractionType type : core_.policy.signature.interaction_types) {
    if (layout_->check(type).ok()) info.fused_interaction_types.push_back(type);
  }
  info.fused_max_batch = core_.options.backend() == Backend::kAuto ? core_.options.fused_max_batch()
                                                                   : std::numeric_limits<int64_t>::max();
  if (info.flat_status.ok()) {
    info.flat_observation_size = layout_->observation_size();
    info.flat_action_size = layout_->action_size();
  }
}

}  // namespace tdp::actor
