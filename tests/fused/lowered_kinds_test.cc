// The fused plan on TorchRL's TanhDelta (DDPG's deterministic actor), a QValueModule with an
// action mask, a DistributionalQValueModule behind an unflatten (with and without a mask, ties
// included), MultiAgentMLP (its four centralized / share_params variants) and MAPPO's whole actor
// (MultiAgentMLP, NormalParamExtractor per agent, a head with one log-prob per agent): each lowers
// and equals the LibTorch actor at batch 1, 7 and 64 (actions exactly or to 1e-6, log-probs to
// 1e-5, the same infinities), and the log-probs of the plan's own draws are LibTorch's log_prob of
// those draws; what still runs on LibTorch is refused naming the module's path and why.
#include <ATen/ATen.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/policy/policy.h"
#include "sdk/probabilistic/probabilistic_sequential.h"
#include "tests/testing/status_matchers.h"

namespace tdp::fused {
namespace {

using actor::Actor;
using actor::ActorOptions;
using actor::Backend;
using nn::InteractionType;

std::unique_ptr<Actor> load(const std::string& text, Backend backend) {
  tdpolicy::PolicySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  auto policy = policy::build_policy(spec, "test", ".");
  EXPECT_TRUE(policy.ok()) << policy.status();
  if (!policy.ok()) return nullptr;
  return std::make_unique<Actor>(*std::move(policy), ActorOptions().backend(backend).run_self_tests(false));
}

// A float32 tensor in text format, of `shape` (default: a vector of the values): its fields in braces.
std::string tensor_fields(const std::vector<float>& values, const std::string& shape = "") {
  std::string data;
  for (float v : values) {
    unsigned char bytes[4];
    std::memcpy(bytes, &v, 4);
    for (unsigned char b : bytes) {
      char octal[5];
      std::snprintf(octal, sizeof(octal), "\\%03o", b);
      data += octal;
    }
  }
  return "{ dtype: FLOAT32 shape: " + (shape.empty() ? std::to_string(values.size()) : shape) + " data: \"" + data +
         "\" }";
}

// A float32 tensor kwarg in text format.
std::string tensor_value(const std::vector<float>& values, const std::string& shape = "") {
  return "tensor_value " + tensor_fields(values, shape);
}

// Runs both actors on `inputs` under `types` and compares every output key: integer ones
// exactly, infinities exactly, finite floats to 1e-6 (log-probs, whose keys end in "log_prob",
// to 1e-5 absolute and relative). Returns the largest finite difference.
double expect_same_outputs(Actor& fused, Actor& reference, const TensorDict& inputs,
                           const std::vector<InteractionType>& types, const std::string& name) {
  double worst = 0;
  const int64_t batch = inputs.batch_size()[0];
  for (InteractionType type : types) {
    const std::string what = name + " batch " + std::to_string(batch) + " " + std::string(nn::to_string(type));
    EXPECT_TRUE(fused.describe().runs_fused(batch, type)) << what;
    TensorDict a = fused.act(inputs, type);
    TensorDict b = reference.act(inputs, type);
    EXPECT_EQ(a.keys(true, true).size(), b.keys(true, true).size()) << what;
    for (const auto& key : b.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      const at::Tensor f = a.get(key), r = b.get(key);
      const std::string at_key = what + " " + key.to_string();
      EXPECT_EQ(f.sizes(), r.sizes()) << at_key;
      EXPECT_EQ(f.scalar_type(), r.scalar_type()) << at_key;
      if (f.sizes() != r.sizes() || f.scalar_type() != r.scalar_type()) continue;
      if (!r.is_floating_point()) {
        EXPECT_TRUE(f.equal(r)) << at_key << "\nfused " << f.slice(0, 0, 8) << "\nlibtorch " << r.slice(0, 0, 8);
        continue;
      }
      const at::Tensor fd = f.to(at::kDouble), rd = r.to(at::kDouble);
      const at::Tensor finite = rd.isfinite(), infinite = rd.isinf();
      EXPECT_TRUE(fd.isfinite().equal(finite))
          << at_key << "\nfused " << f.slice(0, 0, 8) << "\nlibtorch " << r.slice(0, 0, 8);
      EXPECT_TRUE(fd.isnan().equal(rd.isnan())) << at_key;
      EXPECT_TRUE(fd.masked_select(infinite).equal(rd.masked_select(infinite))) << at_key;
      const at::Tensor diff = (fd - rd).masked_select(finite).abs();
      if (diff.numel() == 0) continue;
      const double max = diff.max().item<double>();
      worst = std::max(worst, max);
      const std::string leaf = key.leaf();
      if (leaf.size() >= 8 && leaf.compare(leaf.size() - 8, 8, "log_prob") == 0) {
        const at::Tensor bound = 1e-5 + 1e-5 * rd.masked_select(finite).abs();
        EXPECT_TRUE(diff.le(bound).all().item<bool>()) << at_key << ": max " << max;
      } else {
        EXPECT_LE(max, 1e-6) << at_key;
      }
    }
  }
  return worst;
}

// ---- TanhDelta ----------------------------------------------------------------------------

// obs [5] -> Mlp -> param [3] -> tanh_delta with `kwargs`, its log-prob returned; `direct`: the
// param is the observation [3] itself (so that both backends squash the same values).
std::string tanh_delta_spec(const std::string& kwargs, bool direct = false) {
  const std::string network =
      direct ? ""
             : "  modules { network { in_keys: 'observation' out_keys: 'param' network { mlp { in_features: 5 "
               "hidden_sizes: [16] out_features: 3 activation: 'relu' } } } }\n";
  return std::string("inputs { key: 'observation' shape: ") + (direct ? "3" : "5") +
         " }\n"
         "output_keys: 'action' output_keys: 'action_log_prob'\n"
         "module { probabilistic_sequential {\n" +
         network + "  modules { probabilistic { in_keys_map { name: 'param' key: '" +
         (direct ? "observation" : "param") +
         "' } out_keys: 'action' "
         "distribution: 'tanh_delta' " +
         kwargs +
         " return_log_prob: true log_prob_key: 'action_log_prob' default_interaction_type: 'deterministic' } }\n"
         "} }\ninit_seed: 11";
}

std::string kwarg(const std::string& name, const std::string& value) {
  return "distribution_kwargs { key: '" + name + "' value { " + value + " } }";
}

// MEAN: LibTorch averages n_empirical_estimate draws, each the Delta's squashed point, so its
// mean is that point up to the float32 average's rounding (a few ulps); the plan writes the point
// itself, its DETERMINISTIC output. (LibTorch scores its average, which rounding may move off the
// Delta where the tanh saturates: there its log-prob can read -inf where the point's is +inf.)
void expect_tanh_delta_mean_is_the_point(Actor& fused, Actor& reference, const TensorDict& obs,
                                         const std::string& name, const NestedKey& action = "action",
                                         const NestedKey& log_prob = "action_log_prob") {
  EXPECT_TRUE(fused.describe().runs_fused(obs.batch_size()[0], InteractionType::kMean)) << name;
  const TensorDict mean = fused.act(obs, InteractionType::kMean);
  const TensorDict point = fused.act(obs, InteractionType::kDeterministic);
  EXPECT_TRUE(mean.get(action).equal(point.get(action))) << name;
  EXPECT_TRUE(at::isclose(mean.get(log_prob), point.get(log_prob), 0, 0, /*equal_nan=*/true).all().item<bool>())
      << name;
  const at::Tensor estimate = reference.act(obs, InteractionType::kMean).get(action);
  const at::Tensor diff = (mean.get(action) - estimate).abs();
  EXPECT_TRUE(diff.le(1e-5 + 1e-5 * estimate.abs()).all().item<bool>())
      << name << " mean: max |fused - LibTorch| " << diff.max().item<double>();
}

TEST(FusedParity, TanhDeltaEqualsLibTorchWithNumberAndTensorBounds) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"default bounds", ""},
      {"number bounds", kwarg("low", "double_value: -2.0") + " " + kwarg("high", "double_value: 2.0")},
      {"tensor bounds (DDPG's action spec)",
       kwarg("low", tensor_value({-1.0f, -3.0f, 0.0f})) + " " + kwarg("high", tensor_value({2.0f, 3.0f, 0.5f}))},
      {"a tensor low, a number high", kwarg("low", tensor_value({-1.5f})) + " " + kwarg("high", "double_value: 4.0")},
      {"not safe, atol 1e-4", kwarg("safe", "bool_value: false") + " " + kwarg("atol", "double_value: 1e-4")},
  };
  for (const auto& [name, kwargs] : cases) {
    for (bool direct : {false, true}) {
      const std::string text = tanh_delta_spec(kwargs, direct);
      auto fused = load(text, Backend::kFused);
      auto reference = load(text, Backend::kLibTorch);
      ASSERT_TRUE(fused && reference) << name;
      ASSERT_OK(fused->describe().fused_status);
      // LibTorch estimates the mean by averaging draws, each the Delta's squashed point: the plan
      // writes that point. There is no median (no icdf): LibTorch raises, so the plan leaves it.
      EXPECT_TRUE(fused->describe().runs_fused(1, InteractionType::kMean)) << name;
      EXPECT_FALSE(fused->describe().runs_fused(1, InteractionType::kMedian)) << name;
      double worst = 0;
      int64_t on_delta = 0, off_delta = 0;
      // A param up to about 30 (the observation times 8) saturates the tanh: those actions do not
      // invert back onto the Delta.
      for (double scale : {2.0, 8.0}) {
        if (!direct && scale > 2) continue;  // the Mlp's rounding, not the squashing, would dominate
        for (int64_t batch : {1, 7, 64}) {
          at::manual_seed(batch);
          TensorDict obs({batch});
          obs.set("observation", at::randn({batch, direct ? 3 : 5}) * scale);
          worst = std::max(worst, expect_same_outputs(*fused, *reference, obs,
                                                      {InteractionType::kDeterministic, InteractionType::kMode,
                                                       InteractionType::kRandom},
                                                      "tanh_delta, " + name));
          expect_tanh_delta_mean_is_the_point(*fused, *reference, obs, "tanh_delta, " + name);
          const at::Tensor lp = reference->act(obs, InteractionType::kDeterministic).get("action_log_prob");
          on_delta += lp.gt(0).sum().item<int64_t>();
          off_delta += lp.lt(0).sum().item<int64_t>();
        }
      }
      // +inf occurs (the action inverts back onto the Delta), and with saturated values -inf.
      EXPECT_GT(on_delta, 0) << name;
      if (direct) {
        EXPECT_GT(off_delta, 0) << name;
      }
      std::cout << "[ tanh_delta ] " << name << (direct ? ", param given" : ", param from an Mlp")
                << ": max |fused - LibTorch| of the actions " << worst << "; log-probs +inf " << on_delta << ", -inf "
                << off_delta << " (the same in both)\n";
    }
  }
}

