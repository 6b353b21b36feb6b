// Helpers shared by the //tests/policy test files: reading and writing scratch files, parsing a
// text spec that must parse, and running a policy under an interaction type. (A policy that must
// load: ASSERT_OK_AND_ASSIGN(Policy policy, load_policy(path)), tests/testing/status_matchers.h.)
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "sdk/probabilistic/interaction_type.h"
#include "sdk/policy/policy.h"
#include "sdk/tensordict/tensordict.h"
#include "tests/testing/files.h"

namespace tdp::policy::testing {

using test_util::read_file;
using test_util::temp_path;
using test_util::write_file;

inline tdpolicy::PolicySpec parse_text_or_fail(const std::string& text) {
  auto spec = parse_spec(text, SpecFormat::kText, "test.pbtxt");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : tdpolicy::PolicySpec{};
}

inline TensorDict run(const Policy& policy, const TensorDict& inputs, nn::InteractionType type) {
  nn::InteractionTypeGuard guard(type, /*thread_local_only=*/true);
  return policy.module->forward(inputs.clone(/*deep=*/false));
}

}  // namespace tdp::policy::testing
