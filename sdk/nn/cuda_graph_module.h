// CudaGraphModule: a tensordict module replayed from a captured CUDA graph, tensordict's
// `CudaGraphModule`. At batch sizes where a policy is launch-bound (a few small kernels per
// layer), replaying one graph instead of launching each kernel from the host is the GPU
// counterpart of the fused CPU plan.
//
//   auto graphed = std::make_shared<tdp::nn::CudaGraphModule>(
//       policy, tdp::nn::CudaGraphModuleOptions().warmup(2));   // any tensordict module
//   for (;;) {
//     tdp::TensorDict out = graphed->forward(observation);   // on cuda:0, same shapes every step
//   }
//
// The first `warmup` calls run the module eagerly on a side stream, so that lazy initialization
// (cuBLAS handles, allocator growth) happens outside the graph. The next call copies its inputs
// into static buffers and captures one call of the module on that stream; it and every later
// call copy their inputs into those buffers, replay the graph and return its outputs.
//
// A graph replays exactly what was captured. Each in_key must come with the captured device,
// shape and dtype and must not require grad (otherwise: std::invalid_argument naming the key and
// what was captured); the interaction type, control flow and every other choice the module made
// while captured are fixed (wrap one CudaGraphModule per interaction type). Random draws are fresh
// on every replay when they come from the device's default CUDA generator or from a generator in
// options().generators(), which are registered with the graph (the graph-safe RNG of
// ATen/cuda/CUDAGraph.h); drawing from any other generator inside the module fails the capture.
//
// A capture records device work only: a module that synchronizes with the host while captured
// (a .item(), distribution argument validation with validate_args) fails the capture, and the
// error names it; graph-captured policies run with validation off (the default).
//
// Outputs. A module that writes into and returns the TensorDict it is given (TensorDictModule,
// the sequences and the probabilistic modules do) gets its out_keys written into the caller's
// TensorDict; any other module's output TensorDict is returned as a copy. Both are clones of the
// static outputs unless zero_copy(true): then they are the static buffers themselves, valid until
// the next call overwrites them. Static inputs and outputs are separate buffers, so a module that
// writes one of its own in_keys (a recurrent state "h") reads the caller's new "h" on the next
// call, not the one it wrote (the bug tensordict fixed in its PR #1788).
//
// Without CUDA in the build (--config=cuda), without a visible GPU, or for a CPU device, the
// constructor logs one warning and every call runs the module eagerly, as tensordict does.
//
// Thread safety: calls are serialized (the static buffers are shared) and each waits for its
// replay before returning; captures take a process-wide lock, because the default (global)
// capture mode makes any other thread's unsafe CUDA call fail the capture.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <torch/arg.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

struct CudaGraphModuleOptions {
  // Eager calls before the capture (at least 1).
  TORCH_ARG(int64_t, warmup) = 2;
  // The entries copied into the graph's input buffers and read back from its outputs; empty:
  // the wrapped module's in_keys() / out_keys().
  TORCH_ARG(std::optional<std::vector<NestedKey>>, in_keys);
  TORCH_ARG(std::optional<std::vector<NestedKey>>, out_keys);
  // The CUDA device the graph runs on; empty: the current CUDA device.
  TORCH_ARG(std::optional<c10::Device>, device);
  // Return the static output buffers instead of clones (see the header comment).
  TORCH_ARG(bool, zero_copy) = false;
  // A memory pool shared with other graphs (new_cuda_graph_pool()); empty: a private pool.
  // Graphs sharing a pool must never replay concurrently.
  TORCH_ARG(std::optional<c10::MempoolId_t>, pool);
  // CUDA generators the module samples from besides the device's default one.
  TORCH_ARG(std::vector<at::Generator>, generators);
};

// A memory pool id several graphs can capture into (at::cuda::graph_pool_handle); {0, 0}
// where CUDA graphs are unavailable.
c10::MempoolId_t new_cuda_graph_pool();

class CudaGraphModule : public TensorDictModuleBase {
 public:
  // Throws std::invalid_argument for warmup < 1, a null module, a non-CUDA generator, or a
  // device that is not a CUDA device while CUDA graphs are available.
  CudaGraphModule(TensorDictModuleRef module, CudaGraphModuleOptions options = {});
  ~CudaGraphModule() override;

  // Whether calls replay a graph (false: CUDA graphs are unavailable here; calls run eagerly).
  bool enabled() const { return enabled_; }
  // Whether the graph has been captured (after warmup() + 1 calls).
  bool captured() const;
  const std::shared_ptr<TensorDictModuleBase>& module() const { return module_; }
  const CudaGraphModuleOptions& options() const { return options_; }

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  struct Graph;  // the CUDA state; defined only in builds with CUDA

  TensorDict warmup_call(const TensorDict& tensordict);
  void capture(const TensorDict& tensordict);
  TensorDict replay(TensorDict tensordict);
  void check_inputs(const TensorDict& tensordict) const;

  std::shared_ptr<TensorDictModuleBase> module_;
  CudaGraphModuleOptions options_;
  bool enabled_ = false;
  c10::Device device_{c10::kCPU};
  int64_t calls_ = 0;
  std::mutex mutex_;
  std::unique_ptr<Graph> graph_;
};

}  // namespace tdp::nn
