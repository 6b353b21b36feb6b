// The aoti_package network kind on a real AOTInductor package that make_aoti_package.py compiles at
// test time (TDP_AOTI_PACKAGE_DIR, set by aoti_package_test.sh): it loads through a spec and
// computes what PyTorch computed, at any batch dims; its key counts, dtypes, device and SHA-256 are
// checked; an Actor runs it on LibTorch and says why the fused plan does not.
#include "sdk/nn/aoti_package.h"

#include <gmock/gmock.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using ::testing::HasSubstr;
using testing::parse_text_or_fail;

std::string package_dir() {
  const char* dir = std::getenv("TDP_AOTI_PACKAGE_DIR");
  return dir != nullptr ? dir : "";
}

// tiny.expected: the package's SHA-256, then its two outputs' values, flattened.
struct Expected {
  std::string sha256;
  at::Tensor first;   // [5, 3]
  at::Tensor second;  // [5, 1]
};

Expected read_expected() {
  std::ifstream in(package_dir() + "/tiny.expected");
  Expected expected;
  in >> expected.sha256;
  std::vector<float> values;
  for (double v; in >> v;) values.push_back(static_cast<float>(v));
  EXPECT_EQ(values.size(), 20u);
  const at::Tensor all = torch::tensor(values);
  expected.first = all.slice(0, 0, 15).reshape({5, 3});
  expected.second = all.slice(0, 15, 20).reshape({5, 1});
  return expected;
}

at::Tensor x_input() { return torch::linspace(-1, 1, 20).reshape({5, 4}); }
at::Tensor y_input() { return torch::linspace(0.5, -0.5, 10).reshape({5, 2}); }

tdpolicy::PolicySpec spec_with(const std::string& package_fields, const std::string& in_keys = "\"x\", \"y\"") {
  return parse_text_or_fail(
      "parameters {} inputs { key: \"x\" shape: 4 } inputs { key: \"y\" shape: 2 } output_keys: \"a\" "
      "output_keys: \"b\" "
      "module { network { in_keys: [" +
      in_keys + "] out_keys: [\"a\", \"b\"] network { aoti_package { file: \"tiny.pt2\" " + package_fields +
      " } } } }");
}

bool libtorch_so_loaded() { return dlopen("libtorch.so", RTLD_NOW | RTLD_NOLOAD) != nullptr; }

class AotiPackageTest : public ::testing::Test {
 protected:
  // Before any test of the suite has loaded a package, whatever order they run in.
  static void SetUpTestSuite() { libtorch_so_loaded_before_packages_ = libtorch_so_loaded(); }
  void SetUp() override {
    if (package_dir().empty()) GTEST_FAIL() << "TDP_AOTI_PACKAGE_DIR is not set (run aoti_package_test.sh)";
    expected_ = read_expected();
  }
  absl::StatusOr<Policy> build(const tdpolicy::PolicySpec& spec) {
    return build_policy(spec, "t.pbtxt", package_dir());
  }
  std::string sha() const { return "sha256: \"" + expected_.sha256 + "\""; }
  Expected expected_;
  static bool libtorch_so_loaded_before_packages_;
};

bool AotiPackageTest::libtorch_so_loaded_before_packages_ = false;

// libtorch.so brings the CUDA libraries with it: a process that never loads a package never loads it.
TEST_F(AotiPackageTest, LibTorchSoLoadsWithTheFirstPackage) {
  EXPECT_FALSE(libtorch_so_loaded_before_packages_) << "libtorch.so was loaded before any package";
  ASSERT_OK_AND_ASSIGN(Policy policy, build(spec_with(sha())));
  EXPECT_TRUE(libtorch_so_loaded());
}

