// The spec's `ensemble` module kind: it loads into a tdp::nn::EnsembleModule, runs with the
// leading copies dim, round-trips through export_spec with the same numbers, self-tests, and its
// fields are validated with their paths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sdk/nn/ensemble_module.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/self_test.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using ::testing::HasSubstr;
using testing::parse_text_or_fail;

// Five critics over one observation, then a chained ensemble that reads each critic's features.
constexpr char kCritics[] = R"pb(
  name: "critics" version: "1" init_seed: 7
  inputs { key: "observation" shape: 6 }
  output_keys: ["value"]
  module { sequential {
    modules { ensemble { num_copies: 5
      module { network { in_keys: "observation" out_keys: "features"
                         network { mlp { in_features: 6 hidden_sizes: [16] out_features: 8 activation: "relu" } } } } } }
    modules { ensemble { num_copies: 5 expand_input: false
      module { network { in_keys: "features" out_keys: "value" network { linear { in_features: 8 out_features: 1 } } } } } }
  } }
)pb";

TEST(EnsembleSpecTest, LoadsRunsAndRoundTripsThroughExport) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(parse_text_or_fail(kCritics), "critics.pbtxt", "."));
  TensorDict input({{"observation", at::randn({3, 6})}}, {3});
  const TensorDict out = policy.module->forward(input.clone());
  EXPECT_EQ(out.batch_size().vec(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(out.get("value").sizes().vec(), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_FALSE(at::allclose(out.get("value")[0], out.get("value")[1])) << "copies are initialized independently";
  const auto named = policy.module->named_parameters();
  ASSERT_NE(named.find("module.0.params.module.layers.0.weight"), nullptr) << ::testing::PrintToString(named.keys());
  EXPECT_EQ(named["module.0.params.module.layers.0.weight"].size(0), 5);

  ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*policy.module, policy.spec));
  EXPECT_EQ(exported.module().sequential().modules(1).ensemble().num_copies(), 5);
  EXPECT_FALSE(exported.module().sequential().modules(1).ensemble().expand_input());
  ASSERT_OK_AND_ASSIGN(Policy reloaded, build_policy(exported, "exported.pbtxt", "."));
  EXPECT_TRUE(at::equal(reloaded.module->forward(input.clone()).get("value"), out.get("value")));
}

TEST(EnsembleSpecTest, ASelfTestRecordsTheCopiesAndPasses) {
  tdpolicy::PolicySpec spec = parse_text_or_fail(kCritics);
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "critics.pbtxt", "."));
  TensorDict input({{"observation", at::randn({2, 6})}}, {2});
  ASSERT_OK_AND_ASSIGN(tdpolicy::SelfTest test, make_self_test(policy, input, TensorDict({2})));
  ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*policy.module, policy.spec));
  *exported.add_self_tests() = test;
  LoadOptions checked;
  checked.run_self_tests = true;
  EXPECT_OK(build_policy(exported, "exported.pbtxt", ".", checked).status());
  // A changed weight of one copy fails it (the template's own weights are not what runs).
  for (auto& named : *exported.mutable_parameters()->mutable_tensors()) {
    if (named.name() == "module.1.params.module.weight") named.mutable_tensor()->mutable_data()->at(3) ^= 0x40;
  }
  EXPECT_FALSE(build_policy(exported, "exported.pbtxt", ".", checked).ok());
}

TEST(EnsembleSpecTest, FieldsAreValidatedWithTheirPaths) {
  tdpolicy::PolicySpec spec = parse_text_or_fail(kCritics);
  auto* ensemble = spec.mutable_module()->mutable_sequential()->mutable_modules(0)->mutable_ensemble();
  ensemble->set_num_copies(0);
  EXPECT_THAT(validate_spec(spec, "c.pbtxt").message(),
              HasSubstr("c.pbtxt: module.sequential.modules[0].ensemble.num_copies: 0 copies; expected 1 to 65536"));
  ensemble->set_num_copies(5);
  ensemble->clear_module();
  EXPECT_THAT(validate_spec(spec, "c.pbtxt").message(),
              HasSubstr("module.sequential.modules[0].ensemble.module: the ensemble has no module"));
  // Copies count against the element limits before anything is allocated.
  spec = parse_text_or_fail(kCritics);
  spec.mutable_module()->mutable_sequential()->mutable_modules(0)->mutable_ensemble()->set_num_copies(60000);
  LoadOptions small;
  small.limits.max_total_elements = 1 << 20;
  EXPECT_THAT(validate_spec(spec, "c.pbtxt", small).message(),
              HasSubstr("module.sequential.modules[0].ensemble.num_copies"));
}

}  // namespace
}  // namespace tdp::policy