// ---- QValueModule with an action mask ------------------------------------------------------

// TorchRL's DQN actor with QValueModule(action_mask_key="action_mask"): obs [5] -> Mlp -> 4 action
// values, masked by the bool input action_mask [mask_width] (the spec takes one flag per action).
std::string masked_dqn_spec(const std::string& action_space, int64_t mask_width) {
  return "inputs { key: 'observation' shape: 5 } inputs { key: 'action_mask' shape: " + std::to_string(mask_width) +
         " dtype: BOOL }\n"
         "output_keys: 'action' output_keys: 'action_value' output_keys: 'chosen_action_value'\n"
         "module { sequential {\n"
         "  modules { network { in_keys: 'observation' out_keys: 'action_value' network { mlp { in_features: 5 "
         "hidden_sizes: [16] out_features: 4 activation: 'relu' } } } }\n"
         "  modules { q_value { action_space: '" +
         action_space +
         "' action_mask_key: 'action_mask' } }\n"
         "} }\ninit_seed: 9";
}

TEST(FusedParity, MaskedQValueActorsEqualLibTorchWithRowsThatAllowNoAction) {
  for (const std::string space : {"categorical", "one_hot"}) {
    {
      const int64_t mask_width = 4;
      const std::string name = "q_value " + space + ", mask [" + std::to_string(mask_width) + "]";
      const std::string text = masked_dqn_spec(space, mask_width);
      auto fused = load(text, Backend::kFused);
      auto reference = load(text, Backend::kLibTorch);
      ASSERT_TRUE(fused && reference) << name;
      ASSERT_OK(fused->describe().fused_status);
      double worst = 0;
      for (int64_t batch : {1, 7, 64}) {
        at::manual_seed(batch);
        TensorDict obs({batch});
        obs.set("observation", at::randn({batch, 5}) * 2);
        at::Tensor mask = at::rand({batch, mask_width}) > 0.4;
        if (batch > 1) mask[1].fill_(false);  // a row that allows no action: every value finfo.min
        if (batch > 2) mask[2].fill_(true);
        obs.set("action_mask", mask);
        worst = std::max(
            worst, expect_same_outputs(
                       *fused, *reference, obs,
                       {InteractionType::kDeterministic, InteractionType::kMode, InteractionType::kRandom}, name));
        // The greedy action is an allowed one wherever the row allows any.
        const at::Tensor action = fused->act(obs, InteractionType::kDeterministic).get("action");
        const at::Tensor index = space == "one_hot" ? action.argmax(-1) : action;
        const at::Tensor allowed = mask.gather(-1, index.unsqueeze(-1)).squeeze(-1);
        EXPECT_TRUE(allowed.logical_or(mask.any(-1).logical_not()).all().item<bool>()) << name;
      }
      std::cout << "[ q_value ] " << name << ": max |fused - LibTorch| " << worst << "\n";
    }
  }
}

