// init_seed: a seeded policy's initial weights come from a generator of its own, so they do not
// depend on what other threads draw from LibTorch's global generator during the load, and they
// are the weights the seeded global generator gave before (specs saved with a seed keep them).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "sdk/nn/layers.h"
#include "sdk/nn/networks.h"
#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::parse_text_or_fail;

// An MLP, then a GRU cell, then a Conv2d: LibTorch's Linear and GRUCell, and the SDK's own Conv2d.
constexpr char kSeeded[] = R"pb(
  name: "seeded" version: "1" init_seed: 11
  inputs { key: "observation" shape: [4] }
  inputs { key: "hidden" shape: [8] }
  inputs { key: "pixels" shape: [3, 8, 8] }
  output_keys: ["hidden", "features"]
  module { sequential {
    modules { network { in_keys: ["observation"] out_keys: ["x"]
                        network { mlp { in_features: 4 hidden_sizes: [16] out_features: 4 } } } }
    modules { overwrite_keys: ["hidden"]
              network { in_keys: ["x", "hidden"] out_keys: ["hidden"]
                        network { gru_cell { input_size: 4 hidden_size: 8 } } } }
    modules { network { in_keys: ["pixels"] out_keys: ["features"]
                        network { conv2d { in_channels: 3 out_channels: 2 kernel_size: [3, 3] } } } } } }
)pb";

std::vector<at::Tensor> weights(const Policy& policy) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : policy.module->parameters()) out.push_back(p.detach().clone());
  return out;
}

bool same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].equal(b[i])) return false;
  }
  return true;
}

TEST(InitSeed, LoadsGiveTheSameWeightsWhileAnotherThreadDrawsGlobalRandomNumbers) {
  const tdpolicy::PolicySpec spec = parse_text_or_fail(kSeeded);
  ASSERT_OK_AND_ASSIGN(Policy reference, build_policy(spec, "seeded.pbtxt", "", LoadOptions{}));
  const std::vector<at::Tensor> expected = weights(reference);
  std::atomic<bool> done{false};
  std::thread hammer([&] {
    while (!done.load()) at::randn({64});
  });
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<Policy> policy = build_policy(spec, "seeded.pbtxt", "", LoadOptions{});
    if (!policy.ok()) {
      ADD_FAILURE() << policy.status();
      break;
    }
    differ += same(weights(*policy), expected) ? 0 : 1;
  }
  done = true;
  hammer.join();
  EXPECT_EQ(differ, 0) << "of 50 seeded loads";
}

TEST(InitSeed, DrawsWhatTheSeededGlobalGeneratorDrewForTheSameLayers) {
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(parse_text_or_fail(kSeeded), "seeded.pbtxt", "", LoadOptions{}));
  // The same layers built in the same order right after at::manual_seed(init_seed).
  at::manual_seed(11);
  nn::Mlp mlp(nn::MlpOptions(4, {16}, 4));
  nn::GruCell gru(nn::GruCellOptions(4, 8));
  nn::Conv2d conv(nn::Conv2dOptions(3, 2, {3, 3}));
  std::vector<at::Tensor> expected;
  for (torch::nn::Module* module : std::vector<torch::nn::Module*>{mlp.get(), gru.get(), conv.get()}) {
    for (const at::Tensor& p : module->parameters()) expected.push_back(p.detach());
  }
  EXPECT_TRUE(same(weights(policy), expected));
}

}  // namespace
}  // namespace tdp::policy
