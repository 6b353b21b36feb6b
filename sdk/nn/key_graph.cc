#include "sdk/nn/key_graph.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_replace.h>

#include <functional>
#include <set>

#include "sdk/nn/tensordict_sequential.h"

namespace tdp::nn {
namespace {

std::string keys_text(const std::vector<NestedKey>& keys) {
  return keys.empty() ? "(nothing)"
                      : absl::StrJoin(keys, ", ", [](std::string* out, const NestedKey& key) {
                          out->append(absl::StrJoin(key.path(), "/"));
                        });
}

// A DOT string: quoted, with quotes and backslashes escaped and newlines as DOT's \n.
std::string quoted(const std::string& text) {
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}), "\"");
}

// Every leaf (non-sequence) module below `module`, depth first, in execution order.
void walk(const std::shared_ptr<TensorDictModuleBase>& module, const std::string& path,
          const std::function<void(const std::shared_ptr<TensorDictModuleBase>&, const std::string&)>& leaf) {
  if (auto sequence = std::dynamic_pointer_cast<TensorDictSequentialImpl>(module)) {
    for (size_t i = 0; i < sequence->size(); ++i) {
      const std::string name = sequence->is_named() ? sequence->names()[i] : std::to_string(i);
      walk(sequence->modules()[i], path.empty() ? name : absl::StrCat(path, ".", name), leaf);
    }
    return;
  }
  leaf(module, path);
}

}  // namespace

KeyGraph::KeyGraph(std::shared_ptr<TensorDictModuleBase> root) : root_(std::move(root)) {
  if (root_ == nullptr) throw std::invalid_argument("KeyGraph: the module is null");
  walk(root_, "", [&](const std::shared_ptr<TensorDictModuleBase>& module, const std::string& path) {
    nodes_.push_back({path, module->type_name(), module, module->in_keys(), module->out_keys()});
  });
}

std::vector<const KeyGraphNode*> KeyGraph::needed_for(const std::vector<NestedKey>& out_keys) const {
  std::set<const TensorDictModuleBase*> kept;
  if (auto sequence = std::dynamic_pointer_cast<TensorDictSequentialImpl>(root_)) {
    std::shared_ptr<TensorDictSequentialImpl> selected;
    try {
      selected = sequence->select_subsequence(std::nullopt, out_keys);
    } catch (const std::invalid_argument&) {
      return {};  // nothing writes them
    }
    walk(selected, "", [&](const std::shared_ptr<TensorDictModuleBase>& module, const std::string&) {
      kept.insert(module.get());
    });
  } else {
    for (const NestedKey& key : root_->out_keys()) {
      for (const NestedKey& wanted : out_keys) {
        if (key == wanted) kept.insert(root_.get());
      }
    }
  }
  std::vector<const KeyGraphNode*> needed;
  for (const KeyGraphNode& node : nodes_) {
    if (kept.count(node.module.get())) needed.push_back(&node);
  }
  return needed;
}

std::string KeyGraph::to_text() const {
  std::string text;
  for (const KeyGraphNode& node : nodes_) {
    absl::StrAppend(&text, node.path.empty() ? "(root)" : node.path, " (", node.type, "): ", keys_text(node.reads),
                    " -> ", keys_text(node.writes), "\n");
  }
  return text;
}

std::string KeyGraph::to_dot(const std::optional<std::vector<NestedKey>>& out_keys) const {
  std::set<const KeyGraphNode*> needed;
  if (out_keys) {
    for (const KeyGraphNode* node : needed_for(*out_keys)) needed.insert(node);
  }
  std::string dot = "digraph keys {\n  rankdir=LR;\n";
  std::set<std::string> keys;
  for (const KeyGraphNode& node : nodes_) {
    for (const auto* list : {&node.reads, &node.writes}) {
      for (const NestedKey& key : *list) keys.insert(absl::StrJoin(key.path(), "/"));
    }
  }
  for (const std::string& key : keys) {
    absl::StrAppend(&dot, "  ", quoted("key:" + key), " [label=", quoted(key), ", shape=ellipse];\n");
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const KeyGraphNode& node = nodes_[i];
    const std::string id = quoted(absl::StrCat("module:", i));
    const bool dimmed = out_keys && !needed.count(&node);
    absl::StrAppend(&dot, "  ", id, " [label=", quoted(absl::StrCat(node.path.empty() ? "root" : node.path, "\n",
                                                                     node.type)),
                    ", shape=box", dimmed ? ", style=dashed, color=gray, fontcolor=gray" : "", "];\n");
    for (const NestedKey& key : node.reads) {
      absl::StrAppend(&dot, "  ", quoted("key:" + absl::StrJoin(key.path(), "/")), " -> ", id, ";\n");
    }
    for (const NestedKey& key : node.writes) {
      absl::StrAppend(&dot, "  ", id, " -> ", quoted("key:" + absl::StrJoin(key.path(), "/")), ";\n");
    }
  }
  return dot + "}\n";
}

}  // namespace tdp::nn