// ---- DistributionalQValueModule -------------------------------------------------------------

constexpr int64_t kAtoms = 5, kActions = 4;

// TorchRL's DistributionalQValueActor(MLP(out_features=(5, 4)), support=linspace(-2, 2, 5)) as
// the exporter writes it: obs [6] -> mlp -> unflatten [5, 4] -> q_value with the support (its
// log-softmax over the atoms is DistributionalDQNnet's). `mask_shape`: the bool input
// action_mask's per-environment shape ("" for none). `standalone`: the unflatten is a module of
// its own reading the mlp's output by key, instead of the network's last layer.
std::string distributional_spec(const std::string& action_space, const std::string& mask_shape, bool standalone) {
  const std::string mlp = "mlp { in_features: 6 hidden_sizes: [16] out_features: 20 activation: 'tanh' }";
  std::string text = "inputs { key: 'observation' shape: 6 }\n";
  if (!mask_shape.empty()) text += "inputs { key: 'action_mask' shape: " + mask_shape + " dtype: BOOL }\n";
  text += "output_keys: 'action' output_keys: 'action_value'\nmodule { sequential {\n";
  if (standalone) {
    text += "  modules { network { in_keys: 'observation' out_keys: 'logits' network { " + mlp + " } } }\n" +
            "  modules { network { in_keys: 'logits' out_keys: 'action_value' network { unflatten { sizes: [5, 4] } "
            "} } }\n";
  } else {
    text += "  modules { network { in_keys: 'observation' out_keys: 'action_value' network { sequence { layers { " +
            mlp + " } layers { unflatten { sizes: [5, 4] } } } } } }\n";
  }
  text += "  modules { q_value { action_space: '" + action_space + "' support " +
          tensor_fields({-2.0f, -1.0f, 0.0f, 1.0f, 2.0f}) +
          (mask_shape.empty() ? "" : " action_mask_key: 'action_mask'") + " } }\n} }\ninit_seed: 11";
  return text;
}

