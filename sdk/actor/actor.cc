#include "sdk/actor/actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <absl/base/attributes.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>

#include "sdk/actor/batch_buckets.h"
#include "sdk/fused/plan.h"
#include "sdk/log/log.h"
#include "sdk/nn/cuda_graph_module.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/generator_scope.h"
#include "sdk/probabilistic/probabilistic_module_interface.h"
#include "sdk/policy/declared_inputs.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::actor {
namespace {

// The actor's own random stream lives on its device: CUDA sampling kernels only take a CUDA
// generator. A CUDA device needs the CUDA backend linked in (--config=cuda links libtorch_cuda)
// and a visible GPU; without them this is a load error, not a failure at the first act().
at::Generator make_generator(const c10::Device& device, uint64_t seed) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
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

const policy::Policy& checked(const policy::Policy& policy) {
  if (policy.module == nullptr) throw std::invalid_argument("Actor: the policy has no module");
  return policy;
}

// One call of the policy with the per-call choices as a value: the probabilistic root takes them
// as an argument; any other root reads them from scopes set here. Always inlined: act() calls
// the root's forward_with_request directly, without a frame of its own in between.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline TensorDict call_policy(nn::TensorDictModuleBase& root,
                                                           nn::ProbabilisticModuleInterface* probabilistic,
                                                           const TensorDict& td, const nn::SampleRequest& request) {
  if (probabilistic != nullptr) return probabilistic->forward_with_request(td, request);
  nn::InteractionTypeGuard scope(request.type, /*thread_local_only=*/true);
  nn::GeneratorGuard stream(*request.generator);
  return root.forward(td);
}

// The policy bound to one request: what a CUDA graph captures for one interaction type.
class PolicyCall : public nn::TensorDictModuleBase {
 public:
  PolicyCall(std::shared_ptr<nn::TensorDictModuleBase> root, nn::ProbabilisticModuleInterface* probabilistic,
             nn::SampleRequest request)
      : TensorDictModuleBase("PolicyCall", root->in_keys(), root->out_keys()),
        root_(std::move(root)),
        probabilistic_(probabilistic),
        request_(std::move(request)) {}

 protected:
  TensorDict forward_impl(TensorDict td, const std::optional<TensorDict>&) override {
    return call_policy(*root_, probabilistic_, td, request_);
  }

 private:
  std::shared_ptr<nn::TensorDictModuleBase> root_;
  nn::ProbabilisticModuleInterface* probabilistic_;
  nn::SampleRequest request_;
};

// The CUDA-graph settings: the actor's options, else the spec's block. Checked either way.
std::optional<CudaGraphOptions> graph_settings(const ActorOptions& options, const tdpolicy::PolicySpec& spec) {
  std::optional<CudaGraphOptions> settings = options.cuda_graph();
  std::string origin = "ActorOptions.cuda_graph";
  if (!settings && spec.has_cuda_graph()) {
    const auto& block = spec.cuda_graph();
    settings = CudaGraphOptions().enabled(block.enabled());
    if (block.warmup() != 0) settings->warmup(block.warmup());
    if (block.batch_buckets_size() > 0) {
      settings->batch_buckets(std::vector<int64_t>(block.batch_buckets().begin(), block.batch_buckets().end()));
    }
    origin = "the spec's cuda_graph";
  }
  if (!settings || !settings->enabled()) return std::nullopt;
  if (auto problem = policy::check_cuda_graph_settings(settings->warmup(), settings->batch_buckets())) {
    throw std::invalid_argument(absl::StrCat(origin, ".", problem->field, ": ", problem->message));
  }
  return settings;
}

}  // namespace

