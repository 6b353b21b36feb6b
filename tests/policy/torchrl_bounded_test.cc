// TorchRL's bounded actors in specs: the tanh module kind (TanhModule), Module.projections
// (safe=True onto Bounded / OneHot / Categorical specs), tensor distribution kwargs (per-dimension
// and per-agent bounds): values against TorchRL's (printed by
//   ~/.cache/tdpolicy/venv/bin/python tests/distributions/make_torchrl_bounded_golden.py),
// build/export round trips, and each validation error, exactly.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "sdk/nn/safe_module.h"
#include "sdk/nn/tanh_module.h"
#include "sdk/nn/tensor_spec.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/call.h"
#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/error_of.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using ::testing::HasSubstr;
using testing::parse_text_or_fail;

at::Tensor values(std::vector<float> v, std::vector<int64_t> shape) { return at::tensor(v, at::kFloat).reshape(shape); }

void expect_near(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(at::allclose(got.to(at::kDouble), want.to(at::kDouble), 1e-6, 1e-6)) << got << "\nwant\n" << want;
}

const at::Tensor kX = values({3.0f, -12.0f, 25.0f, -7.0f, 0.5f, -30.0f}, {2, 3});
const at::Tensor kLow = values({-1.0f, -2.0f, 0.5f}, {3});
const at::Tensor kHigh = values({1.0f, 0.5f, 3.0f}, {3});

TEST(TanhModule, MatchesTorchRL) {
  nn::TanhModule spec_bounds(nn::TanhModuleOptions({"x"}, {"y"}).bounds({{kLow, kHigh}}));
  TensorDict out = spec_bounds(TensorDict({{"x", kX}}, {2}));
  expect_near(out.get("y"), values({0.995054722f, -2, 3, -0.999998331f, -0.172353506f, 0.5f}, {2, 3}));
  nn::TanhModule clamped(nn::TanhModuleOptions({"x"}, {"y"}).clamp(true));
  expect_near(clamped(TensorDict({{"x", kX}}, {2})).get("y"),
              values({0.995054722f, -0.999998987f, 0.999999046f, -0.999998331f, 0.462117195f, -0.999998987f}, {2, 3}));
  EXPECT_THAT(test_util::error_of<std::invalid_argument>([] {
                nn::TanhModule(nn::TanhModuleOptions({"x"}).bounds({{kHigh, kLow}}));
              }),
              HasSubstr("TanhModule: got high < low"));
}

TEST(TensorSpec, ProjectsAsTorchRL) {
  nn::TensorSpec box = nn::TensorSpec::bounded(kLow, kHigh, {3});
  expect_near(box.project(kX / 10), values({0.3f, -1.2f, 2.5f, -0.7f, 0.05f, 0.5f}, {2, 3}));
  nn::TensorSpec categorical = nn::TensorSpec::categorical(4, {3});
  expect_near(categorical.project(values({0.4f, 2.6f, 7.0f, -1.2f, 3.5f, 1.0f}, {2, 3})),
              values({0, 3, 3, 0, 3, 1}, {2, 3}));
  nn::TensorSpec one_hot = nn::TensorSpec::one_hot(3);
  at::Tensor projected = one_hot.project(values({0, 1, 0, 1, 0, 0}, {2, 3}));
  EXPECT_EQ(projected.scalar_type(), at::kBool);
  expect_near(projected, values({0, 1, 0, 1, 0, 0}, {2, 3}));
  // A value in the space is returned as is (TorchRL's project checks is_in first).
  const at::Tensor in_range = at::tensor({1, 3, 0}, at::kLong).reshape({1, 3});
  EXPECT_TRUE(categorical.project(in_range).is_same(in_range));
  const at::Tensor in_box = values({0.0f, 0.0f, 1.0f}, {1, 3});
  EXPECT_TRUE(box.project(in_box).is_same(in_box));
}

TEST(SafeModule, ProjectsTheModulesOutputs) {
  nn::TensorDictModule linear(torch::nn::Linear(2, 3), nn::TensorDictModuleOptions({"x"}, {"action"}));
  nn::SafeModule safe(
      linear, std::vector<nn::SpecProjection>{{NestedKey("action"), nn::TensorSpec::bounded(kLow, kHigh, {3})}});
  TensorDict out = safe(TensorDict({{"x", at::randn({5, 2}) * 100}}, {5}));
  EXPECT_TRUE((out.get("action") >= kLow).all().item<bool>());
  EXPECT_TRUE((out.get("action") <= kHigh).all().item<bool>());
  EXPECT_THAT(
      test_util::error_of<std::invalid_argument>([&] {
        nn::SafeModule(linear, std::vector<nn::SpecProjection>{{NestedKey("other"), nn::TensorSpec::categorical(2)}});
      }),
      HasSubstr("SafeModule: the spec's key 'other' is not an out_key of TensorDictModule, whose out_keys are "
                "['action']"));
}