TEST(FusedParity, DistributionalQValueEqualsLibTorchWithAndWithoutAMask) {
  for (const std::string space : {"categorical", "one_hot"}) {
    for (const std::string mask_shape : {"", "[1, 4]", "[5, 4]"}) {
      for (bool standalone : {false, true}) {
        const std::string name = "distributional q_value " + space + (mask_shape.empty() ? "" : ", mask ") +
                                 mask_shape + (standalone ? ", unflatten module" : ", unflatten layer");
        const std::string text = distributional_spec(space, mask_shape, standalone);
        auto fused = load(text, Backend::kFused);
        auto reference = load(text, Backend::kLibTorch);
        ASSERT_TRUE(fused && reference) << name;
        ASSERT_OK(fused->describe().fused_status);
        double worst = 0;
        for (int64_t batch : {1, 7, 64}) {
          at::manual_seed(batch);
          TensorDict obs({batch});
          obs.set("observation", at::randn({batch, 6}) * 3);
          if (!mask_shape.empty()) {
            at::Tensor mask = at::rand({batch, mask_shape == "[1, 4]" ? 1 : kAtoms, kActions}) > 0.4;
            if (batch > 1) mask[1].fill_(false);  // a row that allows nothing: every value finfo.min
            if (batch > 2) mask[2].fill_(true);
            obs.set("action_mask", mask);
          }
          worst = std::max(worst, expect_same_outputs(*fused, *reference, obs,
                                                      {InteractionType::kDeterministic, InteractionType::kMode}, name));
          const TensorDict out = fused->act(obs, InteractionType::kDeterministic);
          EXPECT_EQ(out.get("action_value").sizes(), (std::vector<int64_t>{batch, kAtoms, kActions})) << name;
        }
        std::cout << "[ q_value ] " << name << ": max |fused - LibTorch| " << worst << "\n";
      }
    }
  }
}

// The logits given as an input [5, 4] whose actions 1 and 3 have the same atoms: their expected
// values tie exactly, and both backends pick the first (categorical) or both (one_hot).
TEST(FusedParity, DistributionalQValueBreaksTiesAsLibTorch) {
  for (const std::string space : {"categorical", "one_hot"}) {
    for (bool masked : {false, true}) {
      const std::string name = "distributional q_value ties, " + space + (masked ? ", mask [1, 4]" : "");
      const std::string text =
          std::string("inputs { key: 'action_value' shape: [5, 4] }\n") +
          (masked ? "inputs { key: 'action_mask' shape: [1, 4] dtype: BOOL }\n" : "") +
          "output_keys: 'action' output_keys: 'action_value'\n"
          "module { q_value { action_space: '" +
          space + "' support " + tensor_fields({-2.0f, -1.0f, 0.0f, 1.0f, 2.0f}) +
          (masked ? " action_mask_key: 'action_mask'" : "") + " } }\ninit_seed: 1";
      auto fused = load(text, Backend::kFused);
      auto reference = load(text, Backend::kLibTorch);
      ASSERT_TRUE(fused && reference) << name;
      ASSERT_OK(fused->describe().fused_status);
      const int64_t batch = 16;
      at::manual_seed(3);
      at::Tensor logits = at::randn({batch, kAtoms, kActions});
      // Action 1 is the best by far, and action 3 its copy.
      logits.select(-1, 1).copy_(at::tensor({-9.0f, -9.0f, -9.0f, 0.0f, 9.0f}).expand({batch, kAtoms}));
      logits.select(-1, 3).copy_(logits.select(-1, 1));
      TensorDict obs({batch});
      obs.set("action_value", logits);
      if (masked) {
        at::Tensor mask = at::ones({batch, 1, kActions}, at::kBool);
        mask.slice(0, 0, batch / 2).select(-1, 1).fill_(false);  // half the rows: only action 3 is the best
        obs.set("action_mask", mask);
      }
      expect_same_outputs(*fused, *reference, obs, {InteractionType::kDeterministic}, name);
      const at::Tensor action = fused->act(obs, InteractionType::kDeterministic).get("action");
      const at::Tensor tied = space == "one_hot" ? action.narrow(0, batch / 2, batch / 2).sum(-1)
                                                 : action.narrow(0, batch / 2, batch / 2);
      EXPECT_TRUE(tied.eq(space == "one_hot" ? 2 : 1).all().item<bool>()) << name << "\n" << action;
      if (masked) {
        const at::Tensor alone = action.narrow(0, 0, batch / 2);
        EXPECT_TRUE((space == "one_hot" ? alone.argmax(-1) : alone).eq(3).all().item<bool>()) << name;
      }
    }
  }
}

