// The fused plan on TorchRL's TanhDelta (DDPG's deterministic actor), a QValueModule with an
// action mask, a DistributionalQValueModule behind an unflatten (with and without a mask, ties
// included) and MultiAgentMLP (its four centralized / share_params variants): each lowers and
// equals the LibTorch actor at batch 1, 7 and 64 (actions exactly or to 1e-6, the same log-prob
// infinities); what still runs on LibTorch is refused naming the module's path and why.
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

// A float32 tensor in text format: its fields in braces.
std::string tensor_fields(const std::vector<float>& values) {
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
  return "{ dtype: FLOAT32 shape: " + std::to_string(values.size()) + " data: \"" + data + "\" }";
}

// A float32 tensor kwarg in text format.
std::string tensor_value(const std::vector<float>& values) { return "tensor_value " + tensor_fields(values); }

// Runs both actors on `inputs` under `types` and compares every output key: integer ones
// exactly, infinities exactly, finite floats to 1e-6. Returns the largest finite difference.
double expect_same_outputs(Actor& fused, Actor& reference, const TensorDict& inputs,
                           const std::vector<InteractionType>& types, const std::string& name) {
  double worst = 0;
  const int64_t batch = inputs.batch_size()[0];
  for (InteractionType type : types) {
    const std::string what = name + " batch " + std::to_string(batch) + " " + std::string(nn::to_string(type));
    EXPECT_TRUE(fused.describe().runs_fused(batch, type)) << what;
    TensorDict a = fused.act(inputs, type);
    TensorDict b = reference.act(inputs, type);
    EXPECT_EQ(a.keys().size(), b.keys().size()) << what;
    for (const auto& key : b.keys()) {
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
      EXPECT_LE(max, 1e-6) << at_key;
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
      // LibTorch estimates the mean by averaging draws and has no median: those stay there.
      EXPECT_FALSE(fused->describe().runs_fused(1, InteractionType::kMean)) << name;
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
  // A layer reading the [5, 4] an unflatten writes would run over its last dim.
  actor = load(
      "inputs { key: 'observation' shape: 6 } output_keys: 'y'\n"
      "module { network { in_keys: 'observation' out_keys: 'y' network { sequence {\n"
      "  layers { unflatten { sizes: [2, 3] } } layers { linear { in_features: 3 out_features: 2 } } } } } }\n"
      "init_seed: 1",
      Backend::kAuto);
  ASSERT_TRUE(actor);
  EXPECT_EQ(std::string(actor->describe().fused_status.message()),
            "not lowerable to the fused CPU plan: module.network.network.sequence.layers[1]: a layer after an "
            "unflatten (it reads per-environment shape [2, 3]; the plan's layers read vectors)");
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

TEST(FusedLowering, AModuleReadingAMultiAgentMlpsPerAgentOutputIsRefusedNamingIt) {
  // MAPPO's actor: the per-agent values [3, 4] go to a NormalParamExtractor, whose split (and the
  // head's per-agent log-probs) the plan's vector kernels do not compute.
  auto actor = load(
      "inputs { key: 'observation' shape: [3, 4] } output_keys: 'loc'\n"
      "module { sequential {\n"
      "  modules { network { in_keys: 'observation' out_keys: 'params' network { multi_agent_mlp { n_agents: 3 "
      "n_agent_inputs: 4 n_agent_outputs: 4 mlp { in_features: 4 hidden_sizes: 8 out_features: 4 } } } } }\n"
      "  modules { network { in_keys: 'params' out_keys: ['loc', 'scale'] network { normal_param_extractor { } } } "
      "}\n"
      "} }\ninit_seed: 1",
      Backend::kAuto);
  ASSERT_TRUE(actor);
  EXPECT_EQ(std::string(actor->describe().fused_status.message()),
            "not lowerable to the fused CPU plan: module.sequential.modules[1]: reads 'params' of per-environment "
            "shape [3, 4]; the plan's kernels read vectors, and such values only as a multi_agent_mlp's input or a "
            "recurrent module's state");
}

}  // namespace
}  // namespace tdp::fused
