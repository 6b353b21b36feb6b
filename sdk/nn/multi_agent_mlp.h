// MultiAgentMlp: TorchRL's MultiAgentMLP, one MLP per agent over inputs [..., n_agents,
// n_agent_inputs] giving [..., n_agents, n_agent_outputs]. Each agent reads its own row, or,
// centralized, every agent's rows joined ([..., n_agents * n_agent_inputs]); with share_params
// all agents use one set of weights (a centralized shared MLP computes one output and repeats it
// per agent). The parameters are TorchRL's, under its names: "params.<i>.weight" and
// "params.<i>.bias" for the Linear at layer index i of the agent's MLP (0, 2, 4, ...), stacked
// over agents ([n_agents, out, in]) unless share_params.
//
//   tdp::nn::MultiAgentMlp mappo(tdp::nn::MultiAgentMlpOptions(/*n_agents=*/3, /*n_agent_inputs=*/18,
//                                /*n_agent_outputs=*/4, /*hidden_sizes=*/{256, 256}).centralized(false));
//   at::Tensor params = mappo->forward({observation});          // [B, 3, 18] -> [B, 3, 4]
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tdp::nn {

struct MultiAgentMlpOptions {
  MultiAgentMlpOptions(int64_t n_agents, int64_t n_agent_inputs, int64_t n_agent_outputs,
                       std::vector<int64_t> hidden_sizes)
      : n_agents_(n_agents),
        n_agent_inputs_(n_agent_inputs),
        n_agent_outputs_(n_agent_outputs),
        hidden_sizes_(std::move(hidden_sizes)) {}
  TORCH_ARG(int64_t, n_agents);
  TORCH_ARG(int64_t, n_agent_inputs);
  TORCH_ARG(int64_t, n_agent_outputs);
  TORCH_ARG(std::vector<int64_t>, hidden_sizes);
  TORCH_ARG(bool, centralized) = false;
  TORCH_ARG(bool, share_params) = false;
  // One of activation_names() (sdk/nn/networks.h), after every hidden Linear (and the last, if asked).
  TORCH_ARG(std::string, activation) = "tanh";
  TORCH_ARG(bool, activate_last_layer) = false;
};

class MultiAgentMlpImpl : public torch::nn::Cloneable<MultiAgentMlpImpl> {
 public:
  // Throws std::invalid_argument for a non-positive size or an unknown activation.
  explicit MultiAgentMlpImpl(MultiAgentMlpOptions options);
  void reset() override;
  // Joins the inputs on the last dim (as TorchRL does with several), then runs the agents'
  // MLPs. Throws std::invalid_argument when the agent dim (-2) or the joined width is not the
  // options'.
  at::Tensor forward(const std::vector<at::Tensor>& inputs);
  const MultiAgentMlpOptions& options() const { return options_; }
  // Every agent MLP's in_features: n_agent_inputs, times n_agents when centralized.
  int64_t agent_in_features() const;

 private:
  MultiAgentMlpOptions options_;
  // (weight, bias) per Linear, in order.
  std::vector<std::pair<at::Tensor, at::Tensor>> linears_;
};
TORCH_MODULE(MultiAgentMlp);

}  // namespace tdp::nn
