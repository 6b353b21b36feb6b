// The hand-written LibTorch baselines the actor and fused benchmarks time the SDK against: the
// ready policies' computation as plain ATen calls, with the weights of a loaded actor.
//
//   CartPoleHand hand{linear_layers(*actor)};
//   HandOutput out = hand(observation, generator);   // action [B], log_prob [B]
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <utility>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/nn/tensordict_module_base.h"
#include "tests/benchmarks/hand_normal.h"

namespace tdp::benchmarks {

// The actor's Linear layers in order, as (weight, bias): the MLP is the only module with
// parameters in both specs, and parameters() lists layers in registration order.
inline std::vector<std::pair<at::Tensor, at::Tensor>> linear_layers(const tdp::actor::Actor& actor) {
  std::vector<at::Tensor> params = actor.module()->parameters();
  std::vector<std::pair<at::Tensor, at::Tensor>> layers;
  for (size_t i = 0; i + 1 < params.size(); i += 2) layers.emplace_back(params[i].detach(), params[i + 1].detach());
  return layers;
}

inline at::Tensor mlp(const std::vector<std::pair<at::Tensor, at::Tensor>>& layers, const at::Tensor& input) {
  at::Tensor x = input;
  for (size_t i = 0; i < layers.size(); ++i) {
    x = at::linear(x, layers[i].first, layers[i].second);
    if (i + 1 < layers.size()) x = x.tanh();
  }
  return x;
}

struct HandOutput {
  at::Tensor action, log_prob;
};

// Categorical: normalize the logits, draw with multinomial, gather the log-prob.
struct CartPoleHand {
  std::vector<std::pair<at::Tensor, at::Tensor>> layers;
  at::Tensor logits, normalized, probs;  // kept alive, as TensorDict entries are
  HandOutput operator()(const at::Tensor& obs, at::Generator& gen) {
    logits = mlp(layers, obs);
    normalized = logits - logits.logsumexp(-1, /*keepdim=*/true);
    probs = normalized.softmax(-1);
    at::Tensor action = at::multinomial(probs, 1, /*replacement=*/true, gen).t().reshape({obs.size(0)});
    return {action, normalized.gather(-1, action.unsqueeze(-1)).squeeze(-1)};
  }
};

// TanhNormal on [-2, 2] with NormalParamExtractor("biased_softplus_1.0", scale_lb 1e-4).
struct PendulumHand {
  std::vector<std::pair<at::Tensor, at::Tensor>> layers;
  const double shift = std::log(std::max(std::expm1(1.0 - 0.01), 1e-6));
  const double lim = 1.0 - 1e-6;  // float32's resolution, as TorchRL's safe tanh
  at::Tensor params, loc, scale;
  HandOutput operator()(const at::Tensor& obs, at::Generator& gen) {
    params = mlp(layers, obs);
    auto halves = params.chunk(2, -1);
    loc = halves[0];
    scale = at::softplus(halves[1].add(shift)).add_(0.01).clamp_min(1e-4);  // as BiasedSoftplus
    at::Tensor x = at::normal(loc, scale, gen);
    at::Tensor action = x.tanh().clamp(-lim, lim).mul(2.0);
    // log-prob of the action, from the action (TorchRL's TanhNormal.log_prob).
    at::Tensor pre = action.div(2.0).clamp(-lim, lim).atanh();
    at::Tensor base = normal_log_density(pre, loc, scale);
    at::Tensor jacobian = 2. * (std::log(2.) - pre - at::softplus(-2. * pre)) + std::log(2.0);
    return {action, (base - jacobian).sum(-1)};
  }
};

}  // namespace tdp::benchmarks