class Actor::Impl {
 public:
  Impl(policy::Policy loaded, ActorOptions actor_options)
      : policy(std::move(loaded)),
        options(std::move(actor_options)),
        lp_aggregate(options.composite_lp_aggregate() ? *options.composite_lp_aggregate() : nn::composite_lp_aggregate()),
        generator(make_generator(options.device(), options.seed())),
        state_keys(policy::state_keys(checked(policy).spec)),
        declared_inputs(policy.spec),
        probabilistic(dynamic_cast<nn::ProbabilisticModuleInterface*>(policy.module.get())) {
    lower_fused();
    policy.module->to(options.device());
    policy.module->eval();
    for (const std::string& key : policy.spec.output_keys()) {
      if (auto parsed = policy::parse_key(key); parsed.ok()) output_keys.push_back(*std::move(parsed));
    }
    // Aggregated, a composite's log-prob is one entry ("sample_log_prob") that a spec written
    // for per-part log-probs does not list: the actor returns what its mode computes.
    if (lp_aggregate && probabilistic != nullptr) {
      for (const NestedKey& key : probabilistic->log_prob_keys()) {
        if (std::find(output_keys.begin(), output_keys.end(), key) == output_keys.end()) output_keys.push_back(key);
      }
    }
    returned_keys = output_keys;
    for (const NestedKey& key : state_keys) {
      if (std::find(returned_keys.begin(), returned_keys.end(), key) == returned_keys.end()) {
        returned_keys.push_back(key);
      }
    }
    map_fused_outputs();
    for (const NestedKey& key : state_keys) {
      for (const policy::DeclaredInput& input : declared_inputs.inputs()) {
        if (input.key == key) {
          state_shapes.push_back(input.shape);
          break;
        }
      }
    }
    set_up_graphs();
  }

  policy::Policy policy;
  ActorOptions options;
  // The aggregation mode the policy was built under; every call runs under it.
  bool lp_aggregate;
  at::Generator generator;
  std::vector<NestedKey> output_keys;
  std::vector<NestedKey> state_keys;
  // What act() returns (without return_all_entries): output_keys, then any state key they lack.
  std::vector<NestedKey> returned_keys;
  // What every call's observation is checked against (the kept state keys may be absent).
  policy::DeclaredInputs declared_inputs;
  // The root as a probabilistic module (resolved once, here), which act() calls with the
  // per-call choices as an argument; null for other roots, which read them from the scopes.
  nn::ProbabilisticModuleInterface* probabilistic;
  std::vector<std::vector<int64_t>> state_shapes;
  std::mutex state_mutex;
  std::optional<TensorDict> state;

  // Whether a call takes the recurrent state from the actor (the observation carries none of
  // it) rather than from the observation (it carries all). Throws when it carries only some.
  bool uses_kept_state(const TensorDict& observation) const {
    size_t carried = 0;
    for (const NestedKey& key : state_keys) carried += observation.contains(key) ? 1 : 0;
    // Every call asks this (the fused path's too): key names are built only for the error.
    if (carried == 0 || carried == state_keys.size()) return carried == 0 && !state_keys.empty();
    std::vector<std::string> given;
    std::vector<std::string> missing;
    for (const NestedKey& key : state_keys) {
      (observation.contains(key) ? given : missing).push_back(policy::key_string(key));
    }
    throw std::invalid_argument(absl::StrCat(
        "Actor.act: the observation carries the recurrent state ", absl::StrJoin(given, ", "), " but not ",
        absl::StrJoin(missing, ", "), "; pass every state key or none (the actor then supplies its kept state)"));
  }

  // The kept state for a call of `batch` (one tensor per state key): zeros when there is none
  // yet or it was kept for another batch.
  std::vector<at::Tensor> kept_state(const std::vector<int64_t>& batch) {
    std::lock_guard<std::mutex> lock(state_mutex);
    const c10::Device& device = options.device();
    if (!state || state->batch_size() != c10::IntArrayRef(batch)) {
      state = TensorDict(batch, device);
      for (size_t i = 0; i < state_keys.size(); ++i) {
        std::vector<int64_t> shape = batch;
        shape.insert(shape.end(), state_shapes[i].begin(), state_shapes[i].end());
        state->set(state_keys[i], at::zeros(shape, at::TensorOptions().device(device)));
      }
    }
    std::vector<at::Tensor> tensors;
    for (const NestedKey& key : state_keys) tensors.push_back(state->get(key));
    return tensors;
  }

