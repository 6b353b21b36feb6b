#include "sdk/nn/cuda_graph_module.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <stdexcept>
#include <utility>

#include "sdk/log/log.h"
#include "sdk/tensordict/tensordict.h"

#if TDP_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace tdp::nn {
namespace {

// Why calls run eagerly here, or nothing when graphs can be captured on `device`.
std::optional<std::string> unavailable_reason(const std::optional<c10::Device>& device) {
#if TDP_WITH_CUDA
  if (!at::hasCUDA()) return "no CUDA GPU is visible";
  if (device && !device->is_cuda()) return absl::StrCat("its device is ", device->str());
  return std::nullopt;
#else
  (void)device;
  return "this binary was built without CUDA (build it with --config=cuda)";
#endif
}

}  // namespace

#if TDP_WITH_CUDA

struct CudaGraphModule::Graph {
  explicit Graph(const c10::Device& device)
      : side_stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {}

  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream side_stream;
  bool ready = false;
  // The buffers the graph reads: filled from each call's inputs.
  TensorDict inputs;
  // What the captured call returned; its out_keys entries are the buffers the graph writes.
  TensorDict result;
  // Whether the module returned the TensorDict it was given (then outputs go back into the
  // caller's TensorDict).
  bool returns_input = false;
  std::vector<at::Tensor> input_buffers;
};

namespace {


// Orders `waiting` after the work already queued on `done`.
void wait_for(const c10::cuda::CUDAStream& waiting, const c10::cuda::CUDAStream& done) {
  at::cuda::CUDAEvent event;
  event.record(done);
  event.block(waiting);
}

// Capture forbids other threads' unsafe CUDA calls (global capture mode); serializing captures
// keeps two of ours from tripping each other.
std::mutex& capture_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

c10::MempoolId_t new_cuda_graph_pool() {
  if (!at::hasCUDA()) return {0, 0};
  return at::cuda::graph_pool_handle();
}

#else

struct CudaGraphModule::Graph {};

c10::MempoolId_t new_cuda_graph_pool() { return {0, 0}; }

#endif  // TDP_WITH_CUDA

CudaGraphModule::CudaGraphModule(TensorDictModuleRef module, CudaGraphModuleOptions options)
    : TensorDictModuleBase("CudaGraphModule"), module_(module.ptr()), options_(std::move(options)) {
  if (module_ == nullptr) throw std::invalid_argument("CudaGraphModule: the module is null");
  if (options_.warmup() < 1) {
    throw std::invalid_argument(
        absl::StrCat("CudaGraphModule: warmup must be at least 1 (one eager call before the capture), got ",
                     options_.warmup()));
  }
  register_module("module", module_);
  set_in_keys(options_.in_keys().value_or(module_->in_keys()));
  set_out_keys(options_.out_keys().value_or(module_->out_keys()));
  if (auto reason = unavailable_reason(options_.device())) {
    logger()->warn("CudaGraphModule: {}; the module runs eagerly on every call", *reason);
    return;
  }
#if TDP_WITH_CUDA
  device_ = options_.device().value_or(c10::Device(c10::kCUDA, c10::cuda::current_device()));
  if (!device_.has_index()) device_ = c10::Device(c10::kCUDA, c10::cuda::current_device());
  for (const at::Generator& generator : options_.generators()) {
    if (!generator.device().is_cuda()) {
      throw std::invalid_argument(absl::StrCat("CudaGraphModule: generators must be CUDA generators, got one on ",
                                               generator.device().str()));
    }
  }
  graph_ = std::make_unique<Graph>(device_);
  enabled_ = true;
#endif
}

CudaGraphModule::~CudaGraphModule() = default;

bool CudaGraphModule::captured() const {
#if TDP_WITH_CUDA
  return graph_ != nullptr && graph_->ready;
#else
  return false;
#endif
}

std::vector<std::string> CudaGraphModule::repr_fields() const {
  return {absl::StrCat("warmup=", options_.warmup()),
          absl::StrCat("device=", enabled_ ? device_.str() : std::string("None (eager)"))};
}

TensorDict CudaGraphModule::forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  if (!enabled_) return module_->forward(tensordict, tensordict_out);
  if (tensordict_out) {
    throw std::invalid_argument(
        "CudaGraphModule: tensordict_out is not supported; the graph writes into the caller's TensorDict");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (calls_ < options_.warmup()) {
    ++calls_;
    return warmup_call(tensordict);
  }
  if (!captured()) capture(tensordict);
  ++calls_;
  return replay(std::move(tensordict));
}

void CudaGraphModule::check_inputs(const TensorDict& tensordict) const {
#if TDP_WITH_CUDA
  for (const NestedKey& key : in_keys()) {
    if (!tensordict.contains(key)) {
      throw std::invalid_argument(
          absl::StrCat("CudaGraphModule: input ", key.to_string(), " is missing; the graph reads it (in_keys: [",
                       absl::StrJoin(in_keys(), ", ", [](std::string* out, const NestedKey& k) { out->append(k.to_string()); }),
                       "])"));
    }
    const at::Tensor value = tensordict.get(key);
    if (value.device() != device_) {
      throw std::invalid_argument(absl::StrCat("CudaGraphModule: input ", key.to_string(), " is on ",
                                               value.device().str(), "; the graph runs on ", device_.str()));
    }
    if (value.requires_grad()) {
      throw std::invalid_argument(absl::StrCat("CudaGraphModule: input ", key.to_string(),
                                               " requires grad; a captured graph records no autograd history"));
    }
    if (!graph_->ready) continue;
    const at::Tensor& captured = graph_->inputs.get(key);
    if (value.sizes() != captured.sizes() || value.scalar_type() != captured.scalar_type()) {
      throw std::invalid_argument(absl::StrCat(
          "CudaGraphModule: input ", key.to_string(), " is ", c10::toString(value.scalar_type()),
          shape_to_string(value.sizes()), "; the graph was captured with ", c10::toString(captured.scalar_type()),
          shape_to_string(captured.sizes()), " (capture one graph per shape)"));
    }
  }
#else
  (void)tensordict;
#endif
}

TensorDict CudaGraphModule::warmup_call(const TensorDict& tensordict) {
#if TDP_WITH_CUDA
  check_inputs(tensordict);
  c10::cuda::CUDAGuard device_guard(device_);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device_.index());
  wait_for(graph_->side_stream, caller);
  TensorDict out;
  {
    c10::cuda::CUDAStreamGuard on_side(graph_->side_stream);
    out = module_->forward(tensordict);
  }
  // The outputs were allocated on the side stream; finishing it before they are used (or freed)
  // on the caller's stream keeps the caching allocator from handing their memory out early.
  graph_->side_stream.synchronize();
  return out;
#else
  return module_->forward(tensordict);
#endif
}

