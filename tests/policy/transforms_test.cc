// The observation transforms a policy runs in front of itself (observation_norm, to_dtype,
// to_tensor_image) and TorchRL's MultiAgentMLP (multi_agent_mlp): what each computes, that
// ObservationNorm's statistics are state that updates and saves, and their validation messages.
#include "sdk/nn/transforms.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "sdk/nn/multi_agent_mlp.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::parse_text_or_fail;

std::string error_of(const tdpolicy::PolicySpec& spec) {
  absl::Status status = validate_spec(spec, "t.pbtxt");
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

TEST(ObservationNorm, StandardNormalAffineAndClipAreTorchRLsExpressions) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({6, 3}) * 4;
  const at::Tensor loc = at::randn({3}), scale = at::rand({3}) + 0.5;
  nn::ObservationNorm standard(nn::ObservationNormOptions({3}).standard_normal(true));
  standard->set_statistics(loc, scale);
  EXPECT_TRUE(standard(x).equal((x - loc) / scale));
  nn::ObservationNorm affine(nn::ObservationNormOptions({3}));
  affine->set_statistics(loc, scale);
  EXPECT_TRUE(affine(x).equal(x * scale + loc));
  nn::ObservationNorm clipped(nn::ObservationNormOptions({}).standard_normal(true).clip(1.5));
  EXPECT_TRUE(clipped(x).equal(x.clamp(-1.5, 1.5)));  // loc 0, scale 1 when built
  // A float64 observation is normalized in float64, as torch promotes.
  EXPECT_EQ(standard(x.to(at::kDouble)).scalar_type(), at::kDouble);
  EXPECT_THROW(nn::ObservationNorm(nn::ObservationNormOptions({3}).clip(-1.0)), std::invalid_argument);
}

TEST(ObservationNorm, UpdatedStatisticsAreWhatExportAndSaveWrite) {
  ASSERT_OK_AND_ASSIGN(Policy policy,
                       build_policy(parse_text_or_fail(R"pb(
                                      inputs { key: "observation" shape: 3 }
                                      output_keys: "normalized"
                                      module {
                                        network {
                                          in_keys: "observation"
                                          out_keys: "normalized"
                                          network { observation_norm { shape: 3 standard_normal: true clip: 5 } }
                                        }
                                      }
                                      init_seed: 1)pb"),
                                    "t.pbtxt", "."));
  auto* norm =
      dynamic_cast<nn::ObservationNormImpl*>(dynamic_cast<nn::TensorDictModuleImpl&>(*policy.module).module().get());
  ASSERT_NE(norm, nullptr);
  norm->set_statistics(at::tensor({1.0f, 2.0f, 3.0f}), at::tensor({2.0f, 4.0f, 8.0f}));
  const std::string path = testing::temp_path("observation_norm.pb");
  ASSERT_OK(save_policy(policy, path));
  ASSERT_OK_AND_ASSIGN(Policy loaded, load_policy(path));
  TensorDict td({1});
  td.set("observation", at::tensor({3.0f, 2.0f, 99.0f}).reshape({1, 3}));
  const at::Tensor out = testing::run(loaded, td, nn::InteractionType::kDeterministic).get("normalized");
  EXPECT_TRUE(out.equal(at::tensor({1.0f, 0.0f, 5.0f}).reshape({1, 3}))) << out;
  ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*loaded.module, loaded.spec));
  const auto& n = exported.module().network().network().observation_norm();
  EXPECT_EQ(n.shape_size(), 1);
  EXPECT_TRUE(n.standard_normal());
  EXPECT_EQ(n.clip(), 5.0);
}

TEST(ToDtypeAndToTensorImage, CastAndPermuteAsTorchRL) {
  const at::Tensor x = at::randn({4, 3}, at::kDouble);
  EXPECT_TRUE(nn::ToDtype(at::kFloat)(x).equal(x.to(at::kFloat)));
  const at::Tensor pixels = at::randint(0, 256, {2, 6, 5, 3}, at::kByte);
  const at::Tensor image = nn::ToTensorImage(true)(pixels);
  EXPECT_EQ(image.sizes(), at::IntArrayRef({2, 3, 6, 5}));
  EXPECT_EQ(image.scalar_type(), at::kFloat);
  EXPECT_TRUE(image.equal(pixels.permute({0, 3, 1, 2}).div(255).to(at::kFloat)));
  EXPECT_TRUE(nn::ToTensorImage(false)(pixels).equal(pixels.permute({0, 3, 1, 2}).to(at::kFloat)));
  EXPECT_THROW(nn::ToTensorImage(true)(at::zeros({3, 4})), std::invalid_argument);
}

// Each agent's MLP by hand: Linear, tanh, Linear over that agent's weights.
at::Tensor agent_mlp(nn::MultiAgentMlpImpl& m, const at::Tensor& x, int64_t agent) {
  auto p = m.named_parameters();
  auto w = [&](const std::string& name) {
    at::Tensor t = p[name];
    return m.options().share_params() ? t : t[agent];
  };
  return at::linear(at::tanh(at::linear(x, w("params.0.weight"), w("params.0.bias"))), w("params.2.weight"),
                    w("params.2.bias"));
}