  // Keeps the state a call wrote.
  void keep_state(const TensorDict& out) {
    std::lock_guard<std::mutex> lock(state_mutex);
    if (!state) return;  // reset() while the call ran: the next call starts from zeros
    for (const NestedKey& key : state_keys) state->set(key, out.get(key));
  }

  // ---- CUDA graphs (sdk/nn/cuda_graph_module.h), on a GPU ----
  std::optional<CudaGraphOptions> graph_options;
  // The graphs share one memory pool, so they must never replay concurrently: one call at a time.
  std::mutex graph_mutex;
  // By (bucket, interaction type or -1 for the modules' defaults).
  std::map<std::pair<int64_t, int>, std::shared_ptr<nn::CudaGraphModule>> graphs;
  c10::MempoolId_t graph_pool{0, 0};
  // What a graph copies back: the entries an eager call adds to its input or replaces in it (a
  // recurrent state) that act() returns (all of them with return_all_entries). Found by one eager
  // call, not from the root's out_keys, which can miss some (a composite's per-part log-probs under
  // aggregation are written undeclared, as in tensordict): graphs return what eager calls return.
  std::vector<NestedKey> graph_out_keys;

  void set_up_graphs() {
    std::optional<CudaGraphOptions> settings = graph_settings(options, policy.spec);
    if (!settings) return;
    if (!options.device().is_cuda()) {
      logger()->warn("{}: cuda_graph is enabled but the actor runs on {}; calls run eagerly", policy.spec.name(),
                     options.device().str());
      return;
    }
    graph_options = std::move(settings);
    graph_pool = nn::new_cuda_graph_pool();
    {
      c10::InferenceMode inference;
      nn::CompositeLpAggregateGuard aggregate(lp_aggregate, /*thread_local_only=*/true);
      const TensorDict given = zero_inputs(1);
      const TensorDict written = call_policy(*policy.module, probabilistic, given.clone(/*deep=*/false),
                                             nn::SampleRequest{options.interaction_type(), generator});
      // New entries, and inputs the policy replaces (a recurrent state): both come back from replays.
      for (const NestedKey& key : written.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
        if (given.contains(key) && written.get(key).is_same(given.get(key))) continue;
        // Each key is one copy per replay: only those act() returns (state keys included).
        const bool returned = std::find(returned_keys.begin(), returned_keys.end(), key) != returned_keys.end();
        if (returned || options.return_all_entries()) graph_out_keys.push_back(key);
      }
    }
    if (!graph_options->capture_at_load()) return;
    std::lock_guard<std::mutex> lock(graph_mutex);
    for (int64_t bucket : graph_options->batch_buckets()) graph_for(bucket, options.interaction_type());
  }

  // Zeros of every declared input (recurrent state included) for `batch` rows, on the device.
  TensorDict zero_inputs(int64_t batch) const {
    TensorDict td({batch}, options.device());
    for (const policy::DeclaredInput& input : declared_inputs.inputs()) {
      std::vector<int64_t> shape = {batch};
      shape.insert(shape.end(), input.shape.begin(), input.shape.end());
      td.set(input.key, at::zeros(shape, at::TensorOptions().dtype(input.dtype).device(options.device())));
    }
    return td;
  }

  // The graph for (bucket, type), captured now if it is not yet: warmup eager calls and the
  // capture, all on zeros, so every call that reaches it replays. Needs graph_mutex.
  nn::CudaGraphModule& graph_for(int64_t bucket, std::optional<nn::InteractionType> type) {
    const std::pair<int64_t, int> id{bucket, type ? static_cast<int>(*type) : -1};
    auto found = graphs.find(id);
    if (found != graphs.end()) return *found->second;
    auto call = std::make_shared<PolicyCall>(policy.module, probabilistic, nn::SampleRequest{type, generator});
    // The graph reads the declared inputs: a sequence's in_keys can also name entries that its own
    // modules write below (goal_hybrid's "params" holds the heads' outputs).
    std::vector<NestedKey> in_keys;
    for (const policy::DeclaredInput& input : declared_inputs.inputs()) in_keys.push_back(input.key);
    auto graph = std::make_shared<nn::CudaGraphModule>(call, nn::CudaGraphModuleOptions()
                                                                 .in_keys(std::move(in_keys))
                                                                 .out_keys(graph_out_keys)
                                                                 .warmup(graph_options->warmup())
                                                                 .device(options.device())
                                                                 .pool(graph_pool)
                                                                 .generators({generator}));
    c10::InferenceMode inference;
    nn::CompositeLpAggregateGuard aggregate(lp_aggregate, /*thread_local_only=*/true);
    for (int64_t call_index = 0; call_index <= graph_options->warmup(); ++call_index) graph->forward(zero_inputs(bucket));
    return *graphs.emplace(id, std::move(graph)).first->second;
  }

