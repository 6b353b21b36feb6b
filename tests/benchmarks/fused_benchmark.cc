// The fused CPU path (sdk/fused) beside the LibTorch path and a hand-written LibTorch
// loop, one run, same policies, RANDOM interaction:
//
//   OMP_NUM_THREADS=1 ./bazelw run -c opt //tests/benchmarks:fused_benchmark -- --benchmark_min_time=0.2
//
// - *_FusedFlat:  Actor(backend kFused).act_flat over caller-owned float buffers (no allocation).
// - *_FusedAct:   the same plan through the TensorDict act() (output tensors allocated per call).
// - *_FusedActInto: act_into() with one output TensorDict kept from call to call (written in place).
// - CartPole_CApi: the C API's tdp_actor_act (sdk/c/tdp_c.h) on the fused plan, caller-owned arrays.
// - *_LibTorch:   Actor(backend kLibTorch).act, the eager module tree.
// - *_Hand:       the ATen ops the modules call, written out (hand_policies.h, as in actor_benchmark).
// CartPole: observation [B, 4] -> MLP(64, 64, tanh) -> Categorical; Pendulum: [B, 3] ->
// MLP(64, 64, tanh) -> NormalParamExtractor -> TanhNormal on [-2, 2]; HalfCheetah: the trained
// samples/agents/trained/halfcheetah-v5_ppo.pb, [B, 17] -> ObservationNorm -> MLP(64, 64, tanh) ->
// Normal over 6 with a state-independent scale. Batch 1, 64 and 1024.
// Recurrent and composite policies have no flat API, so act() only, at batch 1 and 64:
// - Gru_*:        policies/recurrent_gru.pbtxt, the actor keeping the hidden state [B, 32]
//                 (GRUCell(4, 32) -> MLP(64, tanh) -> Categorical);
// - GoalHybrid_*: policies/goal_hybrid.pbtxt, two MLP(64, tanh) heads -> Composite(categorical, normal).
// - AutoThreshold: kAuto's batch threshold (ActorOptions::fused_max_batch) from measurement, the
//                  plan's act() against LibTorch's at batch 64 to 16384 on the four policies:
//     OMP_NUM_THREADS=1 ./bazelw run -c opt //tests/benchmarks:fused_benchmark -- --benchmark_filter=AutoThreshold
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sdk/actor/actor.h"
#include "sdk/c/tdp_c.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/tensordict.h"
#include "tests/benchmarks/hand_policies.h"

