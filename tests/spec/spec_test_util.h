// Helpers shared by the //tests/spec test files: reading and writing scratch files, loading a
// spec that must load, and running a policy under an interaction type.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "sdk/probabilistic/interaction_type.h"
#include "sdk/spec/policy.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::spec::testing {

// A fresh path under the test's scratch folder.
inline std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// The policy, or a test failure that shows the loader's Status.
inline Policy load_or_fail(const std::string& path, const LoadOptions& options = {}) {
  auto policy = load_policy(path, options);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return policy.ok() ? *std::move(policy) : Policy{};
}

inline tdpolicy::PolicySpec parse_text_or_fail(const std::string& text) {
  auto spec = parse_spec(text, SpecFormat::kText, "test.pbtxt");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : tdpolicy::PolicySpec{};
}

inline TensorDict run(const Policy& policy, const TensorDict& inputs, nn::InteractionType type) {
  nn::InteractionTypeGuard guard(type, /*thread_local_only=*/true);
  return policy.module->forward(inputs.clone(/*deep=*/false));
}

}  // namespace tdp::spec::testing