  // One call through the graphs: chunks of at most the largest bucket, each padded to its bucket;
  // the outputs' real rows are written into `td`, which is returned.
  TensorDict call_graphs(TensorDict td, std::optional<nn::InteractionType> type) {
    const int64_t rows = td.batch_size()[0];
    const std::vector<NestedKey>& keys = graph_out_keys;
    std::vector<std::vector<at::Tensor>> pieces(keys.size());
    std::lock_guard<std::mutex> lock(graph_mutex);
    for (const BucketChunk& chunk : plan_bucket_chunks(graph_options->batch_buckets(), rows)) {
      nn::CudaGraphModule& graph = graph_for(chunk.bucket, type);
      TensorDict result = graph.forward(padded_rows(td, graph.in_keys(), chunk));
      for (size_t k = 0; k < keys.size(); ++k) pieces[k].push_back(result.get(keys[k]).narrow(0, 0, chunk.rows));
    }
    for (size_t k = 0; k < keys.size(); ++k) td.set(keys[k], pieces[k].size() == 1 ? pieces[k][0] : at::cat(pieces[k]));
    return td;
  }

  // ---- the fused CPU plan (sdk/fused) ----
  std::shared_ptr<const fused::FusedPlan> plan;
  absl::Status plan_status = absl::OkStatus();
  // Calls on the plan so far: the Philox counter of the next one.
  std::atomic<uint64_t> fused_calls{0};
  // The plan's slots that act() returns: returned_keys', and every entry with return_all_entries.
  std::vector<int> fused_output_slots;
  std::vector<int> fused_all_slots;

  // A returned key the plan lacks is left out, as LibTorch's path's non-strict select does.
  void map_fused_outputs() {
    if (!plan) return;
    for (const NestedKey& key : returned_keys) {
      if (const int s = plan->find_slot(key); s >= 0) fused_output_slots.push_back(s);
    }
  }

  // The plan of the policy's module as it is now, lowered under the actor's aggregation mode,
  // which fixed the probabilistic modules' log-prob keys.
  absl::StatusOr<std::shared_ptr<const fused::FusedPlan>> lower_plan() const {
    nn::CompositeLpAggregateGuard aggregate(lp_aggregate, /*thread_local_only=*/true);
    return fused::FusedPlan::lower(policy);
  }

  void lower_fused() {
    if (options.backend() == Backend::kLibTorch) {
      plan_status = absl::FailedPreconditionError("the actor's backend is kLibTorch");
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
      plan_status = precondition;
      return;
    }
    auto lowered = lower_plan();
    if (precondition.ok() && lowered.ok()) {
      plan = *std::move(lowered);
      // return_all_entries: every entry the modules write, after the observation's.
      const std::vector<int>& inputs = plan->input_slots();
      for (int s = 0; s < plan->slot_count(); ++s) {
        if (std::find(inputs.begin(), inputs.end(), s) == inputs.end() && plan->slot(s).key != NestedKey("_")) {
          fused_all_slots.push_back(s);
        }
      }
      return;
    }
    plan_status = precondition.ok() ? lowered.status() : precondition;
    if (options.backend() == Backend::kFused) {
      throw std::invalid_argument(
          absl::StrCat("backend kFused: ", lowered.ok() ? plan_status.message() : lowered.status().message()));
    }
  }

