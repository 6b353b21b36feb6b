#include "sdk/actor/cuda_graph_backend.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sdk/actor/batch_buckets.h"
#include "sdk/log/log.h"
#include "sdk/policy/call.h"
#include "sdk/policy/cuda_graph_settings.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::actor {
namespace {

// The policy bound to one request: what a CUDA graph captures for one interaction type.
class PolicyCall : public nn::TensorDictModuleBase {
 public:
  PolicyCall(std::shared_ptr<nn::TensorDictModuleBase> root, nn::SampleRequest request)
      : TensorDictModuleBase("PolicyCall", root->in_keys(), root->out_keys()),
        root_(std::move(root)),
        request_(std::move(request)) {}

 protected:
  TensorDict forward_impl(TensorDict td, const std::optional<TensorDict>&) override {
    return policy::call_policy(*root_, td, request_);
  }

 private:
  std::shared_ptr<nn::TensorDictModuleBase> root_;
  nn::SampleRequest request_;
};

}  // namespace

std::optional<CudaGraphOptions> CudaGraphBackend::settings(const ActorOptions& options,
                                                           const tdpolicy::PolicySpec& spec) {
  if (options.cuda_graph()) {
    const CudaGraphOptions& given = *options.cuda_graph();
    if (!given.enabled()) return std::nullopt;
    if (auto problem = policy::check_cuda_graph_settings(given.warmup(), given.batch_buckets())) {
      throw std::invalid_argument(absl::StrCat("ActorOptions.cuda_graph.", problem->field, ": ", problem->message));
    }
    return given;
  }
  // The spec's block passed validate_spec, which applies the same rules.
  if (!spec.has_cuda_graph() || !spec.cuda_graph().enabled()) return std::nullopt;
  const auto& block = spec.cuda_graph();
  CudaGraphOptions settings;
  if (block.warmup() != 0) settings.warmup(block.warmup());
  if (block.batch_buckets_size() > 0) {
    settings.batch_buckets(std::vector<int64_t>(block.batch_buckets().begin(), block.batch_buckets().end()));
  }
  return settings;
}

CudaGraphBackend::CudaGraphBackend(ActorCore& core, CudaGraphOptions settings)
    : LibTorchBackend(core), settings_(std::move(settings)), pool_(nn::new_cuda_graph_pool()) {
  {
    c10::InferenceMode inference;
    nn::CompositeLpAggregateGuard aggregate(core_.lp_aggregate, /*thread_local_only=*/true);
    const TensorDict given = zero_inputs(1);
    const TensorDict written = policy::call_policy(*core_.policy.module, given.clone(/*deep=*/false),
                                                   nn::SampleRequest{core_.options.interaction_type(), core_.generator});
    // New entries, and inputs the policy replaces (a recurrent state): both come back from replays.
    for (const NestedKey& key : written.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      if (given.contains(key) && written.get(key).is_same(given.get(key))) continue;
      // Each key is one copy per replay: only those act() returns (state keys included).
      const bool returned =
          std::find(core_.returned_keys.begin(), core_.returned_keys.end(), key) != core_.returned_keys.end();
      if (returned || core_.options.return_all_entries()) out_keys_.push_back(key);
    }
  }
  if (!settings_.capture_at_load()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t bucket : settings_.batch_buckets()) graph_for(bucket, core_.options.interaction_type());
}

bool CudaGraphBackend::accepts(const ActCall& call) const {
  const c10::IntArrayRef batch = call.observation.batch_size();
  return !call.generator && batch.size() == 1 && batch[0] > 0;
}

TensorDict CudaGraphBackend::zero_inputs(int64_t batch) const {
  const c10::Device& device = core_.options.device();
  TensorDict td({batch}, device);
  for (const policy::TensorSignature& input : core_.policy.signature.inputs) {
    std::vector<int64_t> shape = {batch};
    shape.insert(shape.end(), input.shape.begin(), input.shape.end());
    td.set(input.key, at::zeros(shape, at::TensorOptions().dtype(input.dtype).device(device)));
  }
  return td;
}

nn::CudaGraphModule& CudaGraphBackend::graph_for(int64_t bucket, std::optional<nn::InteractionType> type) {
  const std::pair<int64_t, int> id{bucket, type ? static_cast<int>(*type) : -1};
  auto found = graphs_.find(id);
  if (found != graphs_.end()) return *found->second;
  auto call = std::make_shared<PolicyCall>(core_.policy.module, nn::SampleRequest{type, core_.generator});
  // The graph reads the declared inputs: a sequence's in_keys can also name entries that its own
  // modules write below (goal_hybrid's "params" holds the heads' outputs).
  auto graph = std::make_shared<nn::CudaGraphModule>(call, nn::CudaGraphModuleOptions()
                                                               .in_keys(core_.policy.signature.input_keys())
                                                               .out_keys(out_keys_)
                                                               .warmup(settings_.warmup())
                                                               .device(core_.options.device())
                                                               .pool(pool_)
                                                               .generators({core_.generator}));
  c10::InferenceMode inference;
  nn::CompositeLpAggregateGuard aggregate(core_.lp_aggregate, /*thread_local_only=*/true);
  for (int64_t call_index = 0; call_index <= settings_.warmup(); ++call_index) graph->forward(zero_inputs(bucket));
  return *graphs_.emplace(id, std::move(graph)).first->second;
}

// Chunks of at most the largest bucket, each padded to its bucket; the outputs' real rows are
// written into `td`, which is returned.
TensorDict CudaGraphBackend::run_module(TensorDict td, const ActCall& call) {
  const int64_t rows = td.batch_size()[0];
  std::vector<std::vector<at::Tensor>> pieces(out_keys_.size());
  std::lock_guard<std::mutex> lock(mutex_);
  for (const BucketChunk& chunk : plan_bucket_chunks(settings_.batch_buckets(), rows)) {
    nn::CudaGraphModule& graph = graph_for(chunk.bucket, call.type);
    TensorDict result = graph.forward(padded_rows(td, graph.in_keys(), chunk));
    for (size_t k = 0; k < out_keys_.size(); ++k) pieces[k].push_back(result.get(out_keys_[k]).narrow(0, 0, chunk.rows));
  }
  for (size_t k = 0; k < out_keys_.size(); ++k) {
    td.set(out_keys_[k], pieces[k].size() == 1 ? pieces[k][0] : at::cat(pieces[k]));
  }
  return td;
}

void CudaGraphBackend::describe(ActorInfo& info) const {
  info.cuda_graph = settings_;
  std::lock_guard<std::mutex> lock(mutex_);
  info.captured_graph_count = static_cast<int64_t>(graphs_.size());
}

}  // namespace tdp::actor