TEST(FusedLowering, DistributionalQValueAndUnflattenRefusalsNameTheModule) {
  // A mask of per-environment shape [4] is [B, 4], which LibTorch broadcasts against the batch dim.
  auto actor = load(distributional_spec("categorical", "4", false), Backend::kAuto);
  ASSERT_TRUE(actor);
  EXPECT_EQ(std::string(actor->describe().fused_status.message()),
            "not lowerable to the fused CPU plan: module.sequential.modules[1]: a DistributionalQValueModule's "
            "action mask 'action_mask' of per-environment shape [4]; over [5, 4] values it takes a bool input of "
            "per-environment shape [1, 4] (or [5, 4]), which LibTorch broadcasts over each row's atoms");
  // A Linear reading the [2, 3] an unflatten writes would run over its last dim: two-dim values go
  // only to the layers that take them row by row or element by element.
  actor = load(
      "inputs { key: 'observation' shape: 6 } output_keys: 'y'\n"
      "module { network { in_keys: 'observation' out_keys: 'y' network { sequence {\n"
      "  layers { unflatten { sizes: [2, 3] } } layers { linear { in_features: 3 out_features: 2 } } } } } }\n"
      "init_seed: 1",
      Backend::kAuto);
  ASSERT_TRUE(actor);
  EXPECT_EQ(std::string(actor->describe().fused_status.message()),
            "not lowerable to the fused CPU plan: module.network.network.sequence.layers[1]: a linear layer reads "
            "a value of per-environment shape [2, 3]; the plan runs such values through multi_agent_mlp, "
            "normal_param_extractor, activation and mapping layers only");
}

// ---- MultiAgentMLP ------------------------------------------------------------------------

// agents [3, 4] -> MultiAgentMLP -> agents_out [3, 6].
std::string multi_agent_spec(bool centralized, bool share_params, const std::string& activation,
                             bool activate_last_layer) {
  return std::string("inputs { key: 'agents' shape: [3, 4] } output_keys: 'agents_out'\n") +
         "module { network { in_keys: 'agents' out_keys: 'agents_out' network { "
         "multi_agent_mlp { n_agents: 3 n_agent_inputs: 4 n_agent_outputs: 6 centralized: " +
         (centralized ? "true" : "false") + " share_params: " + (share_params ? "true" : "false") +
         " mlp { in_features: " + (centralized ? "12" : "4") + " hidden_sizes: [16, 16] out_features: 6 activation: '" +
         activation + "' activate_last_layer: " + (activate_last_layer ? "true" : "false") + " } } } } }\ninit_seed: 5";
}

TEST(FusedParity, MultiAgentMlpEqualsLibTorchCentralizedOrNotSharedOrNot) {
  for (bool centralized : {false, true}) {
    for (bool share_params : {false, true}) {
      const std::string name = std::string("multi_agent_mlp") + (centralized ? " centralized" : "") +
                               (share_params ? " shared" : " per agent");
      for (const auto& [activation, last] : {std::pair<std::string, bool>{"tanh", false}, {"relu", true}}) {
        const std::string text = multi_agent_spec(centralized, share_params, activation, last);
        auto fused = load(text, Backend::kFused);
        auto reference = load(text, Backend::kLibTorch);
        ASSERT_TRUE(fused && reference) << name;
        ASSERT_OK(fused->describe().fused_status);
        double worst = 0;
        for (int64_t batch : {1, 7, 64}) {
          at::manual_seed(batch);
          TensorDict obs({batch});
          obs.set("agents", at::randn({batch, 3, 4}) * 2);
          worst = std::max(worst, expect_same_outputs(*fused, *reference, obs, {InteractionType::kDeterministic},
                                                      name + ", " + activation));
        }
        std::cout << "[ multi_agent_mlp ] " << name << ", " << activation << ": max |fused - LibTorch| " << worst
                  << "\n";
      }
    }
  }
}

// ---- MAPPO's actor ------------------------------------------------------------------------