// A TD3 actor, a projected network and a TanhNormal with per-dimension bounds: what each spec
// builds exports back to the same fields.
constexpr char kBounds[] = R"pb(
  low { dtype: FLOAT32 shape: 3 data: "\000\000\200\277\000\000\000\300\000\000\000?" }
  high { dtype: FLOAT32 shape: 3 data: "\000\000\200?\000\000\000?\000\000@@" }
)pb";

tdpolicy::PolicySpec td3_spec() {
  return parse_text_or_fail(
      std::string(R"pb(
        inputs { key: "observation" shape: 4 }
        output_keys: "action"
        init_seed: 1
        module { sequential { modules {
                   name: "0"
                   network {
                     in_keys: "observation"
                     out_keys: "param"
                     network { mlp { in_features: 4 hidden_sizes: 8 out_features: 3 activation: "relu" } }
                   }
                 }
                              modules { name: "1"
                                        tanh { in_keys: "param" out_keys: "action" bounds {)pb") +
      kBounds + R"pb(}
                     } }
    } })pb");
}

TEST(BoundedSpecs, TanhModuleBuildsRunsAndExports) {
  tdpolicy::PolicySpec spec = td3_spec();
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "t.pbtxt", "."));
  TensorDict out = policy.module->forward(TensorDict({{"observation", at::randn({5, 4}) * 10}}, {5}));
  EXPECT_TRUE((out.get("action") >= kLow).all().item<bool>());
  EXPECT_TRUE((out.get("action") <= kHigh).all().item<bool>());
  ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*policy.module, spec));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(exported.module(), spec.module()))
      << exported.module().DebugString();
}

TEST(BoundedSpecs, ProjectionsAndTensorKwargsExportWhatTheyBuild) {
  tdpolicy::PolicySpec spec = parse_text_or_fail(
      std::string(R"pb(
        inputs { key: "observation" shape: 4 }
        output_keys: "action"
        init_seed: 1
        module { probabilistic_sequential { modules { network {
                                              in_keys: "observation"
                                              out_keys: "param"
                                              network { linear { in_features: 4 out_features: 3 } }
                                            }
                                                      projections { key: "param"
                                                                    spec { shape: 3 dtype: FLOAT32 bounded {)pb") +
      kBounds + R"pb(}
                     } } }
      modules { probabilistic { in_keys: "param" out_keys: "action" distribution: "tanh_delta"
                                distribution_kwargs { key: "low" value { tensor_value {
                                  dtype: FLOAT32 shape: 3 data: "\000\000\200\277\000\000\000\300\000\000\000?" } } }
                                default_interaction_type: "deterministic" }
                projections { key: "action" spec { categorical { n: 4 } dtype: FLOAT32 } } }
    } })pb");
  ASSERT_OK(validate_spec(spec, "t.pbtxt"));
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "t.pbtxt", "."));
  TensorDict out = policy.module->forward(TensorDict({{"observation", at::randn({5, 4}) * 10}}, {5}));
  EXPECT_TRUE(out.get("action").equal(out.get("action").round().clamp(0, 3)));
  ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*policy.module, spec));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(exported.module(), spec.module()))
      << exported.module().DebugString();
}

// ---- validation: each message exactly --------------------------------------------------------

std::string error_of(const tdpolicy::PolicySpec& spec) {
  absl::Status status = validate_spec(spec, "t.pbtxt");
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

tdpolicy::Module& tanh_of(tdpolicy::PolicySpec& spec) {
  return *spec.mutable_module()->mutable_sequential()->mutable_modules(1);
}

TEST(BoundedSpecs, TanhValidationErrors) {
  tdpolicy::PolicySpec spec = td3_spec();
  tanh_of(spec).mutable_tanh()->mutable_bounds(0)->mutable_low()->set_shape(0, 2);
  tanh_of(spec).mutable_tanh()->mutable_bounds(0)->mutable_low()->set_data(std::string(8, '\0'));
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].tanh.bounds[0].low: the low bound of shape [2] does not "
            "broadcast onto the per-environment shape [3] (hint: give one value, one per last dim, or the full "
            "per-environment shape)");
  spec = td3_spec();
  tanh_of(spec).mutable_tanh()->add_bounds();
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].tanh.bounds: one bounds entry per out_key or "
            "none: 2 for 1 keys");
  spec = td3_spec();
  std::swap(*tanh_of(spec).mutable_tanh()->mutable_bounds(0)->mutable_low(),
            *tanh_of(spec).mutable_tanh()->mutable_bounds(0)->mutable_high());
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].tanh.bounds[0].low: low must not exceed high "
            "anywhere");
  spec = td3_spec();
  tanh_of(spec).mutable_tanh()->mutable_bounds(0)->mutable_high()->set_dtype(tdpolicy::INT32);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].tanh.bounds[0].high: the high bound has dtype "
            "Int (hint: give a floating-point tensor)");
  spec = td3_spec();
  tanh_of(spec).mutable_tanh()->mutable_bounds(0)->mutable_high()->set_shape(0, int64_t{1} << 40);
  EXPECT_THAT(error_of(spec), HasSubstr("module.sequential.modules[1].tanh.bounds[0].high.shape: "));
}

