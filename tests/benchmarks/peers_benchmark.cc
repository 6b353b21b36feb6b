// The fused plan against its peers in one run, same policies, same batches, one thread, RANDOM
// interaction (an action and its log-prob drawn per row), and the core's peak beside them:
//
//   tests/benchmarks/peers_benchmark.sh          # exports the ONNX models, then runs this binary
//
// - *_FusedFlat:  Actor(backend kFused).act_flat over caller-owned buffers (no allocation).
// - *_FusedAct:   the same plan through the TensorDict act().
// - *_LibTorch:   Actor(backend kLibTorch).act, the eager module tree.
// - *_Ort:        ONNX Runtime's C API (libonnxruntime from the `onnxruntime` wheel, loaded with
//                 dlopen from TDP_ORT_LIBRARY) running peers_export.py's graphs from
//                 TDP_PEER_ONNX_DIR (the same weights, sampling in the graph), one intra-op thread,
//                 all graph optimizations, inputs and outputs bound to buffers made once.
// - *_Aoti:       AOTInductor: peers_export.py's .pt2 packages of the same graphs (CPU, one OpenMP
//                 thread), run by LibTorch's AOTIModelPackageLoader, as a C++ program loads them.
// - PeakFma_*:    a register-only FMA loop (AVX2 + FMA, AVX-512; peak_fma.cc): the core's
//                 multiply-adds per second, the ceiling the MACs counters of the other rows compare with.
// MACs counters: the policy's multiply-adds (its Linear layers) per second of CPU time.
// CartPole: [B, 4] -> MLP(64, 64, tanh) -> Categorical; Pendulum: [B, 3] -> MLP(64, 64, tanh)
// -> NormalParamExtractor -> TanhNormal on [-2, 2].
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/tensordict/tensordict.h"