void CudaGraphModule::capture(const TensorDict& tensordict) {
#if TDP_WITH_CUDA
  check_inputs(tensordict);
  Graph& g = *graph_;
  c10::cuda::CUDAGuard device_guard(device_);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device_.index());
  // The static inputs: fresh buffers with the first captured call's values.
  g.inputs = TensorDict(tensordict.batch_size().vec(), device_);
  for (const NestedKey& key : in_keys()) {
    at::Tensor buffer = tensordict.get(key).clone(at::MemoryFormat::Contiguous);
    g.inputs.set(key, buffer);
    g.input_buffers.push_back(buffer);
  }
  // The module writes into a shallow copy: its outputs (even under one of its in_keys) never
  // replace an input buffer.
  TensorDict given = g.inputs.clone(/*deep=*/false);
  caller.synchronize();
  std::lock_guard<std::mutex> capture_lock(capture_mutex());
  {
    c10::cuda::CUDAStreamGuard on_side(g.side_stream);
    for (const at::Generator& generator : options_.generators()) g.graph.register_generator_state(generator);
    g.graph.capture_begin(options_.pool().value_or(c10::MempoolId_t{0, 0}));
    try {
      g.result = module_->forward(given);
    } catch (const std::exception& error) {
      try {
        g.graph.capture_end();
      } catch (...) {
      }
      g.graph.reset();
      throw std::runtime_error(absl::StrCat("CudaGraphModule: the module failed while being captured: ", error.what()));
    }
    g.graph.capture_end();
  }
  g.side_stream.synchronize();
  g.returns_input = g.result.is_same(given);
  for (const NestedKey& key : out_keys()) {
    if (!g.result.contains(key)) {
      throw std::invalid_argument(absl::StrCat("CudaGraphModule: the module did not write out_key ", key.to_string()));
    }
  }
  g.ready = true;
#else
  (void)tensordict;
#endif
}

TensorDict CudaGraphModule::replay(TensorDict tensordict) {
#if TDP_WITH_CUDA
  check_inputs(tensordict);
  Graph& g = *graph_;
  c10::cuda::CUDAGuard device_guard(device_);
  const std::vector<NestedKey>& keys = in_keys();
  for (size_t i = 0; i < keys.size(); ++i) {
    g.input_buffers[i].copy_(tensordict.get(keys[i]), /*non_blocking=*/true);
  }
  g.graph.replay();
  TensorDict out;
  if (g.returns_input) {
    for (const NestedKey& key : out_keys()) {
      const at::Tensor value = g.result.get(key);
      tensordict.set(key, options_.zero_copy() ? value : value.clone());
    }
    out = std::move(tensordict);
  } else {
    out = options_.zero_copy() ? g.result.clone(/*deep=*/false) : g.result.clone(/*deep=*/true);
  }
  // The next call (maybe another thread, on another stream) overwrites the input buffers.
  c10::cuda::getCurrentCUDAStream(device_.index()).synchronize();
  return out;
#else
  return module_->forward(tensordict);
#endif
}

}  // namespace tdp::nn