// TorchRL's multi-agent tutorial actor: agents/observation [agents, 4] -> (MultiAgentMLP ->
// NormalParamExtractor) -> agents/loc, agents/scale [agents, act] -> `distribution` with `kwargs`,
// its sample at agents/action and its log-prob at agents/sample_log_prob. `separate`: the
// extractor in a module of its own (the two-module form) instead of a sequence's last layer.
std::string mappo_spec(int64_t agents, bool centralized, bool share_params, const std::string& distribution,
                       const std::string& kwargs, bool separate = false, int64_t act = 2) {
  const std::string a = std::to_string(agents), out = std::to_string(2 * act);
  const std::string mlp = "multi_agent_mlp { n_agents: " + a + " n_agent_inputs: 4 n_agent_outputs: " + out +
                          " centralized: " + (centralized ? "true" : "false") + " share_params: " +
                          (share_params ? "true" : "false") + " mlp { in_features: " +
                          std::to_string(centralized ? 4 * agents : 4) + " hidden_sizes: [16, 16] out_features: " +
                          out + " activation: 'tanh' } }";
  const std::string extractor = "normal_param_extractor { scale_mapping: 'biased_softplus_1.0' }";
  const std::string network =
      separate ? "  modules { network { in_keys: 'agents/observation' out_keys: 'agents/params' network { " + mlp +
                     " } } }\n  modules { network { in_keys: 'agents/params' out_keys: ['agents/loc', "
                     "'agents/scale'] network { " + extractor + " } } }\n"
               : "  modules { network { in_keys: 'agents/observation' out_keys: ['agents/loc', 'agents/scale'] "
                 "network { sequence { layers { " + mlp + " } layers { " + extractor + " } } } } }\n";
  const bool delta = distribution == "delta" || distribution == "tanh_delta";
  const std::string params = delta ? "in_keys_map { name: 'param' key: 'agents/loc' }"
                                   : "in_keys_map { name: 'loc' key: 'agents/loc' } in_keys_map { name: 'scale' "
                                     "key: 'agents/scale' }";
  return "inputs { key: 'agents/observation' shape: [" + a + ", 4] }\n"
         "output_keys: 'agents/action' output_keys: 'agents/sample_log_prob'\n"
         "module { probabilistic_sequential {\n" + network + "  modules { probabilistic { " + params +
         " out_keys: 'agents/action' distribution: '" + distribution + "' " + kwargs +
         " return_log_prob: true log_prob_key: 'agents/sample_log_prob' default_interaction_type: 'deterministic' } "
         "}\n} }\ninit_seed: " + std::to_string(3 + agents + 2 * centralized + 4 * share_params);
}

// Per-agent bounds [agents, 2]: a different box for each agent and action dim.
std::string per_agent_bounds(int64_t agents) {
  std::vector<float> low, high;
  for (int64_t a = 0; a < agents; ++a) {
    low.insert(low.end(), {-1.0f - a, -2.0f + 0.5f * a});
    high.insert(high.end(), {1.0f + 0.25f * a, 0.5f + a});
  }
  const std::string shape = "[" + std::to_string(agents) + ", 2]";
  return kwarg("low", tensor_value(low, shape)) + " " + kwarg("high", tensor_value(high, shape));
}

struct MappoHead {
  std::string name, distribution, kwargs;
  std::vector<InteractionType> types;  // what LibTorch computes in closed form
};

// The bounds per_agent_bounds and mappo_heads give tanh_normal: [agents, 2] each.
std::pair<at::Tensor, at::Tensor> tanh_normal_bounds(const std::string& head, int64_t agents) {
  if (head == "tanh_normal, per-dimension bounds") {
    return {at::tensor({-1.0f, -0.5f}).expand({agents, 2}), at::tensor({2.0f, 0.5f}).expand({agents, 2})};
  }
  if (head == "tanh_normal, number bounds, tanh_loc") {
    return {at::full({agents, 2}, -2.0f), at::full({agents, 2}, 3.0f)};
  }
  at::Tensor a = at::arange(agents, at::kFloat).unsqueeze(1);
  return {at::cat({-1.0f - a, -2.0f + 0.5f * a}, 1), at::cat({1.0f + 0.25f * a, 0.5f + a}, 1)};
}

std::vector<MappoHead> mappo_heads(int64_t agents) {
  const std::vector<InteractionType> det = {InteractionType::kDeterministic};
  const std::vector<InteractionType> normal = {InteractionType::kDeterministic, InteractionType::kMode,
                                               InteractionType::kMean, InteractionType::kMedian};
  return {{"tanh_normal, per-agent bounds", "tanh_normal", per_agent_bounds(agents), det},
          {"tanh_normal, per-dimension bounds", "tanh_normal",
           kwarg("low", tensor_value({-1.0f, -0.5f})) + " " + kwarg("high", tensor_value({2.0f, 0.5f})), det},
          {"tanh_normal, number bounds, tanh_loc", "tanh_normal",
           kwarg("low", "double_value: -2.0") + " " + kwarg("high", "double_value: 3.0") + " " +
               kwarg("tanh_loc", "bool_value: true"),
           det},
          {"normal", "normal", "", normal},
          {"independent_normal", "independent_normal", "", {InteractionType::kDeterministic, InteractionType::kMean}},
          {"delta", "delta", "", {InteractionType::kDeterministic, InteractionType::kMean}},
          // MEAN: expect_tanh_delta_mean_is_the_point.
          {"tanh_delta, per-agent bounds", "tanh_delta", per_agent_bounds(agents), {InteractionType::kDeterministic}}};
}