TEST(MultiAgentMlp, FourWaysAgainstEachAgentsMlp) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({5, 3, 4});
  for (bool centralized : {false, true}) {
    for (bool share : {false, true}) {
      nn::MultiAgentMlp m(nn::MultiAgentMlpOptions(3, 4, 2, {8}).centralized(centralized).share_params(share));
      const at::Tensor out = m->forward({x});
      ASSERT_EQ(out.sizes(), at::IntArrayRef({5, 3, 2}));
      EXPECT_EQ(m->named_parameters()["params.0.weight"].sizes(),
                share ? at::IntArrayRef({8, centralized ? 12 : 4}) : at::IntArrayRef({3, 8, centralized ? 12 : 4}));
      for (int64_t a = 0; a < 3; ++a) {
        const at::Tensor in = centralized ? x.flatten(-2, -1) : x.select(-2, a);
        EXPECT_TRUE(at::allclose(out.select(-2, a), agent_mlp(*m, in, a), 1e-6, 1e-6))
            << "centralized " << centralized << " share " << share << " agent " << a;
      }
      // Two inputs join on the last dim, as TorchRL's forward does.
      EXPECT_TRUE(at::allclose(m->forward({x.slice(-1, 0, 1), x.slice(-1, 1, 4)}), out, 1e-6, 1e-6));
    }
  }
  nn::MultiAgentMlp m(nn::MultiAgentMlpOptions(3, 4, 2, {8}));
  EXPECT_THROW(m->forward({at::randn({5, 2, 4})}), std::invalid_argument);
}

constexpr char kTransforms[] = R"pb(
  inputs { key: "observation" shape: 3 dtype: FLOAT64 }
  inputs {
    key: "pixels"
    shape: [ 6, 5, 3 ]
    dtype: UINT8
  }
  inputs {
    key: "agents"
    shape: [ 2, 4 ]
  }
  output_keys: "observation"
  output_keys: "image"
  output_keys: "agents_out"
  module {
    sequential {
      modules {
        network {
          in_keys: "observation"
          out_keys: "observation"
          network { to_dtype { dtype: FLOAT32 } }
        }
        overwrite_keys: "observation"
      }
      modules {
        network {
          in_keys: "observation"
          out_keys: "observation"
          network { observation_norm { shape: 3 standard_normal: true } }
        }
        overwrite_keys: "observation"
      }
      modules {
        network {
          in_keys: "pixels"
          out_keys: "image"
          network { to_tensor_image { from_int: true } }
        }
      }
      modules {
        network {
          in_keys: "agents"
          out_keys: "agents_out"
          network {
            multi_agent_mlp {
              n_agents: 2
              n_agent_inputs: 4
              n_agent_outputs: 3
              centralized: true
              mlp { in_features: 8 hidden_sizes: 16 out_features: 3 activation: "relu" }
            }
          }
        }
      }
    }
  }
  init_seed: 1
)pb";

tdpolicy::NetworkModule* network_at(tdpolicy::PolicySpec& spec, int i) {
  return spec.mutable_module()->mutable_sequential()->mutable_modules(i)->mutable_network();
}

TEST(TransformsValidation, ShapesFlowAndMistakesAreNamed) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(parse_text_or_fail(kTransforms), "t.pbtxt", "."));
  ASSERT_EQ(policy.signature.outputs.size(), 3u);
  EXPECT_EQ(policy.signature.outputs[1].shape, std::vector<int64_t>({3, 6, 5}));
  EXPECT_EQ(policy.signature.outputs[2].shape, std::vector<int64_t>({2, 3}));

  auto spec = parse_text_or_fail(kTransforms);
  network_at(spec, 0)->mutable_network()->mutable_to_dtype()->set_dtype(tdpolicy::INT64);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[0].network.network.to_dtype.dtype: a to_dtype casts to a floating "
            "dtype, got INT64 (hint: FLOAT32, FLOAT64, FLOAT16 or BFLOAT16)");

  spec = parse_text_or_fail(kTransforms);
  network_at(spec, 1)->mutable_network()->mutable_observation_norm()->set_shape(0, 4);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].network.network.observation_norm.shape: loc and scale of shape "
            "[4] do not broadcast to the input's per-environment shape [3] (in_keys[0])");
  network_at(spec, 1)->mutable_network()->mutable_observation_norm()->set_shape(0, 3);
  network_at(spec, 1)->mutable_network()->mutable_observation_norm()->set_clip(0);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].network.network.observation_norm.clip: must be "
            "positive, got 0");

  spec = parse_text_or_fail(kTransforms);
  network_at(spec, 2)->set_in_keys(0, "observation");
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[2].network.in_keys[0]: a to_tensor_image reads an "
            "image [..., H, W, C], got shape [3]");

  spec = parse_text_or_fail(kTransforms);
  auto* multi = network_at(spec, 3)->mutable_network()->mutable_multi_agent_mlp();
  multi->mutable_mlp()->set_in_features(4);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[3].network.network.multi_agent_mlp.mlp.in_features: "
            "is 4 but each agent's network reads 8 (n_agents * n_agent_inputs, centralized)");
  multi->mutable_mlp()->set_in_features(8);
  multi->mutable_mlp()->set_layer_norm(true);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[3].network.network.multi_agent_mlp.mlp.layer_norm: "
            "a multi_agent_mlp's agent networks have no LayerNorm");
  multi->mutable_mlp()->set_layer_norm(false);
  multi->set_n_agents(3);
  multi->mutable_mlp()->set_in_features(12);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[3].network.in_keys[0]: a multi_agent_mlp reads "
            "[..., n_agents=3, features], got shape [2, 4]");
}

}  // namespace
}  // namespace tdp::policy
