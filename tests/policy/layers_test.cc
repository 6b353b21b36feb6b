// The layer kinds (sequence, activation, conv2d, flatten, unflatten, layer_norm, dueling): each validation
// error, exactly, with the field path of the layer at fault; what a built policy computes, against
// LibTorch's own functions on the same parameters.
#include "sdk/nn/biased_softplus.h"
#include "sdk/nn/layers.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <gtest/gtest.h>

#include <string>

#include "sdk/nn/networks.h"
#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::parse_text_or_fail;

// One network module reading `in` (observation [4] or pixels [3, 8, 8]) and writing `out`.
tdpolicy::PolicySpec spec_of(const std::string& in, const std::string& out, const std::string& network) {
  return parse_text_or_fail(absl::StrCat(R"pb(name: "t"
                                              inputs { key: "observation" shape: 4 }
                                              inputs {
                                                key: "pixels"
                                                shape: [ 3, 8, 8 ]
                                              }
                                              init_seed: 1
                                              module { network { in_keys:)pb",
                                         in, " out_keys: ", out, " network { ", network, " } } }"));
}

std::string error_of(const tdpolicy::PolicySpec& spec) {
  absl::Status status = validate_spec(spec, "t.pbtxt");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

std::string error_of(const std::string& in, const std::string& out, const std::string& network) {
  return error_of(spec_of(in, out, network));
}

constexpr char kPath[] = "t.pbtxt: module.network.network.";

TEST(Layers, SequenceErrorsNameTheLayer) {
  EXPECT_EQ(error_of("'observation'", "'y'", "sequence {}"),
            absl::StrCat(kPath, "sequence.layers: a sequence needs at least one layer"));
  EXPECT_EQ(error_of("'observation'", "['loc', 'scale']",
                     "sequence { layers { linear { in_features: 4 out_features: 8 } } layers {} }"),
            absl::StrCat(kPath, "sequence.layers[1]: no network kind is set (hint: one of ",
                         absl::StrJoin({"mlp",
                                        "linear",
                                        "gru_cell",
                                        "lstm_cell",
                                        "torchscript",
                                        "mapping",
                                        "normal_param_extractor",
                                        "add_state_independent_normal_scale",
                                        "one_hot",
                                        "cat",
                                        "sequence",
                                        "activation",
                                        "conv2d",
                                        "flatten",
                                        "layer_norm",
                                        "dueling",
                                        "multi_agent_mlp",
                                        "observation_norm",
                                        "to_dtype",
                                        "to_tensor_image",
                                        "aoti_package",
                                        "unflatten"},
                                       ", "),
                         ")"));
  EXPECT_EQ(error_of("'observation'", "'y'",
                     "sequence { layers { linear { in_features: 4 out_features: 8 } }"
                     "           layers { linear { in_features: 5 out_features: 2 } } }"),
            absl::StrCat(kPath,
                         "sequence.layers[1].in_keys[0]: the input has shape [8] but linear.in_features is 5 "
                         "(hint: make the declared input shape and the layer size agree)"));
  // Only the last layer may write several tensors.
  EXPECT_EQ(error_of("'observation'", "'y'",
                     "sequence { layers { normal_param_extractor {} }"
                     "           layers { linear { in_features: 2 out_features: 2 } } }"),
            absl::StrCat(kPath, "sequence.layers[0].out_keys: a normal_param_extractor writes 2 key(s), got 1"));
  EXPECT_EQ(error_of("'observation'", "['loc', 'scale']",
                     "sequence { layers { linear { in_features: 4 out_features: 2 } } }"),
            absl::StrCat(kPath, "sequence.layers[0].out_keys: a linear layer writes 1 key(s), got 2"));
  // The nested layers' paths compose.
  EXPECT_EQ(
      error_of("'observation'", "'y'", "sequence { layers { sequence { layers { activation { name: 'swish' } } } } }"),
      absl::StrCat(kPath,
                   "sequence.layers[0].sequence.layers[0].activation.name: unknown activation \"swish\" "
                   "(hint: one of tanh, relu, elu, gelu, leaky_relu, sigmoid, softplus, silu, identity)"));
}

TEST(Layers, ActivationErrors) {
  EXPECT_EQ(error_of("'observation'", "'y'", "activation { name: 'relu' alpha: 0.5 }"),
            absl::StrCat(kPath, "activation.alpha: an argument of elu, not of relu (hint: leave it unset)"));
  EXPECT_EQ(error_of("'observation'", "'y'", "activation { name: 'softplus' beta: 0 }"),
            absl::StrCat(kPath, "activation.beta: must not be 0 (softplus divides by it)"));
  EXPECT_EQ(error_of("'observation'", "'y'", "activation { name: 'elu' alpha: inf }"),
            absl::StrCat(kPath, "activation.alpha: must be a finite number, got inf"));
  EXPECT_EQ(error_of("'observation'", "'y'", "activation { name: 'gelu' approximate: 'erf' }"),
            absl::StrCat(kPath, "activation.approximate: unknown approximation \"erf\" (hint: \"none\" or \"tanh\")"));
  EXPECT_EQ(error_of("['observation', 'pixels']", "'y'", "activation { name: 'tanh' }"),
            "t.pbtxt: module.network.in_keys: an activation reads 1 key(s), got 2");
}

TEST(Layers, Conv2dErrors) {
  const std::string conv = "conv2d { in_channels: 3 out_channels: 4 kernel_size: [3, 3] ";
  EXPECT_EQ(error_of("'pixels'", "'y'", "conv2d { in_channels: 3 out_channels: 4 kernel_size: 3 }"),
            absl::StrCat(kPath, "conv2d.kernel_size: expected 2 values (height, width) >= 1, got [3]"));
  EXPECT_EQ(error_of("'pixels'", "'y'", conv + "stride: [1, 0] }"),
            absl::StrCat(kPath,
                         "conv2d.stride: expected 2 values (height, width) >= 1, got [1, 0] (hint: or none for the "
                         "default)"));
  EXPECT_EQ(error_of("'pixels'", "'y'", conv + "groups: 2 }"),
            absl::StrCat(kPath, "conv2d.groups: 2 does not divide in_channels 3 and out_channels 4"));
  EXPECT_EQ(error_of("'observation'", "'y'", conv + "}"),
            "t.pbtxt: module.network.in_keys[0]: the input has shape [4]; a conv2d reads [..., channels, height, "
            "width]");
  EXPECT_EQ(error_of("'pixels'", "'y'", "conv2d { in_channels: 2 out_channels: 4 kernel_size: [3, 3] }"),
            "t.pbtxt: module.network.in_keys[0]: the input has shape [3, 8, 8] but conv2d.in_channels is 2 (hint: make "
            "the declared input shape and the layer size agree)");
  EXPECT_EQ(
      error_of("'pixels'", "'y'", "conv2d { in_channels: 3 out_channels: 4 kernel_size: [3, 5] dilation: [1, 2] }"),
      "t.pbtxt: module.network.in_keys[0]: the input has shape [3, 8, 8], smaller than the width the kernel "
      "spans (9 with dilation and padding)");
}

TEST(Layers, FlattenLayerNormAndDuelingErrors) {
  EXPECT_EQ(error_of("'pixels'", "'y'", "flatten {}"),
            absl::StrCat(kPath, "flatten.num_dims: must be positive, got 0"));
  EXPECT_EQ(error_of("'pixels'", "'y'", "flatten { num_dims: 4 }"),
            "t.pbtxt: module.network.in_keys[0]: the input has shape [3, 8, 8], fewer dims than the 4 flatten.num_dims "
            "joins (hint: flatten joins per-environment dims; the batch dims are not in the declared shape)");
  EXPECT_EQ(error_of("'observation'", "'y'", "layer_norm {}"),
            absl::StrCat(kPath, "layer_norm.normalized_shape: a layer_norm normalizes at least one dim"));
  EXPECT_EQ(error_of("'pixels'", "'y'", "layer_norm { normalized_shape: [3, 8] }"),
            "t.pbtxt: module.network.in_keys[0]: the input has shape [3, 8, 8] but layer_norm.normalized_shape is "
            "[3, 8] (hint: the input's last dims must be normalized_shape)");
  EXPECT_EQ(
      error_of("'observation'", "'y'", "layer_norm { normalized_shape: 4 eps: -1 }"),
      absl::StrCat(kPath, "layer_norm.eps: must be a finite number >= 0, got -1 (hint: leave it unset for 1e-5)"));
  EXPECT_EQ(error_of("'observation'", "'q'",
                     "dueling { features { linear { in_features: 4 out_features: 8 } }"
                     "          advantage { linear { in_features: 8 out_features: 3 } }"
                     "          value { linear { in_features: 8 out_features: 2 } } }"),
            absl::StrCat(kPath,
                         "dueling.value: the value has shape [2] and the advantage [3]; the value's last dim must be 1 "
                         "or the advantage's"));
  EXPECT_EQ(error_of("'observation'", "'q'",
                     "dueling { features { linear { in_features: 4 out_features: 8 } }"
                     "          advantage { linear { in_features: 4 out_features: 3 } }"
                     "          value { linear { in_features: 8 out_features: 1 } } }"),
            absl::StrCat(kPath,
                         "dueling.advantage.in_keys[0]: the input has shape [8] but linear.in_features is 4 (hint: "
                         "make the declared input shape and the layer size agree)"));
}

std::map<std::string, at::Tensor> parameters_of(const Policy& policy) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : policy.module->named_parameters()) out[item.key()] = item.value();
  return out;
}

