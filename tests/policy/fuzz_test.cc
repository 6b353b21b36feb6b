// The loader never crashes: seeded mutations of valid binary specs (flipped, inserted, deleted
// bytes) and truncations of the text specs all come back as a Status, or as a policy that
// validated. A crash, an abort or an uncaught exception here fails the whole target.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::read_file;
using testing::temp_path;
using testing::write_file;

const std::vector<std::string>& policy_files() {
  static const std::vector<std::string> files = {
      "policies/pendulum_tanh_gaussian.pbtxt", "policies/cartpole_categorical.pbtxt", "policies/goal_hybrid.pbtxt",
      "policies/recurrent_gru.pbtxt", "policies/goal_autoregressive.pbtxt"};
  return files;
}

// Binary seeds: each policies/ spec as it is (init_seed) and a small one with embedded weights,
// so that mutations land in module trees and in tensor messages alike.
// A failed read, build or export fails the test (call it under ASSERT_NO_FATAL_FAILURE).
void binary_seeds(std::vector<std::string>* seeds) {
  for (const std::string& file : policy_files()) {
    ASSERT_OK_AND_ASSIGN(const tdpolicy::PolicySpec spec, read_spec(file));
    seeds->push_back(spec.SerializeAsString());
  }
  ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec spec, read_spec("policies/cartpole_categorical.pbtxt"));
  auto* mlp = spec.mutable_module()->mutable_probabilistic_sequential()->mutable_modules(0)->mutable_network()
                  ->mutable_network()->mutable_mlp();
  mlp->clear_hidden_sizes();
  mlp->add_hidden_sizes(3);
  ASSERT_OK_AND_ASSIGN(const Policy policy, build_policy(spec, "small", "."));
  ASSERT_OK_AND_ASSIGN(const tdpolicy::PolicySpec exported, export_spec(*policy.module, policy.spec));
  seeds->push_back(exported.SerializeAsString());
}

std::string mutate(std::string bytes, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  const int edits = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int e = 0; e < edits && !bytes.empty(); ++e) {
    const size_t at = std::uniform_int_distribution<size_t>(0, bytes.size() - 1)(rng);
    switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
      case 0:
        bytes[at] = static_cast<char>(byte(rng));
        break;
      case 1:
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << std::uniform_int_distribution<int>(0, 7)(rng)));
        break;
      case 2:
        bytes.insert(bytes.begin() + at, static_cast<char>(byte(rng)));
        break;
      case 3:
        bytes.erase(at, std::uniform_int_distribution<size_t>(1, 8)(rng));
        break;
      case 4:
        bytes.resize(at);
        break;
    }
  }
  return bytes;
}

// Parses, validates and builds; every failure must come back as a Status with a message.
void load_and_maybe_run(const std::string& content, SpecFormat format, int* built) {
  auto spec = parse_spec(content, format, "fuzz");
  if (!spec.ok()) {
    EXPECT_FALSE(spec.status().message().empty());
    return;
  }
  auto policy = build_policy(*spec, "fuzz", temp_path(""));
  if (!policy.ok()) {
    EXPECT_FALSE(policy.status().message().empty());
    return;
  }
  ++*built;
}

TEST(Fuzz, MutatedBinarySpecsNeverCrashTheLoader) {
  std::vector<std::string> seeds;
  ASSERT_NO_FATAL_FAILURE(binary_seeds(&seeds));
  ASSERT_EQ(seeds.size(), 6u);
  std::mt19937 rng(20240611);
  int built = 0;
  int rejected = 0;
  constexpr int kRuns = 3000;
  for (int i = 0; i < kRuns; ++i) {
    const std::string& seed = seeds[i % seeds.size()];
    const std::string mutated = mutate(seed, rng);
    const int before = built;
    load_and_maybe_run(mutated, SpecFormat::kBinary, &built);
    rejected += built == before;
  }
  // Both outcomes happen: the mutations reach past the parser into validation and building.
  EXPECT_GT(built, 0);
  EXPECT_GT(rejected, 0);
}

TEST(Fuzz, TruncatedAndCorruptedTextSpecsNeverCrashTheLoader) {
  std::mt19937 rng(7);
  int built = 0;
  for (const std::string& file : policy_files()) {
    const std::string text = read_file(file);
    // Every 3rd prefix: cuts inside keys, strings, numbers and braces.
    for (size_t n = 0; n < text.size(); n += 3) {
      load_and_maybe_run(text.substr(0, n), SpecFormat::kText, &built);
    }
    for (int i = 0; i < 300; ++i) load_and_maybe_run(mutate(text, rng), SpecFormat::kText, &built);
  }
  EXPECT_GT(built, 0) << "some mutations only touch comments";
}

TEST(Fuzz, MutatedFilesThroughLoadPolicy) {
  // The file path: extension-driven and sniffed formats, through load_policy itself.
  std::vector<std::string> seeds;
  ASSERT_NO_FATAL_FAILURE(binary_seeds(&seeds));
  std::mt19937 rng(99);
  for (int i = 0; i < 200; ++i) {
    const std::string path = temp_path(i % 2 == 0 ? "fuzz.pb" : "fuzz.unknown_extension");
    write_file(path, mutate(seeds[i % seeds.size()], rng));
    auto policy = load_policy(path);
    if (!policy.ok()) {
      EXPECT_FALSE(policy.status().message().empty());
    }
  }
  for (const std::string& file : policy_files()) {
    auto spec = read_spec(file);
    ASSERT_OK(spec);
    const std::string json_path = temp_path("fuzz_source.json");
    ASSERT_OK(write_spec(*spec, json_path));
    const std::string json = read_file(json_path);
    for (int i = 0; i < 100; ++i) {
      const std::string path = temp_path("fuzz.json");
      write_file(path, mutate(json, rng));
      auto policy = load_policy(path);
      if (!policy.ok()) {
      EXPECT_FALSE(policy.status().message().empty());
    }
    }
  }
}

}  // namespace
}  // namespace tdp::policy