  nn::InteractionType fused_type(std::optional<nn::InteractionType> type) const {
    return type.value_or(plan->default_interaction_type());
  }

  bool fused_for(int64_t batch, std::optional<nn::InteractionType> type) const {
    if (!plan) return false;
    if (options.backend() == Backend::kAuto && batch > options.fused_max_batch()) return false;
    return plan->check(fused_type(type)).ok();
  }

  // act() on the plan, or nothing when this call takes the LibTorch path.
  std::optional<TensorDict> try_fused(const TensorDict& observation, std::optional<nn::InteractionType> type,
                                      bool has_generator) {
    if (!plan || has_generator || observation.batch_size().size() != 1) {
      return std::nullopt;
    }
    const int64_t batch = observation.batch_size()[0];
    if (!fused_for(batch, type)) return std::nullopt;
    // The plan's inputs, each well-formed (else LibTorch's path says what is wrong); a state key
    // the observation lacks comes from the kept state, by the rules of LibTorch's path.
    thread_local std::vector<at::Tensor> inputs;
    thread_local std::vector<const float*> input_data;
    inputs.clear();
    input_data.clear();
    for (int s : plan->input_slots()) {
      const auto& slot = plan->slot(s);
      if (!observation.contains(slot.key)) {
        if (std::find(state_keys.begin(), state_keys.end(), slot.key) != state_keys.end()) {
          inputs.emplace_back();
          continue;
        }
        inputs.clear();
        return std::nullopt;
      }
      at::Tensor x = observation.get(slot.key);
      if (x.scalar_type() != at::kFloat || !x.device().is_cpu() || x.dim() != 2 || x.size(1) != slot.width) {
        inputs.clear();
        return std::nullopt;
      }
      inputs.push_back(std::move(x));
    }
    c10::InferenceMode inference;
    const bool kept = uses_kept_state(observation);
    if (kept) {
      const std::vector<at::Tensor> state_now = kept_state({batch});
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].defined()) continue;
        const NestedKey& key = plan->slot(plan->input_slots()[i]).key;
        inputs[i] = state_now[std::find(state_keys.begin(), state_keys.end(), key) - state_keys.begin()];
      }
    }
    for (at::Tensor& x : inputs) {
      x = x.contiguous();
      input_data.push_back(x.data_ptr<float>());
    }
    const std::vector<int>& slots = options.return_all_entries() ? fused_all_slots : fused_output_slots;
    // Per-thread scratch, reused from call to call: the only allocations per call are the
    // output tensors themselves.
    thread_local std::vector<at::Tensor> outs;
    thread_local std::vector<fused::FusedPlan::Destination> destinations;
    thread_local std::vector<int64_t> shape;
    outs.clear();
    destinations.clear();
    // Integer entries (categorical samples) go through a per-thread float buffer and are
    // converted in a loop: cheaper at batch 1 than a dispatched .to(kLong).
    thread_local std::vector<float> integers;
    int64_t integer_floats = 0;
    for (int s : slots) integer_floats += plan->slot(s).integer ? batch * plan->slot(s).width : 0;
    if (static_cast<int64_t>(integers.size()) < integer_floats) integers.resize(integer_floats);
    int64_t integer_offset = 0;
    for (int s : slots) {
      const auto& slot = plan->slot(s);
      shape.assign(1, batch);
      shape.insert(shape.end(), slot.shape.begin(), slot.shape.end());
      outs.push_back(at::empty(shape, slot.integer ? at::kLong : at::kFloat));
      if (slot.integer) {
        destinations.push_back({s, integers.data() + integer_offset});
        integer_offset += batch * slot.width;
      } else {
        destinations.push_back({s, outs.back().data_ptr<float>()});
      }
    }
    plan->run(input_data.data(), batch, fused_type(type), {options.seed(), fused_calls.fetch_add(1)},
              destinations.data(), static_cast<int>(destinations.size()));
    inputs.clear();  // no reference to the caller's tensors outlives the call
    TensorDict out = options.return_all_entries() ? observation.clone(/*deep=*/false) : TensorDict({batch});
    for (size_t i = 0; i < slots.size(); ++i) {
      const auto& slot = plan->slot(slots[i]);
      if (slot.integer) {
        int64_t* to = outs[i].data_ptr<int64_t>();
        for (int64_t j = 0; j < batch * slot.width; ++j) to[j] = static_cast<int64_t>(destinations[i].data[j]);
      }
      out.set(slot.key, std::move(outs[i]));
    }
    if (kept) keep_state(out);
    return out;
  }
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