TEST(Layers, ASequenceComputesItsLayersInOrder) {
  ASSERT_OK_AND_ASSIGN(
      Policy policy, build_policy(spec_of("'observation'", "['loc', 'scale']",
                                          "sequence { layers { linear { in_features: 4 out_features: 6 } }"
                                          "           layers { activation { name: 'elu' alpha: 0.5 } }"
                                          "           layers { layer_norm { normalized_shape: 6 } }"
                                          "           layers { mlp { in_features: 6 hidden_sizes: 5 out_features: 4 } }"
                                          "           layers { normal_param_extractor {} } }"),
                                  "t.pbtxt", "."));
  auto p = parameters_of(policy);
  ASSERT_EQ(p.size(), 8u);
  const at::Tensor x = at::randn({2, 3, 4});
  at::Tensor h = at::elu(at::linear(x, p["module.layers.0.weight"], p["module.layers.0.bias"]), 0.5);
  h = at::layer_norm(h, {6}, p["module.layers.2.weight"], p["module.layers.2.bias"], 1e-5);
  h = at::tanh(at::linear(h, p["module.layers.3.layers.0.weight"], p["module.layers.3.layers.0.bias"]));
  h = at::linear(h, p["module.layers.3.layers.2.weight"], p["module.layers.3.layers.2.bias"]);
  const TensorDict out =
      testing::run(policy, TensorDict({{"observation", x}}, {2, 3}), nn::InteractionType::kDeterministic);
  EXPECT_TRUE(at::allclose(out.get("loc"), h.slice(-1, 0, 2)));
  const at::Tensor scale = at::softplus(h.slice(-1, 2, 4) + nn::inv_softplus(1.0 - 0.01)) + 0.01;
  EXPECT_TRUE(at::allclose(out.get("scale"), scale.clamp_min(1e-4)));
}