namespace {

using tdp::TensorDict;
using tdp::actor::Backend;
using tdp::nn::InteractionType;

struct Policy {
  const char* spec;
  const char* onnx;  // file names in TDP_PEER_ONNX_DIR: the ONNX graph and the AOTInductor package
  const char* package;
  int64_t obs_dim;
  int64_t macs_per_row;  // the Linear layers' multiply-adds for one row
  bool categorical;      // the graph's action is a class index (int64), else a float
};
// 4*64 + 64*64 + 64*2 and 3*64 + 64*64 + 64*2.
const Policy kCartPole{"policies/cartpole_categorical.pbtxt", "cartpole.onnx", "cartpole.pt2", 4, 4480, true};
const Policy kPendulum{"policies/pendulum_tanh_gaussian.pbtxt", "pendulum.onnx", "pendulum.pt2", 3, 4416, false};

std::unique_ptr<tdp::actor::Actor> load(const Policy& policy, Backend backend) {
  auto actor = tdp::actor::Actor::load(policy.spec, tdp::actor::ActorOptions().seed(0).backend(backend));
  if (!actor.ok()) return nullptr;
  return std::move(*actor);
}

at::Tensor observations(int64_t batch, int64_t dim) {
  at::Generator gen = at::detail::createCPUGenerator(123);
  return at::randn({batch, dim}, gen);
}

void count(benchmark::State& state, const Policy& policy, int64_t batch) {
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["MACs"] =
      benchmark::Counter(static_cast<double>(batch * policy.macs_per_row), benchmark::Counter::kIsIterationInvariantRate);
}

void FusedFlat(benchmark::State& state, const Policy& policy) {
  auto actor = load(policy, Backend::kFused);
  if (!actor) return state.SkipWithError("cannot load the spec (run from the repository root)");
  const int64_t batch = state.range(0);
  const at::Tensor obs = observations(batch, policy.obs_dim);
  std::vector<float> action(batch * actor->describe().flat_action_size), log_prob(batch);
  const float* observation = obs.const_data_ptr<float>();  // a simulator's array, not a tensor lookup per call
  for (auto _ : state) {
    absl::Status status = actor->act_flat(observation, batch, action.data(), log_prob.data());
    if (!status.ok()) return state.SkipWithError(std::string(status.message()).c_str());
    benchmark::DoNotOptimize(log_prob.data());
  }
  count(state, policy, batch);
}

void ActorAct(benchmark::State& state, const Policy& policy, Backend backend) {
  auto actor = load(policy, backend);
  if (!actor) return state.SkipWithError("cannot load the spec (run from the repository root)");
  const int64_t batch = state.range(0);
  TensorDict td({{"observation", observations(batch, policy.obs_dim)}}, {batch});
  TensorDict action;  // kept until the next call, as a simulator keeps its last action
  for (auto _ : state) {
    action = actor->act(td, InteractionType::kRandom);
    benchmark::DoNotOptimize(action);
  }
  count(state, policy, batch);
}

// ---- ONNX Runtime through its C API ------------------------------------------------------------
// The wheel ships the library, not its header: the declarations below are written from the
// documented C API (onnxruntime_c_api.h). OrtApi is a table of function pointers that only ever
// grows at its end, so a slot's index is stable across releases; these are the slots called.
struct OrtEnv;
struct OrtStatus;
struct OrtMemoryInfo;
struct OrtSession;
struct OrtValue;
struct OrtRunOptions;
struct OrtSessionOptions;
struct OrtApiBase {
  const void* const* (*GetApi)(uint32_t version);
  const char* (*GetVersionString)();
};
enum OrtSlot : int {
  kGetErrorMessage = 2,
  kCreateEnv = 3,
  kCreateSession = 7,
  kRun = 9,
  kCreateSessionOptions = 10,
  kSetSessionGraphOptimizationLevel = 23,
  kSetIntraOpNumThreads = 24,
  kSetInterOpNumThreads = 25,
  kCreateTensorWithDataAsOrtValue = 49,
  kCreateCpuMemoryInfo = 69,
  kReleaseEnv = 92,
  kReleaseStatus = 93,
  kReleaseMemoryInfo = 94,
  kReleaseSession = 95,
  kReleaseValue = 96,
  kReleaseSessionOptions = 100,
};
constexpr uint32_t kOrtApiVersion = 17;  // the API these slots were read from (ORT 1.17); newer libraries serve it
constexpr int kOrtLoggingLevelWarning = 2, kOrtEnableAll = 99, kOrtArenaAllocator = 1, kOrtMemTypeDefault = 0;
constexpr int kOnnxFloat = 1, kOnnxInt64 = 7;

class Ort {
 public:
  // The library at TDP_ORT_LIBRARY, or an error saying what is missing.
  static Ort& get() {
    static Ort ort;
    return ort;
  }
  const std::string& error() const { return error_; }

  template <typename Fn>
  Fn fn(OrtSlot slot) const {
    return reinterpret_cast<Fn>(const_cast<void*>(api_[slot]));
  }
  // An error message for a failed call (and the status released), or "" when it succeeded.
  std::string check(OrtStatus* status) const {
    if (status == nullptr) return "";
    std::string message = fn<const char* (*)(const OrtStatus*)>(kGetErrorMessage)(status);
    fn<void (*)(OrtStatus*)>(kReleaseStatus)(status);
    return message.empty() ? "ONNX Runtime error" : message;
  }
  OrtEnv* env() const { return env_; }
  OrtMemoryInfo* cpu() const { return cpu_; }