TensorDict Actor::act(const TensorDict& observation) { return act(observation, impl_->options.interaction_type()); }

TensorDict Actor::act(const TensorDict& observation, std::optional<nn::InteractionType> type,
                      std::optional<at::Generator> generator) {
  Impl& self = *impl_;
  if (auto fused = self.try_fused(observation, type, generator.has_value())) return *std::move(fused);
  // Checked here, not before the fused plan, which takes only a well-formed observation (its
  // float32 inputs at the declared widths) and costs about a microsecond a call.
  self.declared_inputs.check(observation, "Actor.act", self.state_keys);
  c10::InferenceMode inference;
  nn::CompositeLpAggregateGuard aggregate(self.lp_aggregate, /*thread_local_only=*/true);
  const nn::SampleRequest request{type, generator.value_or(self.generator)};
  // to() builds a new TensorDict (sharing tensors already on the device), as clone does: one
  // copy of the structure, not two, when the observation does not carry the actor's device.
  const c10::Device& device = self.options.device();
  TensorDict td = observation.device() == device ? observation.clone(/*deep=*/false) : observation.to(device);
  // The state comes whole from the observation (stateless form) or whole from the actor.
  const bool uses_kept_state = self.uses_kept_state(td);
  if (uses_kept_state) {
    const std::vector<at::Tensor> kept = self.kept_state(td.batch_size().vec());
    for (size_t i = 0; i < self.state_keys.size(); ++i) td.set(self.state_keys[i], kept[i]);
  }
  const bool graphed = self.graph_options && !generator && td.batch_size().size() == 1 && td.batch_size()[0] > 0;
  TensorDict out = graphed ? self.call_graphs(td, type) : call_policy(*self.policy.module, self.probabilistic, td, request);
  if (uses_kept_state) self.keep_state(out);
  if (self.options.return_all_entries()) return out;
  return out.select(self.returned_keys, /*strict=*/false);
}

TensorDict Actor::act(const std::vector<std::pair<NestedKey, at::Tensor>>& observation) {
  std::vector<int64_t> batch;
  bool found = false;
  for (const auto& input : impl_->policy.spec.inputs()) {
    NestedKey key = *policy::parse_key(input.key());
    for (const auto& [name, tensor] : observation) {
      if (name == key && !found) {
        const int64_t dims = tensor.dim() - input.shape_size();
        if (dims < 0) {
          throw std::invalid_argument(absl::StrCat("Actor.act: input ", key.to_string(), " has ", tensor.dim(),
                                                   " dims but its declared shape has ", input.shape_size()));
        }
        batch.assign(tensor.sizes().begin(), tensor.sizes().begin() + dims);
        found = true;
      }
    }
  }
  TensorDict td(batch);
  for (const auto& [key, tensor] : observation) td.set(key, tensor);
  return act(td, impl_->options.interaction_type());
}

void Actor::reset(const at::Tensor& env_mask) {
  Impl& self = *impl_;
  std::lock_guard<std::mutex> lock(self.state_mutex);
  if (!self.state) return;
  if (env_mask.scalar_type() != at::kBool || env_mask.dim() != 1 ||
      env_mask.size(0) != self.state->batch_size()[0]) {
    throw std::invalid_argument(absl::StrCat("Actor.reset: env_mask must be a bool tensor of shape [",
                                             self.state->batch_size()[0], "]"));
  }
  c10::InferenceMode inference;
  at::Tensor mask = env_mask.to(self.options.device());
  for (const NestedKey& key : self.state_keys) {
    at::Tensor kept = self.state->get(key);
    std::vector<int64_t> view(kept.dim(), 1);
    view[0] = kept.size(0);
    self.state->set(key, kept.masked_fill(mask.view(view), 0));
  }
}