TEST(Layers, Conv2dReadsAnyBatchDimsAndTheDuelingHeadIsTorchRLs) {
  ASSERT_OK_AND_ASSIGN(
      Policy policy,
      build_policy(spec_of("'pixels'", "'q'",
                           "dueling { features { sequence {"
                           "    layers { conv2d { in_channels: 3 out_channels: 4 kernel_size: [3, 3] stride: [2, 2]"
                           "                      padding: [1, 1] } }"
                           "    layers { activation { name: 'relu' } }"
                           "    layers { flatten { num_dims: 3 } } } }"
                           "  advantage { linear { in_features: 64 out_features: 5 } }"
                           "  value { linear { in_features: 64 out_features: 1 } } }"),
                   "t.pbtxt", "."));
  auto p = parameters_of(policy);
  const at::Tensor x = at::randn({2, 3, 3, 8, 8});
  const at::Tensor conv = at::conv2d(x.reshape({6, 3, 8, 8}), p["module.features.layers.0.weight"],
                                     p["module.features.layers.0.bias"], {2, 2}, {1, 1});
  const at::Tensor f = at::relu(conv).reshape({2, 3, 64});
  const at::Tensor a = at::linear(f, p["module.advantage.weight"], p["module.advantage.bias"]);
  const at::Tensor v = at::linear(f, p["module.value.weight"], p["module.value.bias"]);
  const TensorDict out = testing::run(policy, TensorDict({{"pixels", x}}, {2, 3}), nn::InteractionType::kDeterministic);
  EXPECT_EQ(out.get("q").sizes(), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_TRUE(at::allclose(out.get("q"), v + a - a.mean(-1, true)));
}

TEST(Layers, UnflattenErrorsNameTheSizes) {
  EXPECT_EQ(error_of("'observation'", "'y'", "unflatten {}"),
            absl::StrCat(kPath, "unflatten.sizes: an unflatten splits the last dim into at least one size"));
  EXPECT_EQ(error_of("'observation'", "'y'", "unflatten { sizes: [2, 0] }"),
            absl::StrCat(kPath, "unflatten.sizes[1]: must be positive, got 0"));
  EXPECT_EQ(error_of("'observation'", "'y'", "unflatten { sizes: [3, 2] }"),
            absl::StrCat(kPath,
                         "unflatten.sizes: the sizes [3, 2] multiply to 6 but the input has per-environment shape [4] "
                         "(hint: sizes whose product is the input's last dim, 4)"));
  EXPECT_EQ(error_of("'pixels'", "'y'", "unflatten { sizes: [4, 4] }"),
            absl::StrCat(kPath,
                         "unflatten.sizes: the sizes [4, 4] multiply to 16 but the input has per-environment shape "
                         "[3, 8, 8] (hint: sizes whose product is the input's last dim, 8)"));
  EXPECT_EQ(error_of("'observation'", "'y'", "unflatten { sizes: [4611686018427387904, 4] }"),
            absl::StrCat(kPath, "unflatten.sizes: the sizes [4611686018427387904, 4] multiply past int64"));
  EXPECT_EQ(error_of("['observation', 'pixels']", "'y'", "unflatten { sizes: 4 }"),
            "t.pbtxt: module.network.in_keys: an unflatten reads 1 key(s), got 2");
  // The shape it writes is what the next layer reads.
  EXPECT_EQ(error_of("'observation'", "'y'",
                     "sequence { layers { unflatten { sizes: [2, 2] } }"
                     "           layers { linear { in_features: 4 out_features: 2 } } }"),
            absl::StrCat(kPath,
                         "sequence.layers[1].in_keys[0]: the input has shape [2, 2] but linear.in_features is 4 "
                         "(hint: make the declared input shape and the layer size agree)"));
}

// TorchRL's MLP(out_features=(atoms, actions)) as the exporter writes it: its mlp, then an
// unflatten of the last dim, [B, atoms * actions] -> [B, atoms, actions].
TEST(Layers, AnUnflattenAfterAnMlpWritesTheAtomsAndActions) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec_of("'observation'", "'action_value'",
                                                           "sequence {"
                                                           "  layers { mlp { in_features: 4 hidden_sizes: 8"
                                                           "                 out_features: 6 activation: 'relu' } }"
                                                           "  layers { unflatten { sizes: [3, 2] } } }"),
                                                   "t.pbtxt", "."));
  auto p = parameters_of(policy);
  const at::Tensor x = at::randn({5, 4});
  const at::Tensor h = at::relu(at::linear(x, p["module.layers.0.layers.0.weight"], p["module.layers.0.layers.0.bias"]));
  const at::Tensor flat = at::linear(h, p["module.layers.0.layers.2.weight"], p["module.layers.0.layers.2.bias"]);
  const TensorDict out =
      testing::run(policy, TensorDict({{"observation", x}}, {5}), nn::InteractionType::kDeterministic);
  EXPECT_EQ(out.get("action_value").sizes(), (std::vector<int64_t>{5, 3, 2}));
  EXPECT_TRUE(at::allclose(out.get("action_value"), flat.reshape({5, 3, 2})));
}

TEST(Layers, ActivationsTakeTorchsArguments) {
  const at::Tensor x = at::randn({64}) * 10;
  const std::pair<nn::ActivationOptions, at::Tensor> cases[] = {
      {nn::ActivationOptions("elu").alpha(0.3), at::elu(x, 0.3)},
      {nn::ActivationOptions("leaky_relu").negative_slope(0.2), at::leaky_relu(x, 0.2)},
      {nn::ActivationOptions("gelu").approximate("tanh"), at::gelu(x, "tanh")},
      {nn::ActivationOptions("gelu"), at::gelu(x)},
      {nn::ActivationOptions("softplus").beta(2).threshold(5), at::softplus(x, 2, 5)},
      {nn::ActivationOptions("silu"), at::silu(x)},
      {nn::ActivationOptions("identity"), x},
  };
  for (const auto& [options, expected] : cases) {
    EXPECT_TRUE(at::equal(nn::Activation(options)(x), expected)) << options.name();
  }
  EXPECT_THROW(nn::Activation(nn::ActivationOptions("relu").beta(1)), std::invalid_argument);
  EXPECT_THROW(nn::Activation(nn::ActivationOptions("swish")), std::invalid_argument);
}

}  // namespace
}  // namespace tdp::policy