 private:
  Ort() {
    const char* path = std::getenv("TDP_ORT_LIBRARY");
    if (path == nullptr) {
      error_ = "TDP_ORT_LIBRARY is not set (run tests/benchmarks/peers_benchmark.sh)";
      return;
    }
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      error_ = std::string("cannot load ") + path + ": " + dlerror();
      return;
    }
    auto get_base = reinterpret_cast<const OrtApiBase* (*)()>(dlsym(lib, "OrtGetApiBase"));
    if (get_base == nullptr) {
      error_ = std::string(path) + " has no OrtGetApiBase";
      return;
    }
    api_ = get_base()->GetApi(kOrtApiVersion);
    if (api_ == nullptr) {
      error_ = std::string(path) + " does not serve C API version 17";
      return;
    }
    error_ = check(fn<OrtStatus* (*)(int, const char*, OrtEnv**)>(kCreateEnv)(kOrtLoggingLevelWarning, "peers", &env_));
    if (error_.empty()) {
      error_ = check(fn<OrtStatus* (*)(int, int, OrtMemoryInfo**)>(kCreateCpuMemoryInfo)(kOrtArenaAllocator,
                                                                                          kOrtMemTypeDefault, &cpu_));
    }
  }
  const void* const* api_ = nullptr;
  OrtEnv* env_ = nullptr;
  OrtMemoryInfo* cpu_ = nullptr;
  std::string error_;
};

// One session on one graph, its input and output bound to buffers made once.
class OrtPeer {
 public:
  OrtPeer(const Policy& policy, int64_t batch) : ort_(Ort::get()) {
    if (!ort_.error().empty()) {
      error_ = ort_.error();
      return;
    }
    const char* dir = std::getenv("TDP_PEER_ONNX_DIR");
    if (dir == nullptr) {
      error_ = "TDP_PEER_ONNX_DIR is not set (run tests/benchmarks/peers_benchmark.sh)";
      return;
    }
    const std::string path = std::string(dir) + "/" + policy.onnx;
    OrtSessionOptions* options = nullptr;
    error_ = ort_.check(ort_.fn<OrtStatus* (*)(OrtSessionOptions**)>(kCreateSessionOptions)(&options));
    if (!error_.empty()) return;
    auto set_int = [&](OrtSlot slot, int value) {
      if (error_.empty()) error_ = ort_.check(ort_.fn<OrtStatus* (*)(OrtSessionOptions*, int)>(slot)(options, value));
    };
    set_int(kSetIntraOpNumThreads, 1);
    set_int(kSetInterOpNumThreads, 1);
    set_int(kSetSessionGraphOptimizationLevel, kOrtEnableAll);
    if (error_.empty()) {
      error_ = ort_.check(ort_.fn<OrtStatus* (*)(OrtEnv*, const char*, const OrtSessionOptions*, OrtSession**)>(
          kCreateSession)(ort_.env(), path.c_str(), options, &session_));
    }
    ort_.fn<void (*)(OrtSessionOptions*)>(kReleaseSessionOptions)(options);
    if (!error_.empty()) return;
    obs_ = observations(batch, policy.obs_dim);
    const int64_t obs_shape[2] = {batch, policy.obs_dim};
    const int64_t out_shape[2] = {batch, 1};
    const bool categorical = policy.categorical;
    action_.resize(batch * 2);  // room for int64 or float
    log_prob_.resize(batch);
    auto make = [&](void* data, size_t bytes, const int64_t* shape, int type, OrtValue** out) {
      if (error_.empty()) {
        error_ = ort_.check(
            ort_.fn<OrtStatus* (*)(const OrtMemoryInfo*, void*, size_t, const int64_t*, size_t, int, OrtValue**)>(
                kCreateTensorWithDataAsOrtValue)(ort_.cpu(), data, bytes, shape, 2, type, out));
      }
    };
    make(obs_.data_ptr<float>(), batch * policy.obs_dim * sizeof(float), obs_shape, kOnnxFloat, &input_);
    make(action_.data(), batch * (categorical ? sizeof(int64_t) : sizeof(float)), out_shape,
         categorical ? kOnnxInt64 : kOnnxFloat, &outputs_[0]);
    make(log_prob_.data(), batch * sizeof(float), out_shape, kOnnxFloat, &outputs_[1]);
  }
  ~OrtPeer() {
    for (OrtValue* v : {input_, outputs_[0], outputs_[1]}) {
      if (v != nullptr) ort_.fn<void (*)(OrtValue*)>(kReleaseValue)(v);
    }
    if (session_ != nullptr) ort_.fn<void (*)(OrtSession*)>(kReleaseSession)(session_);
  }
  const std::string& error() const { return error_; }

