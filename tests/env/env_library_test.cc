// load_env_library: a user's simulator in a shared library (samples/custom_env) made known to
// make_env by name, and the libraries it refuses, each error naming the file.
#include "sdk/env/env_library.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "samples/envs/make_env.h"
#include "tests/testing/files.h"

namespace tdp::env {
namespace {

TEST(EnvLibraryTest, ALoadedLibraryJoinsMakeEnvByName) {
  const std::string path = tdp::test_util::runfile("samples/custom_env/libmountain_car.so");
  absl::StatusOr<std::vector<std::string>> added = load_env_library(path);
  ASSERT_TRUE(added.ok()) << added.status();
  // Loading the same file again adds nothing (the first test to run may have loaded it).
  absl::StatusOr<std::vector<std::string>> again = load_env_library(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->empty());
  EXPECT_EQ(library_env_names(), std::vector<std::string>{"mountaincar"});
  std::vector<std::string> names = env_names();
  EXPECT_EQ(names.back(), "mountaincar");

  absl::StatusOr<std::unique_ptr<BatchedEnv>> env = make_env("MountainCar", EnvOptions(4));
  ASSERT_TRUE(env.ok()) << env.status();
  TensorDict td = (*env)->reset(/*seed=*/1);
  EXPECT_EQ(td.get("observation").sizes(), (std::vector<int64_t>{4, 2}));
  td.set("action", at::full({4}, 2, at::kLong));
  TensorDict out = (*env)->step(td);
  EXPECT_TRUE(at::all(out.get("reward") == -1).item<bool>());
  // The library's own argument checks surface as InvalidArgument naming the environment.
  absl::StatusOr<std::unique_ptr<BatchedEnv>> bad = make_env("mountaincar", EnvOptions(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("mountaincar"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("num_envs"), std::string::npos) << bad.status();
}

TEST(EnvLibraryTest, ALibraryForAnotherAbiIsRefusedBeforeAnythingIsCalled) {
  const std::string path = tdp::test_util::runfile("tests/env/libwrong_abi_env_library.so");
  absl::StatusOr<std::vector<std::string>> added = load_env_library(path);
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(added.status().message().find("libwrong_abi_env_library.so: compiled against env library ABI"),
            std::string::npos)
      << added.status();
  EXPECT_FALSE(make_env("stale", EnvOptions(1)).ok());
}

TEST(EnvLibraryTest, FilesThatAreNotEnvLibrariesAreNamed) {
  absl::StatusOr<std::vector<std::string>> missing = load_env_library("/no/such/library.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/no/such/library.so"), std::string::npos);

  absl::StatusOr<std::vector<std::string>> libc = load_env_library("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_FALSE(libc.ok());
  EXPECT_NE(libc.status().message().find("declares no environments"), std::string::npos) << libc.status();
}

}  // namespace
}  // namespace tdp::env