TEST(FusedParity, MappoActorsEqualLibTorchForEveryMultiAgentMlpVariantAndHead) {
  for (int64_t agents : {2, 3}) {
    for (bool centralized : {false, true}) {
      for (bool share_params : {false, true}) {
        for (const MappoHead& head : mappo_heads(agents)) {
          const bool separate = head.distribution == "normal";  // the two-module form, once per variant
          const std::string name = std::to_string(agents) + " agents" + (centralized ? ", centralized" : "") +
                                   (share_params ? ", shared" : ", per agent") + ", " + head.name;
          const std::string text = mappo_spec(agents, centralized, share_params, head.distribution, head.kwargs,
                                              separate);
          auto fused = load(text, Backend::kFused);
          auto reference = load(text, Backend::kLibTorch);
          ASSERT_TRUE(fused && reference) << name;
          ASSERT_OK(fused->describe().fused_status) << name;
          double worst = 0;
          for (int64_t batch : {1, 7, 64}) {
            at::manual_seed(batch);
            TensorDict obs({batch});
            obs.set(NestedKey{"agents", "observation"}, at::randn({batch, agents, 4}) * 2);
            worst = std::max(worst, expect_same_outputs(*fused, *reference, obs, head.types, name));
            if (head.distribution == "tanh_delta") {
              expect_tanh_delta_mean_is_the_point(*fused, *reference, obs, name, NestedKey{"agents", "action"},
                                                  NestedKey{"agents", "sample_log_prob"});
            }
            // LibTorch's shapes: the action [B, agents, 2]; one log-prob per agent (normal: per element).
            const TensorDict out = fused->act(obs, InteractionType::kDeterministic);
            EXPECT_EQ(out.get(NestedKey{"agents", "action"}).sizes(), (std::vector<int64_t>{batch, agents, 2})) << name;
            const std::vector<int64_t> lp_shape = head.distribution == "normal"
                                                      ? std::vector<int64_t>{batch, agents, 2}
                                                      : std::vector<int64_t>{batch, agents};
            EXPECT_EQ(out.get(NestedKey{"agents", "sample_log_prob"}).sizes(), lp_shape) << name;
          }
          if (head.distribution == "tanh_normal" && agents == 3 && !centralized) {
            std::cout << "[ mappo ] " << name << ": max |fused - LibTorch| " << worst << "\n";
          }
        }
      }
    }
  }
}

// The log-probs the plan writes beside its own draws are LibTorch's log_prob of those draws
// (tanh_normal: where the action is not saturated, as LibTorch scores it through atanh).
TEST(FusedSampling, MappoLogProbsOfThePlansDrawsAreLibTorchsLogProbOfThem) {
  const int64_t batch = 500;
  for (int64_t agents : {2, 3}) {
    for (const MappoHead& head : mappo_heads(agents)) {
      if (head.distribution == "delta" || head.distribution == "tanh_delta") continue;  // no draws
      const std::string name = std::to_string(agents) + " agents, " + head.name;
      const std::string text = mappo_spec(agents, false, true, head.distribution, head.kwargs);
      tdpolicy::PolicySpec spec;
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec));
      auto fused = std::make_unique<Actor>(policy::build_policy(spec, "test", ".").value(),
                                           ActorOptions().backend(Backend::kFused).seed(7).run_self_tests(false));
      auto reference = load(text, Backend::kLibTorch);
      ASSERT_TRUE(reference) << name;
      at::manual_seed(23);
      TensorDict obs({batch});
      obs.set(NestedKey{"agents", "observation"}, at::randn({batch, agents, 4}) * 2);
      const TensorDict sampled = fused->act(obs, InteractionType::kRandom);
      const at::Tensor action = sampled.get(NestedKey{"agents", "action"});
      const at::Tensor deterministic =
          fused->act(obs, InteractionType::kDeterministic).get(NestedKey{"agents", "action"});
      EXPECT_FALSE(action.equal(deterministic)) << name << ": RANDOM drew nothing";
      auto* seq = dynamic_cast<nn::ProbabilisticTensorDictSequentialImpl*>(reference->module().get());
      ASSERT_NE(seq, nullptr) << name;
      TensorDict given({batch});
      given.set(NestedKey{"agents", "observation"}, obs.get(NestedKey{"agents", "observation"}));
      given.set(NestedKey{"agents", "action"}, action);
      at::Tensor expected;
      {
        c10::InferenceMode inference;
        expected = std::get<at::Tensor>(seq->log_prob(given));
      }
      at::Tensor got = sampled.get(NestedKey{"agents", "sample_log_prob"});
      ASSERT_EQ(got.sizes(), expected.sizes()) << name;
      at::Tensor ok = (got - expected).abs().le(1e-5 + 1e-5 * expected.abs());
      if (head.distribution == "tanh_normal") {
        // Only where LibTorch's atanh(action) is well conditioned (the plan scores the pre-tanh
        // draw itself): every action of the agent inside 0.9 of its half range.
        const auto [low, high] = tanh_normal_bounds(head.name, agents);
        const at::Tensor z = ((action - (high + low) / 2) / ((high - low) / 2)).abs();
        const at::Tensor interior = (z < 0.9).all(-1);
        EXPECT_GT(interior.to(at::kFloat).mean().item<float>(), 0.3) << name;
        ok = ok.logical_or(interior.logical_not());
        expected = expected.masked_select(interior);
        got = got.masked_select(interior);
      }
      const double max = (got - expected).abs().max().item<double>();
      EXPECT_TRUE(ok.all().item<bool>()) << name << ": max |fused - LibTorch| " << max;
      std::cout << "[ mappo draws ] " << name << ": max |log-prob fused - LibTorch of the same draws| " << max << "\n";
    }
  }
}

