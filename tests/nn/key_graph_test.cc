// KeyGraph: the reads and writes of every module of a tree (nested sequences walked into), as
// text and DOT, and the modules an output needs, which are the ones select_subsequence keeps:
// the pruned module computes the same outputs.
#include "sdk/nn/key_graph.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"

namespace tdp::nn {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// observation -> hidden -> action, and a critic head observation -> value in a nested sequence.
TensorDictSequential actor_critic() {
  torch::manual_seed(0);
  TensorDictModule body(torch::nn::Linear(4, 8), TensorDictModuleOptions({"observation"}, {"hidden"}));
  TensorDictModule head(torch::nn::Linear(8, 2), TensorDictModuleOptions({"hidden"}, {"action"}));
  TensorDictModule critic(torch::nn::Linear(4, 1), TensorDictModuleOptions({"observation"}, {{"critic", "value"}}));
  return TensorDictSequential({{"body", body}, {"heads", TensorDictSequential({head, critic})}});
}

TEST(KeyGraphTest, ListsEveryModulesReadsAndWritesInOrder) {
  KeyGraph graph(actor_critic().ptr());
  ASSERT_EQ(graph.nodes().size(), 3u);
  EXPECT_EQ(graph.to_text(),
            "body (TensorDictModule): observation -> hidden\n"
            "heads.0 (TensorDictModule): hidden -> action\n"
            "heads.1 (TensorDictModule): observation -> critic/value\n");
  KeyGraph leaf(TensorDictModule(torch::nn::Linear(4, 1), TensorDictModuleOptions({"x"}, {"y"})).ptr());
  EXPECT_EQ(leaf.to_text(), "(root) (TensorDictModule): x -> y\n");
}

TEST(KeyGraphTest, TheModulesAnOutputNeedsAreThoseTheSelectedSubsequenceKeeps) {
  TensorDictSequential policy = actor_critic();
  KeyGraph graph(policy.ptr());
  std::vector<std::string> paths;
  for (const KeyGraphNode* node : graph.needed_for({"action"})) paths.push_back(node->path);
  EXPECT_EQ(paths, (std::vector<std::string>{"body", "heads.0"}));
  paths.clear();
  for (const KeyGraphNode* node : graph.needed_for({{"critic", "value"}})) paths.push_back(node->path);
  EXPECT_EQ(paths, (std::vector<std::string>{"heads.1"}));
  EXPECT_TRUE(graph.needed_for({"nothing_writes_this"}).empty());

  // The pruned module computes the same action.
  auto pruned = policy->select_subsequence(std::nullopt, std::vector<NestedKey>{"action"});
  TensorDict input({{"observation", at::randn({3, 4})}}, {3});
  TensorDict full = policy->forward(input.clone());
  TensorDict only = pruned->forward(input.clone());
  EXPECT_TRUE(at::equal(full.get("action"), only.get("action")));
  EXPECT_FALSE(only.contains({"critic", "value"}));
  EXPECT_EQ(KeyGraph(pruned).nodes().size(), 2u);
}

TEST(KeyGraphTest, DotHasAnEdgePerReadAndWriteAndDimsWhatTheOutputsDoNotNeed) {
  KeyGraph graph(actor_critic().ptr());
  const std::string dot = graph.to_dot();
  EXPECT_THAT(dot, ::testing::StartsWith("digraph keys {\n"));
  EXPECT_THAT(dot, HasSubstr("\"key:critic/value\" [label=\"critic/value\", shape=ellipse];"));
  EXPECT_THAT(dot, HasSubstr("\"key:observation\" -> \"module:0\";"));
  EXPECT_THAT(dot, HasSubstr("\"module:0\" -> \"key:hidden\";"));
  EXPECT_THAT(dot, HasSubstr("\"module:2\" -> \"key:critic/value\";"));
  EXPECT_THAT(dot, Not(HasSubstr("dashed")));
  const std::string pruned = graph.to_dot(std::vector<NestedKey>{"action"});
  EXPECT_THAT(pruned, HasSubstr("\"module:2\" [label=\"heads.1\\nTensorDictModule\", shape=box, style=dashed"));
  EXPECT_THAT(pruned, HasSubstr("\"module:1\" [label=\"heads.0\\nTensorDictModule\", shape=box];"));
}

}  // namespace
}  // namespace tdp::nn