void Actor::reset() {
  std::lock_guard<std::mutex> lock(impl_->state_mutex);
  impl_->state.reset();
}

absl::Status Actor::act_flat(const float* observation, int64_t batch, float* action, float* log_prob,
                             std::optional<nn::InteractionType> type) {
  Impl& self = *impl_;
  if (!self.plan) {
    return absl::FailedPreconditionError(absl::StrCat("Actor.act_flat needs the fused plan: ", self.plan_status.message()));
  }
  if (absl::Status flat = flat_status(); !flat.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("Actor.act_flat: ", flat.message()));
  }
  if (!type) type = self.options.interaction_type();
  const fused::FusedPlan& plan = *self.plan;
  if (self.fused_for(batch, type)) {
    return plan.run_flat(observation, batch, self.fused_type(type), {self.options.seed(), self.fused_calls.fetch_add(1)},
                         fused::FlatOutputs{action, log_prob});
  }
  if (batch < 0 || (batch > 0 && (observation == nullptr || action == nullptr))) {
    return absl::InvalidArgumentError("Actor.act_flat: a negative batch, or a null observation or action buffer");
  }
  // LibTorch: larger batches under kAuto, and interaction types the plan has no closed form for.
  try {
    at::Tensor obs = at::from_blob(const_cast<float*>(observation), {batch, plan.observation_size()}, at::kFloat);
    TensorDict out = act(TensorDict({{plan.slot(plan.input_slots()[0]).key, obs}}, {batch}), type);
    auto copy = [&](int slot, float* to) {
      const auto& s = plan.slot(slot);
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

absl::Status Actor::flat_status() const {
  const Impl& self = *impl_;
  if (!self.plan) {
    return absl::FailedPreconditionError(absl::StrCat("the policy has no fused plan: ", self.plan_status.message()));
  }
  if (!self.state_keys.empty()) {
    std::vector<std::string> keys;
    for (const NestedKey& key : self.state_keys) keys.push_back(policy::key_string(key));
    return absl::FailedPreconditionError(absl::StrCat("the policy is recurrent (state ", absl::StrJoin(keys, ", "),
                                                      "); the flat API carries no state: use act()"));
  }
  return self.plan->flat_status();
}
int64_t Actor::flat_observation_size() const { return flat_status().ok() ? impl_->plan->observation_size() : 0; }
int64_t Actor::flat_action_size() const { return flat_status().ok() ? impl_->plan->action_size() : 0; }
bool Actor::uses_fused(int64_t batch, std::optional<nn::InteractionType> type) const {
  return impl_->fused_for(batch, type);
}
absl::Status Actor::fused_status() const { return impl_->plan_status; }
std::vector<std::string> Actor::describe_backend() const {
  if (impl_->plan) return impl_->plan->description();
  return {absl::StrCat("module: LibTorch (", impl_->plan_status.message(), ")")};
}

absl::Status Actor::refresh_parameters() {
  Impl& self = *impl_;
  if (!self.plan) return absl::OkStatus();
  auto lowered = self.lower_plan();
  if (!lowered.ok()) return lowered.status();
  self.plan = *std::move(lowered);
  return absl::OkStatus();
}

const std::optional<CudaGraphOptions>& Actor::cuda_graph() const { return impl_->graph_options; }
int64_t Actor::captured_graph_count() const {
  std::lock_guard<std::mutex> lock(impl_->graph_mutex);
  return static_cast<int64_t>(impl_->graphs.size());
}

void Actor::set_interaction_type(std::optional<nn::InteractionType> type) { impl_->options.interaction_type(type); }
const ActorOptions& Actor::options() const { return impl_->options; }
const tdpolicy::PolicySpec& Actor::spec() const { return impl_->policy.spec; }
const std::vector<NestedKey>& Actor::state_keys() const { return impl_->state_keys; }
const std::shared_ptr<nn::TensorDictModuleBase>& Actor::module() const { return impl_->policy.module; }

}  // namespace tdp::actor