TEST(FusedLowering, TanhDeltaMedianRaisesOnBothBackendsAsInLibTorch) {
  const std::string text =
      tanh_delta_spec(kwarg("low", "double_value: -2.0") + " " + kwarg("high", "double_value: 2.0"));
  auto fused = load(text, Backend::kFused);
  auto reference = load(text, Backend::kLibTorch);
  ASSERT_TRUE(fused && reference);
  EXPECT_FALSE(fused->describe().runs_fused(1, InteractionType::kMedian));
  TensorDict obs({{"observation", at::randn({3, 5})}}, {3});
  for (Actor* actor : {fused.get(), reference.get()}) {
    try {
      actor->act(obs, InteractionType::kMedian);
      ADD_FAILURE() << "a tanh_delta median gave a value";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("TanhDelta.median is not implemented"), std::string::npos) << e.what();
    }
  }
}

TEST(FusedLowering, APerAgentValueAReaderCannotTakeIsRefusedNamingModuleValueAndShape) {
  // A Linear module over MultiAgentMLP's per-agent output [3, 4]: the plan's Linear reads vectors.
  auto linear = load(
      "inputs { key: 'observation' shape: [3, 4] } output_keys: 'out'\n"
      "module { sequential {\n"
      "  modules { network { in_keys: 'observation' out_keys: 'params' network { multi_agent_mlp { n_agents: 3 "
      "n_agent_inputs: 4 n_agent_outputs: 4 mlp { in_features: 4 hidden_sizes: 8 out_features: 4 } } } } }\n"
      "  modules { network { in_keys: 'params' out_keys: 'out' network { linear { in_features: 4 out_features: 2 } } } "
      "}\n"
      "} }\ninit_seed: 1",
      Backend::kAuto);
  ASSERT_TRUE(linear);
  EXPECT_EQ(std::string(linear->describe().fused_status.message()),
            "not lowerable to the fused CPU plan: module.sequential.modules[1]: reads 'params' of per-environment "
            "shape [3, 4]; the plan's kernels read vectors, and such values only as a multi_agent_mlp's input, a "
            "normal_param_extractor's or a sequence's activation or mapping layer's input, a normal, "
            "independent_normal, tanh_normal, delta or tanh_delta head's parameters, or a recurrent module's state");
  // The same Linear as a sequence's layer after the MultiAgentMLP.
  auto layer = load(
      "inputs { key: 'observation' shape: [3, 4] } output_keys: 'out'\n"
      "module { network { in_keys: 'observation' out_keys: 'out' network { sequence {\n"
      "  layers { multi_agent_mlp { n_agents: 3 n_agent_inputs: 4 n_agent_outputs: 4 mlp { in_features: 4 "
      "hidden_sizes: 8 out_features: 4 } } }\n"
      "  layers { linear { in_features: 4 out_features: 2 } }\n"
      "} } } }\ninit_seed: 1",
      Backend::kAuto);
  ASSERT_TRUE(layer);
  EXPECT_EQ(std::string(layer->describe().fused_status.message()),
            "not lowerable to the fused CPU plan: module.network.network.sequence.layers[1]: a linear layer reads a "
            "value of per-environment shape [3, 4]; the plan runs such values through multi_agent_mlp, "
            "normal_param_extractor, activation and mapping layers only");
  // A categorical head over per-agent logits.
  auto categorical = load(
      "inputs { key: 'observation' shape: [3, 4] } output_keys: 'action'\n"
      "module { probabilistic_sequential {\n"
      "  modules { network { in_keys: 'observation' out_keys: 'logits' network { multi_agent_mlp { n_agents: 3 "
      "n_agent_inputs: 4 n_agent_outputs: 5 mlp { in_features: 4 hidden_sizes: 8 out_features: 5 } } } } }\n"
      "  modules { probabilistic { in_keys_map { name: 'logits' key: 'logits' } out_keys: 'action' distribution: "
      "'categorical' } }\n"
      "} }\ninit_seed: 1",
      Backend::kAuto);
  ASSERT_TRUE(categorical);
  EXPECT_EQ(std::string(categorical->describe().fused_status.message()),
            "not lowerable to the fused CPU plan: module.probabilistic_sequential.modules[1]: categorical reads "
            "'logits' of per-environment shape [3, 5]; the plan takes per-agent ([n_agents, d]) parameters for "
            "normal, independent_normal, tanh_normal, delta and tanh_delta heads only, vectors otherwise");
}

}  // namespace
}  // namespace tdp::fused