TEST(BoundedSpecs, ProjectionValidationErrors) {
  tdpolicy::PolicySpec spec = td3_spec();
  auto* projection = tanh_of(spec).add_projections();
  projection->set_key("elsewhere");
  projection->mutable_spec()->mutable_categorical()->set_n(3);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].projections[0].key: the projected key "
            "\"elsewhere\" is not written by the module (hint: project one of its outputs; written "
            "so far: [\"action\", \"observation\", \"param\"])");
  projection->set_key("action");
  projection->mutable_spec()->mutable_one_hot()->set_n(0);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].projections[0].spec.one_hot.n: must be "
            "positive, got 0");
  projection->mutable_spec()->mutable_one_hot()->set_n(4);
  projection->mutable_spec()->add_shape(3);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].projections[0].spec.shape: a one_hot spec's last "
            "dim must be n (4), got 3");
  projection->mutable_spec()->mutable_bounded();
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].projections[0].spec.bounded: a bounded spec "
            "needs low and high");
  projection->mutable_spec()->Clear();
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].projections[0].spec: no spec kind is set "
            "(hint: one of bounded, one_hot, categorical)");
}

tdpolicy::PolicySpec tanh_normal_spec(const std::string& kwargs) {
  return parse_text_or_fail(R"pb(
                              inputs { key: "loc" shape: 3 }
                              inputs { key: "scale" shape: 3 }
                              output_keys: "action"
                              module { probabilistic { in_keys: [ "loc", "scale" ]
                                                       out_keys: "action"
                                                       distribution: "tanh_normal")pb" +
                            kwargs + "} }");
}

TEST(BoundedSpecs, TensorKwargValidationErrors) {
  const std::string low =
      R"pb(distribution_kwargs {
             key: "low"
             value { tensor_value { dtype: FLOAT32 shape: 3 data: "\000\000\200\277\000\000\000\300\000\000\000?" } }
           })pb";
  ASSERT_OK(validate_spec(tanh_normal_spec(low), "t.pbtxt"));
  EXPECT_EQ(error_of(tanh_normal_spec(R"pb(distribution_kwargs {
                                             key: "upscale"
                                             value { tensor_value { dtype: FLOAT32 shape: 1 data: "\000\000\200?" } }
                                           })pb")),
            "t.pbtxt: module.probabilistic.distribution_kwargs[\"upscale\"]: distribution \"tanh_normal\" takes kwarg "
            "\"upscale\" as a number only (hint: its tensor parameters are {loc, scale} or {high, loc, low, scale} "
            "or {loc, low, scale} or {high, loc, scale})");
  EXPECT_EQ(error_of(tanh_normal_spec(
                R"pb(distribution_kwargs {
                       key: "low"
                       value { tensor_value { dtype: FLOAT32 shape: 2 data: "\000\000\200\277\000\000\000\300" } }
                     })pb")),
            "t.pbtxt: module.probabilistic.distribution_kwargs[\"low\"].tensor_value: kwarg \"low\" of shape [2] does "
            "not broadcast onto the per-environment shape [3] (hint: give one value, one per last dim, or the full "
            "per-environment shape)");
  EXPECT_EQ(error_of(tanh_normal_spec(low + R"pb(distribution_kwargs {
                                                   key: "high"
                                                   value { double_value: -1.5 }
                                                 })pb")),
            "t.pbtxt: module.probabilistic.distribution_kwargs[\"low\"]: low must be less than high everywhere");
  EXPECT_EQ(error_of(tanh_normal_spec(R"pb(distribution_kwargs {
                                             key: "low"
                                             value { tensor_value { dtype: FLOAT32 shape: 1 data: "\000\000\300\177" } }
                                           })pb")),
            "t.pbtxt: module.probabilistic.distribution_kwargs[\"low\"].tensor_value: kwarg \"low\" holds a NaN or "
            "infinite value");
}

}  // namespace
}  // namespace tdp::policy