namespace {

using tdp::TensorDict;
using tdp::actor::Backend;
using tdp::nn::InteractionType;

constexpr char kCartPole[] = "policies/cartpole_categorical.pbtxt";
constexpr char kPendulum[] = "policies/pendulum_tanh_gaussian.pbtxt";
constexpr char kGru[] = "policies/recurrent_gru.pbtxt";
constexpr char kGoalHybrid[] = "policies/goal_hybrid.pbtxt";
constexpr char kHalfCheetah[] = "samples/agents/trained/halfcheetah-v5_ppo.pb";

std::unique_ptr<tdp::actor::Actor> load(const std::string& spec, Backend backend) {
  auto actor = tdp::actor::Actor::load(spec, tdp::actor::ActorOptions().seed(0).backend(backend));
  if (!actor.ok()) return nullptr;
  return std::move(*actor);
}

at::Tensor observations(int64_t batch, int64_t dim) {
  at::Generator gen = at::detail::createCPUGenerator(123);
  return at::randn({batch, dim}, gen);
}

void FusedFlat(benchmark::State& state, const char* spec, int64_t dim) {
  auto actor = load(spec, Backend::kFused);
  if (!actor) return state.SkipWithError("cannot load the spec (run from the repository root)");
  const int64_t batch = state.range(0);
  const at::Tensor obs = observations(batch, dim);
  const int64_t action_size = actor->describe().flat_action_size;
  // log_prob: [batch], or [batch, action_size] for a per-element Normal.
  std::vector<float> action(batch * action_size), log_prob(batch * action_size);
  const float* observation = obs.const_data_ptr<float>();  // a simulator's array, not a tensor lookup per call
  for (auto _ : state) {
    absl::Status status = actor->act_flat(observation, batch, action.data(), log_prob.data());
    if (!status.ok()) return state.SkipWithError(std::string(status.message()).c_str());
    benchmark::DoNotOptimize(log_prob.data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void ActorAct(benchmark::State& state, const char* spec, int64_t dim, Backend backend) {
  auto actor = load(spec, backend);
  if (!actor) return state.SkipWithError("cannot load the spec (run from the repository root)");
  const int64_t batch = state.range(0);
  TensorDict td({{"observation", observations(batch, dim)}}, {batch});
  TensorDict action;  // kept until the next call, as a simulator keeps its last action
  for (auto _ : state) {
    action = actor->act(td, InteractionType::kRandom);
    benchmark::DoNotOptimize(action);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void ActorActInto(benchmark::State& state, const char* spec, int64_t dim) {
  auto actor = load(spec, Backend::kFused);
  if (!actor) return state.SkipWithError("cannot load the spec (run from the repository root)");
  const int64_t batch = state.range(0);
  TensorDict td({{"observation", observations(batch, dim)}}, {batch});
  TensorDict action;  // its tensors made by the first call, then written in place
  for (auto _ : state) {
    actor->act_into(td, action, InteractionType::kRandom);
    benchmark::DoNotOptimize(action);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void CartPole_CApi(benchmark::State& state) {
  tdp_actor_options* options = nullptr;
  tdp_actor* actor = nullptr;
  if (tdp_options_create(&options) != TDP_OK || tdp_options_set_backend(options, TDP_BACKEND_FUSED) != TDP_OK ||
      tdp_actor_load(kCartPole, options, &actor) != TDP_OK) {
    tdp_options_free(options);
    return state.SkipWithError(tdp_last_error());
  }
  const int64_t batch = state.range(0);
  const at::Tensor obs = observations(batch, 4);
  std::vector<int64_t> action(batch);
  std::vector<float> log_prob(batch);
  const tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data_ptr<float>(), static_cast<size_t>(batch * 4)}};
  const tdp_output out[] = {{"action", TDP_INT64, action.data(), action.size()},
                            {"action_log_prob", TDP_FLOAT32, log_prob.data(), log_prob.size()}};
  for (auto _ : state) {
    if (tdp_actor_act(actor, batch, in, 1, out, 2, TDP_INTERACTION_RANDOM) != TDP_OK) {
      state.SkipWithError(tdp_last_error());
      break;
    }
    benchmark::DoNotOptimize(log_prob.data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  tdp_actor_free(actor);
  tdp_options_free(options);
}

void Hand(benchmark::State& state, const char* spec, int64_t dim) {
  c10::InferenceMode inference;
  auto actor = load(spec, Backend::kLibTorch);
  if (!actor) return state.SkipWithError("cannot load the spec (run from the repository root)");
  const int64_t batch = state.range(0);
  const at::Tensor obs = observations(batch, dim);
  at::Generator gen = at::detail::createCPUGenerator(0);
  tdp::benchmarks::CartPoleHand cartpole{tdp::benchmarks::linear_layers(*actor)};
  tdp::benchmarks::PendulumHand pendulum{tdp::benchmarks::linear_layers(*actor)};
  tdp::benchmarks::HandOutput out;
  for (auto _ : state) {
    out = dim == 4 ? cartpole(obs, gen) : pendulum(obs, gen);
    benchmark::DoNotOptimize(out.log_prob);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void CartPole_FusedFlat(benchmark::State& s) { FusedFlat(s, kCartPole, 4); }
void CartPole_FusedAct(benchmark::State& s) { ActorAct(s, kCartPole, 4, Backend::kFused); }
void CartPole_FusedActInto(benchmark::State& s) { ActorActInto(s, kCartPole, 4); }
void CartPole_LibTorch(benchmark::State& s) { ActorAct(s, kCartPole, 4, Backend::kLibTorch); }
void CartPole_Hand(benchmark::State& s) { Hand(s, kCartPole, 4); }
void Pendulum_FusedFlat(benchmark::State& s) { FusedFlat(s, kPendulum, 3); }
void Pendulum_FusedAct(benchmark::State& s) { ActorAct(s, kPendulum, 3, Backend::kFused); }
void Pendulum_FusedActInto(benchmark::State& s) { ActorActInto(s, kPendulum, 3); }
void Pendulum_LibTorch(benchmark::State& s) { ActorAct(s, kPendulum, 3, Backend::kLibTorch); }
void Pendulum_Hand(benchmark::State& s) { Hand(s, kPendulum, 3); }
void HalfCheetah_FusedFlat(benchmark::State& s) { FusedFlat(s, kHalfCheetah, 17); }
void HalfCheetah_FusedAct(benchmark::State& s) { ActorAct(s, kHalfCheetah, 17, Backend::kFused); }
void HalfCheetah_FusedActInto(benchmark::State& s) { ActorActInto(s, kHalfCheetah, 17); }
void HalfCheetah_LibTorch(benchmark::State& s) { ActorAct(s, kHalfCheetah, 17, Backend::kLibTorch); }
void Gru_FusedAct(benchmark::State& s) { ActorAct(s, kGru, 4, Backend::kFused); }
void Gru_FusedActInto(benchmark::State& s) { ActorActInto(s, kGru, 4); }
void Gru_LibTorch(benchmark::State& s) { ActorAct(s, kGru, 4, Backend::kLibTorch); }
void GoalHybrid_FusedAct(benchmark::State& s) { ActorAct(s, kGoalHybrid, 4, Backend::kFused); }
void GoalHybrid_FusedActInto(benchmark::State& s) { ActorActInto(s, kGoalHybrid, 4); }
void GoalHybrid_LibTorch(benchmark::State& s) { ActorAct(s, kGoalHybrid, 4, Backend::kLibTorch); }

// ---- kAuto's threshold ---------------------------------------------------------------------------
// ActorOptions::fused_max_batch from measurement: per policy, act() on the plan against act() on
// LibTorch at doubling batch sizes from 64, five rounds alternating the two, the median thread
// CPU time per call of each; the threshold is the largest batch below which the plan was never
// slower. Printed as the row's label and counters (one iteration: the body does the timing).

double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Seconds of CPU per act() call, over enough calls for about 10 ms.
double seconds_per_call(tdp::actor::Actor& actor, const TensorDict& td) {
  TensorDict out = actor.act(td, InteractionType::kRandom);  // warm
  double start = thread_cpu_seconds();
  out = actor.act(td, InteractionType::kRandom);
  const double one = std::max(thread_cpu_seconds() - start, 1e-7);
  const int64_t calls = std::max<int64_t>(1, static_cast<int64_t>(0.01 / one));
  start = thread_cpu_seconds();
  for (int64_t i = 0; i < calls; ++i) {
    out = actor.act(td, InteractionType::kRandom);
    benchmark::DoNotOptimize(out);
  }
  return (thread_cpu_seconds() - start) / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void AutoThreshold(benchmark::State& state) {
  constexpr int64_t kLargest = 16384;
  struct Case {
    const char* name;
    const char* spec;
    int64_t dim;
  };
  const Case cases[] = {{"CartPole", kCartPole, 4}, {"Pendulum", kPendulum, 3}, {"Gru", kGru, 4},
                        {"GoalHybrid", kGoalHybrid, 4}};
  std::string label;
  for (auto _ : state) {
    int64_t overall = kLargest;
    for (const Case& c : cases) {
      int64_t threshold = 0;
      std::string ratios;
      for (int64_t batch = 64; batch <= kLargest; batch *= 2) {
        // Fresh actors per batch: a recurrent actor keeps state for one batch size.
        auto fused = load(c.spec, Backend::kFused);
        auto torch = load(c.spec, Backend::kLibTorch);
        if (!fused || !torch) return state.SkipWithError("cannot load the specs (run from the repository root)");
        TensorDict td({{"observation", observations(batch, c.dim)}}, {batch});
        std::vector<double> f, t;
        for (int round = 0; round < 5; ++round) {
          f.push_back(seconds_per_call(*fused, td));
          t.push_back(seconds_per_call(*torch, td));
        }
        const double ratio = median(f) / median(t);
        absl::StrAppend(&ratios, ratios.empty() ? "" : " ", batch, ":", absl::SixDigits(ratio));
        if (ratio > 1.0) break;
        threshold = batch;
      }
      overall = std::min(overall, threshold);
      state.counters[c.name] = static_cast<double>(threshold);
      absl::StrAppend(&label, c.name, " <=", threshold, " (fused/LibTorch ", ratios, "); ");
    }
    state.counters["threshold"] = static_cast<double>(overall);
  }
  state.SetLabel(label);
}
BENCHMARK(CartPole_FusedFlat)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_FusedAct)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_FusedActInto)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_CApi)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_LibTorch)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_Hand)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_FusedFlat)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_FusedAct)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_FusedActInto)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_LibTorch)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_Hand)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(HalfCheetah_FusedFlat)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(HalfCheetah_FusedAct)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(HalfCheetah_FusedActInto)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(HalfCheetah_LibTorch)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Gru_FusedAct)->Arg(1)->Arg(64);
BENCHMARK(Gru_FusedActInto)->Arg(1)->Arg(64);
BENCHMARK(Gru_LibTorch)->Arg(1)->Arg(64);
BENCHMARK(GoalHybrid_FusedAct)->Arg(1)->Arg(64);
BENCHMARK(GoalHybrid_FusedActInto)->Arg(1)->Arg(64);
BENCHMARK(GoalHybrid_LibTorch)->Arg(1)->Arg(64);
BENCHMARK(AutoThreshold)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
