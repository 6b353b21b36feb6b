// The fused plan on the observation transforms: observation_norm (clip included) and a to_dtype
// from a float64 input lower and equal LibTorch; to_tensor_image does not lower, and says why
// (an Actor runs it on LibTorch). multi_agent_mlp lowers: lowered_kinds_test.cc.
#include <ATen/ATen.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sdk/actor/actor.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/nn/transforms.h"
#include "sdk/policy/policy.h"
#include "tests/testing/status_matchers.h"

namespace tdp::fused {
namespace {

using actor::Actor;
using actor::ActorOptions;
using actor::Backend;
using nn::InteractionType;

// Where a float64 observation is cast: not at all (a float32 input), before the
// observation_norm (DoubleToFloat first), or after it (the norm computes in float64).
enum class Cast { kNone, kFirst, kAfterNorm };

// observation [3] -> the cast and an observation_norm -> Mlp -> a Normal head.
std::string norm_spec(Cast cast, bool standard_normal, const std::string& clip) {
  const std::string to_float = "network { to_dtype { dtype: FLOAT32 } }";
  const std::string norm = std::string("network { observation_norm { shape: 3 standard_normal: ") +
                           (standard_normal ? "true" : "false") + clip + " } }";
  std::string modules;
  if (cast == Cast::kFirst) {
    modules += "modules { network { in_keys: 'observation' out_keys: 'observation' " + to_float +
               " } overwrite_keys: 'observation' }\n";
  }
  modules += "modules { network { in_keys: 'observation' out_keys: 'normalized' " + norm + " } }\n";
  if (cast == Cast::kAfterNorm) {
    modules += "modules { network { in_keys: 'normalized' out_keys: 'normalized' " + to_float +
               " } overwrite_keys: 'normalized' }\n";
  }
  return std::string("inputs { key: 'observation' shape: 3") + (cast == Cast::kNone ? "" : " dtype: FLOAT64") +
         " }\n"
         "output_keys: 'action' output_keys: 'action_log_prob'\n"
         "module { sequential {\n" +
         modules +
         "  modules { probabilistic_sequential {\n"
         "    modules { network { in_keys: 'normalized' out_keys: 'params' network { mlp { in_features: 3 "
         "hidden_sizes: [16] out_features: 4 } } } }\n"
         "    modules { network { in_keys: 'params' out_keys: ['loc', 'scale'] network { normal_param_extractor { "
         "} } } }\n"
         "    modules { probabilistic { in_keys: ['loc', 'scale'] out_keys: 'action' distribution: 'normal' "
         "return_log_prob: true log_prob_key: 'action_log_prob' } }\n"
         "  } }\n"
         "} }\ninit_seed: 3";
}

std::unique_ptr<Actor> actor_with_statistics(const std::string& text, Backend backend) {
  tdpolicy::PolicySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  auto policy = policy::build_policy(spec, "test", ".");
  EXPECT_TRUE(policy.ok()) << policy.status();
  if (!policy.ok()) return nullptr;
  // Statistics as a trained normalization has them (built: loc 0, scale 1).
  for (const auto& module : policy->module->modules()) {
    if (auto* norm = dynamic_cast<nn::ObservationNormImpl*>(module.get())) {
      norm->set_statistics(at::tensor({5.0f, -1.0f, 2.0f}), at::tensor({3.0f, 0.5f, 8.0f}));
    }
  }
  return std::make_unique<Actor>(*std::move(policy), ActorOptions().backend(backend).run_self_tests(false));
}

void expect_parity(const std::string& text, at::ScalarType dtype, const std::string& name) {
  auto fused = actor_with_statistics(text, Backend::kFused);
  auto reference = actor_with_statistics(text, Backend::kLibTorch);
  ASSERT_TRUE(fused && reference);
  ASSERT_OK(fused->describe().fused_status);
  for (int64_t batch : {1, 7, 64, 300}) {
    at::manual_seed(batch);
    TensorDict obs({batch});
    obs.set("observation",
            (at::randn({batch, 3}) * at::tensor({6.0f, 1.0f, 16.0f}) + at::tensor({5.0f, -1.0f, 2.0f})).to(dtype));
    for (InteractionType type : {InteractionType::kDeterministic, InteractionType::kMode, InteractionType::kMean}) {
      ASSERT_TRUE(fused->describe().runs_fused(batch, type)) << name << " " << nn::to_string(type);
      TensorDict a = fused->act(obs, type);
      TensorDict b = reference->act(obs, type);
      for (const char* key : {"action", "action_log_prob"}) {
        const at::Tensor f = a.get(key).to(at::kDouble), r = b.get(key).to(at::kDouble);
        ASSERT_EQ(f.sizes(), r.sizes()) << name << " " << key;
        EXPECT_TRUE((f - r).abs().le(1e-5 + 1e-5 * r.abs()).all().item<bool>())
            << name << " batch " << batch << " " << key << ": max diff " << (f - r).abs().max().item<double>();
      }
    }
  }
}

TEST(FusedTransforms, ObservationNormEqualsLibTorch) {
  expect_parity(norm_spec(Cast::kNone, true, ""), at::kFloat, "standard_normal");
  expect_parity(norm_spec(Cast::kNone, false, ""), at::kFloat, "affine");
  expect_parity(norm_spec(Cast::kNone, true, " clip: 1.5"), at::kFloat, "clipped");
}

TEST(FusedTransforms, AFloat64InputThroughToDtypeLowersAndEqualsLibTorch) {
  expect_parity(norm_spec(Cast::kFirst, true, " clip: 10"), at::kDouble, "float64");
  // A float64 input that anything else reads keeps the policy on LibTorch, which normalizes in
  // float64 there.
  auto refused = actor_with_statistics(norm_spec(Cast::kAfterNorm, true, ""), Backend::kAuto);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->describe().fused_status.message(),
            "not lowerable to the fused CPU plan: module.sequential.modules[0]: reads the float64 input 'observation'; "
            "the plan computes in float32 and reads a float64 input only through a to_dtype to float32 "
            "(DoubleToFloat)");
}

TEST(FusedTransforms, ImagesRunOnLibTorchAndSayWhy) {
  auto image = actor_with_statistics(
      "inputs { key: 'pixels' shape: [4, 4, 3] dtype: UINT8 } output_keys: 'image'\n"
      "module { network { in_keys: 'pixels' out_keys: 'image' network { to_tensor_image { from_int: true } } } }\n"
      "init_seed: 1",
      Backend::kAuto);
  ASSERT_TRUE(image);
  EXPECT_EQ(image->describe().fused_status.message(),
            "not lowerable to the fused CPU plan: module: a ToTensorImage reads an image [H, W, C]; the plan's values "
            "are vectors (an image policy runs "
            "on LibTorch)");
}

}  // namespace
}  // namespace tdp::fused