TEST_F(AotiPackageTest, ComputesWhatPyTorchComputedAtAnyBatchDims) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build(spec_with(sha())));
  TensorDict out = policy.module->forward(TensorDict({{"x", x_input()}, {"y", y_input()}}, {5}));
  EXPECT_TRUE(torch::allclose(out.get("a"), expected_.first, 0, 1e-6)) << out.get("a") << expected_.first;
  EXPECT_TRUE(torch::allclose(out.get("b"), expected_.second, 0, 1e-6));

  // Leading batch dims [1, 5] are flattened into the package's one and restored.
  TensorDict nested = policy.module->forward(
      TensorDict({{"x", x_input().reshape({1, 5, 4})}, {"y", y_input().reshape({1, 5, 2})}}, {1, 5}));
  EXPECT_EQ(nested.get("a").sizes(), (std::vector<int64_t>{1, 5, 3}));
  EXPECT_TRUE(torch::allclose(nested.get("a").reshape({5, 3}), expected_.first, 0, 1e-6));

  // One row, and an empty batch (not handed to the program).
  TensorDict one =
      policy.module->forward(TensorDict({{"x", x_input().slice(0, 2, 3)}, {"y", y_input().slice(0, 2, 3)}}, {1}));
  EXPECT_TRUE(torch::allclose(one.get("b"), expected_.second.slice(0, 2, 3), 0, 1e-6));
  TensorDict empty =
      policy.module->forward(TensorDict({{"x", torch::zeros({0, 4})}, {"y", torch::zeros({0, 2})}}, {0}));
  EXPECT_EQ(empty.get("a").sizes(), (std::vector<int64_t>{0, 3}));
  // The weights live in the package.
  EXPECT_TRUE(policy.module->parameters().empty());
}

TEST_F(AotiPackageTest, AnUppercaseDigestAndTheDefaultDeviceLoad) {
  std::string upper = expected_.sha256;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  EXPECT_OK(build(spec_with("sha256: \"" + upper + "\"")).status());
}

TEST_F(AotiPackageTest, AWrongInputIsAnErrorNamingThePackage) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build(spec_with(sha())));
  try {
    policy.module->forward(TensorDict({{"x", x_input().to(torch::kDouble)}, {"y", y_input()}}, {5}));
    FAIL() << "expected an error";
  } catch (const std::exception& error) {
    EXPECT_THAT(error.what(), HasSubstr("tiny.pt2: input 0 is Double [5,4]; the package "
                                        "takes Float [batch..., 4]"));
  }
}

TEST_F(AotiPackageTest, KeyCountsAndDeviceAreCheckedAtLoad) {
  auto one_input = build(spec_with(sha(), R"("x")"));
  ASSERT_FALSE(one_input.ok());
  EXPECT_THAT(std::string(one_input.status().message()),
              HasSubstr("tiny.pt2: the package takes 2 inputs; the module has 1 in_keys"));
  auto cuda = build(spec_with(sha() + " device: \"cuda\""));
  ASSERT_FALSE(cuda.ok());
  EXPECT_THAT(std::string(cuda.status().message()), HasSubstr("tiny.pt2: the package was compiled for cpu, not for "
                                                              "cuda as the spec's device says"));
}

TEST_F(AotiPackageTest, ADigestThatIsNotTheFilesIsALoadError) {
  const std::string wrong(64, '0');
  auto policy = build(spec_with("sha256: \"" + wrong + "\""));
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(), "t.pbtxt: module: cannot build the policy: " + package_dir() +
                                           "/tiny.pt2: the file's SHA-256 is " + expected_.sha256 +
                                           ", not the aoti_package.sha256 " + wrong +
                                           " of the spec (hint: tdpolicy.export(..., fallback=\"aoti\") "
                                           "writes the package and its digest)");
}

TEST_F(AotiPackageTest, ACpuPackageDoesNotMoveToAGpu) {
  nn::TensorDictModule module =
      nn::load_aoti_package(package_dir() + "/tiny.pt2", nn::TensorDictModuleOptions({"x", "y"}, {"a", "b"}));
  try {
    module->to(torch::Device(torch::kCUDA));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& error) {
    EXPECT_THAT(error.what(), HasSubstr("tiny.pt2: the package was compiled "
                                        "for cpu and cannot move to cuda"));
  }
}

TEST_F(AotiPackageTest, AnActorRunsItOnLibTorch) {
  const std::string path = package_dir() + "/tiny.pbtxt";
  std::ofstream(path) << spec_with(sha()).DebugString();
  ASSERT_OK_AND_ASSIGN(auto actor, actor::Actor::load(path));
  const actor::ActorInfo info = actor->describe();
  EXPECT_THAT(std::string(info.fused_status.message()), HasSubstr(": an AOTInductor package runs on LibTorch"));
  TensorDict out = actor->act(TensorDict({{"x", x_input()}, {"y", y_input()}}, {5}));
  EXPECT_TRUE(torch::allclose(out.get("a"), expected_.first, 0, 1e-6));

  auto fused = actor::Actor::load(path, actor::ActorOptions().backend(actor::Backend::kFused));
  ASSERT_FALSE(fused.ok());
  EXPECT_THAT(std::string(fused.status().message()), HasSubstr("an AOTInductor package runs on LibTorch"));
}

}  // namespace
}  // namespace tdp::policy