  std::string run() {
    static const char* const kInputs[] = {"observation"};
    static const char* const kOutputs[] = {"action", "log_prob"};
    const OrtValue* inputs[] = {input_};
    return ort_.check(ort_.fn<OrtStatus* (*)(OrtSession*, const OrtRunOptions*, const char* const*,
                                             const OrtValue* const*, size_t, const char* const*, size_t, OrtValue**)>(
        kRun)(session_, nullptr, kInputs, inputs, 1, kOutputs, 2, outputs_));
  }
  const float* log_prob() const { return log_prob_.data(); }

 private:
  const Ort& ort_;
  std::string error_;
  OrtSession* session_ = nullptr;
  at::Tensor obs_;
  std::vector<float> action_, log_prob_;
  OrtValue* input_ = nullptr;
  OrtValue* outputs_[2] = {nullptr, nullptr};
};

void OrtRun(benchmark::State& state, const Policy& policy) {
  const int64_t batch = state.range(0);
  OrtPeer peer(policy, batch);
  if (!peer.error().empty()) return state.SkipWithError(peer.error().c_str());
  for (auto _ : state) {
    std::string error = peer.run();
    if (!error.empty()) return state.SkipWithError(error.c_str());
    benchmark::DoNotOptimize(peer.log_prob());
  }
  count(state, policy, batch);
}

// ---- AOTInductor ---------------------------------------------------------------------------------

void AotiRun(benchmark::State& state, const Policy& policy) {
  const char* dir = std::getenv("TDP_PEER_ONNX_DIR");
  if (dir == nullptr) return state.SkipWithError("TDP_PEER_ONNX_DIR is not set (run peers_benchmark.sh)");
  const std::string path = std::string(dir) + "/" + policy.package;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
  try {
    loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(path);
  } catch (const std::exception& error) {
    return state.SkipWithError((path + ": " + error.what()).substr(0, 300).c_str());
  }
  const int64_t batch = state.range(0);
  const std::vector<at::Tensor> inputs{observations(batch, policy.obs_dim)};
  std::vector<at::Tensor> outputs;  // kept until the next call, as ActorAct keeps its action
  for (auto _ : state) {
    outputs = loader->run(inputs);
    benchmark::DoNotOptimize(outputs);
  }
  count(state, policy, batch);
}

void CartPole_FusedFlat(benchmark::State& s) { FusedFlat(s, kCartPole); }
void CartPole_FusedAct(benchmark::State& s) { ActorAct(s, kCartPole, Backend::kFused); }
void CartPole_LibTorch(benchmark::State& s) { ActorAct(s, kCartPole, Backend::kLibTorch); }
void CartPole_Ort(benchmark::State& s) { OrtRun(s, kCartPole); }
void CartPole_Aoti(benchmark::State& s) { AotiRun(s, kCartPole); }
void Pendulum_FusedFlat(benchmark::State& s) { FusedFlat(s, kPendulum); }
void Pendulum_FusedAct(benchmark::State& s) { ActorAct(s, kPendulum, Backend::kFused); }
void Pendulum_LibTorch(benchmark::State& s) { ActorAct(s, kPendulum, Backend::kLibTorch); }
void Pendulum_Ort(benchmark::State& s) { OrtRun(s, kPendulum); }
void Pendulum_Aoti(benchmark::State& s) { AotiRun(s, kPendulum); }

BENCHMARK(CartPole_FusedFlat)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_FusedAct)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_LibTorch)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_Ort)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(CartPole_Aoti)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_FusedFlat)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_FusedAct)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_LibTorch)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_Ort)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(Pendulum_Aoti)->Arg(1)->Arg(64)->Arg(1024);

}  // namespace
