// The usage example at the top of sdk/cli/json_tensordict.h, compiled and run as written, so that
// it stays true. (tdp_main.cc's commands are run by tdp_cli_test.cc.)
#include <gtest/gtest.h>

#include <string>

#include "sdk/cli/json_tensordict.h"

namespace {

TEST(HeaderExamplesTest, JsonTensorDict) {
  struct {
    tdp::policy::Signature signature;
  } policy;
  policy.signature.inputs = {{"observation", "observation", at::kFloat, {3}},
                             {{"next", "reward"}, "next/reward", at::kFloat, {1}}};

  // signature inputs: "observation" float32 [3]; "next/reward" float32 [1]
  absl::StatusOr<tdp::TensorDict> td = tdp::cli::tensordict_from_json(
      R"({"observation": [[0.1, 0.2, 0.3], [1, 2, 3]], "next": {"reward": [[0.5], [1]]}})",
      policy.signature.inputs);                         // batch_size [2]
  absl::StatusOr<std::string> json = tdp::cli::tensordict_to_json(*td);

  ASSERT_TRUE(td.ok()) << td.status();
  EXPECT_EQ(td->batch_size().vec(), std::vector<int64_t>{2});
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json,
            "{\n"
            "  \"observation\": [[0.1, 0.2, 0.3], [1, 2, 3]],\n"
            "  \"next\": {\n"
            "    \"reward\": [[0.5], [1]]\n"
            "  }\n"
            "}\n");
}

}  // namespace
