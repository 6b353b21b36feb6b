// KeyGraph: which module of a tree reads and writes which TensorDict key, read off the modules'
// declared in_keys and out_keys without running anything: the C++ answer to tensordict's FX
// tracing of a TensorDictSequential. Prints as text and as Graphviz DOT (`tdp describe --dot`),
// and tells which modules a set of out_keys needs; TensorDictSequential::select_subsequence
// builds the pruned module itself (needed_for() marks exactly the modules it keeps).
//
//   tdp::nn::KeyGraph graph(policy);                       // any tensordict module
//   std::cout << graph.to_text();                          // "0 (TensorDictModule): observation -> hidden"
//   std::cout << graph.to_dot({{"action"}});               // modules "action" does not need are dashed
//   auto pruned = policy_sequence->select_subsequence(std::nullopt, {{"action"}});
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/tensordict/nested_key.h"

namespace tdp::nn {

// A module of the tree that is not a sequence (sequences are walked into).
struct KeyGraphNode {
  std::string path;  // child names from the root, joined by "." ("1.0"); "" for a root leaf
  std::string type;  // the module's type_name()
  std::shared_ptr<TensorDictModuleBase> module;
  std::vector<NestedKey> reads;   // in_keys
  std::vector<NestedKey> writes;  // out_keys
};

class KeyGraph {
 public:
  explicit KeyGraph(std::shared_ptr<TensorDictModuleBase> root);

  // In execution order.
  const std::vector<KeyGraphNode>& nodes() const { return nodes_; }
  // The nodes that computing `out_keys` needs: those select_subsequence keeps (for a root that is
  // not a sequence, the root when it writes one of them).
  std::vector<const KeyGraphNode*> needed_for(const std::vector<NestedKey>& out_keys) const;
  // One line per node: "path (Type): read, keys -> written, keys".
  std::string to_text() const;
  // A Graphviz digraph: keys as ellipses, modules as boxes, an edge per read and per write. With
  // out_keys, the modules they do not need are dashed and grey.
  std::string to_dot(const std::optional<std::vector<NestedKey>>& out_keys = std::nullopt) const;

 private:
  std::shared_ptr<TensorDictModuleBase> root_;
  std::vector<KeyGraphNode> nodes_;
};

}  // namespace tdp::nn
