#include "sdk/nn/tensordict_module_base.h"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "sdk/nn/skip_existing.h"

namespace tdp::nn {
namespace {

bool contains(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// Whether `key` is one of `keys` or lies under one of them.
bool covered(const NestedKey& key, const std::vector<NestedKey>& a, const std::vector<NestedKey>& b) {
  for (const auto* keys : {&a, &b}) {
    for (const NestedKey& kept : *keys) {
      if (key.starts_with(kept)) return true;
    }
  }
  return false;
}

// tensordict's `td.select(*in_keys, *out_keys, inplace=True)`, non-strict: removes, in place,
// every entry that is neither one of the keys nor under one, then the nested TensorDicts that
// emptied (a nested TensorDict on the way to a kept key stays, holding only what is kept).
void keep_only(TensorDict& td, const std::vector<NestedKey>& in_keys, const std::vector<NestedKey>& out_keys) {
  std::vector<NestedKey> emptied;
  for (const NestedKey& key : td.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    if (covered(key, in_keys, out_keys)) continue;
    td.erase(key);
    for (NestedKey parent = key.parent(); !parent.empty(); parent = parent.parent()) emptied.push_back(parent);
  }
  // Deepest first, so that a parent is looked at after its children are gone.
  std::sort(emptied.begin(), emptied.end(), [](const NestedKey& x, const NestedKey& y) { return x.size() > y.size(); });
  for (const NestedKey& key : emptied) {
    if (!covered(key, in_keys, out_keys) && td.contains(key) && td.get_tensordict(key).keys().empty()) {
      td.erase(key);
    }
  }
}

}  // namespace

std::string to_string(Inplace inplace) {
  switch (inplace) {
    case Inplace::kTrue:
      return "True";
    case Inplace::kFalse:
      return "False";
    case Inplace::kEmpty:
      return "'empty'";
  }
  return "?";
}

std::string indent_repr(const std::string& text, int spaces) {
  const std::string pad(static_cast<size_t>(spaces), ' ');
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out += pad;
  }
  return out;
}

TensorDictModuleBase::TensorDictModuleBase(std::string name, std::vector<NestedKey> in_keys,
                                           std::vector<NestedKey> out_keys)
    : torch::nn::Module(name), type_name_(std::move(name)), in_keys_(std::move(in_keys)) {
  set_out_keys(std::move(out_keys));
}

void TensorDictModuleBase::set_in_keys(std::vector<NestedKey> keys) { in_keys_ = std::move(keys); }

void TensorDictModuleBase::set_out_keys(std::vector<NestedKey> keys) {
  out_keys_source_ = keys;
  out_keys_ = std::move(keys);
  dropped_out_keys_.clear();
  selected_ = false;
}

void TensorDictModuleBase::set_apparent_out_keys(std::vector<NestedKey> keys) {
  out_keys_ = std::move(keys);
}

TensorDict TensorDictModuleBase::forward(const TensorDict& tensordict,
                                         const std::optional<TensorDict>& tensordict_out) {
  if (handles_forward_itself_) return forward_impl(tensordict, tensordict_out);
  if (skips(tensordict)) return tensordict;
  if (!selected_) return forward_impl(tensordict, tensordict_out);
  const std::vector<bool> given = dropped_keys_given(tensordict);
  return apply_selection(forward_impl(tensordict, tensordict_out), tensordict, given);
}

bool TensorDictModuleBase::skips(const TensorDict& tensordict) const {
  return honors_skip_existing_ && skip_existing_enabled() && should_skip(tensordict);
}

std::vector<bool> TensorDictModuleBase::dropped_keys_given(const TensorDict& tensordict) const {
  if (!selected_ || selection_rule_ == OutKeysSelection::kReference) return {};
  std::vector<bool> given(dropped_out_keys_.size());
  for (size_t i = 0; i < dropped_out_keys_.size(); ++i) given[i] = tensordict.contains(dropped_out_keys_[i]);
  return given;
}

bool TensorDictModuleBase::should_skip(const TensorDict& tensordict) const {
  if (!skip_existing().allows(in_keys_, out_keys_)) return false;
  for (const NestedKey& key : out_keys_) {
    if (!tensordict.contains(key)) return false;
  }
  return true;
}

TensorDict TensorDictModuleBase::apply_selection(TensorDict result, const TensorDict& input,
                                                 const std::vector<bool>& given) const {
  if (!selected_) return result;
  if (selection_rule_ == OutKeysSelection::kReference) {
    keep_only(result, in_keys_, out_keys_);
    return result;
  }
  // A dropped key that the caller passed in is the caller's data: it stays (updated).
  const bool same = result.is_same(input);
  for (size_t i = 0; i < dropped_out_keys_.size(); ++i) {
    if (same && given[i]) continue;
    if (result.contains(dropped_out_keys_[i])) result.erase(dropped_out_keys_[i]);
  }
  return result;
}

TensorDictModuleBase& TensorDictModuleBase::select_out_keys(const std::vector<NestedKey>& keys,
                                                            OutKeysSelection rule) {
  for (const NestedKey& key : keys) {
    if (!contains(out_keys_, key)) {
      throw std::invalid_argument("Can't select non existent key: " + key.to_string() + ". " +
                                  describe() + " has out_keys " + keys_to_string(out_keys_) +
                                  ".");
    }
  }
  out_keys_ = keys;
  dropped_out_keys_.clear();
  for (const NestedKey& key : out_keys_source_) {
    if (!contains(out_keys_, key)) dropped_out_keys_.push_back(key);
  }
  selected_ = true;
  selection_rule_ = rule;
  return *this;
}

TensorDictModuleBase& TensorDictModuleBase::reset_out_keys() {
  out_keys_ = out_keys_source_;
  dropped_out_keys_.clear();
  selected_ = false;
  selection_rule_ = OutKeysSelection::kReference;
  return *this;
}

std::vector<std::string> TensorDictModuleBase::children_repr_fields() const {
  std::vector<std::string> fields;
  for (const auto& child : named_children()) {
    std::string text;
    if (const auto* td_module = dynamic_cast<const TensorDictModuleBase*>(child.value().get())) {
      text = td_module->to_string();
    } else {
      std::ostringstream stream;
      stream << *child.value();
      text = stream.str();
    }
    fields.push_back(child.key() + "=" + text);
  }
  return fields;
}

std::string TensorDictModuleBase::to_string() const {
  std::vector<std::string> fields = children_repr_fields();
  for (std::string& field : repr_fields()) fields.push_back(std::move(field));
  fields.push_back("in_keys=" + keys_to_string(in_keys_));
  fields.push_back("out_keys=" + keys_to_string(out_keys_));
  std::string body;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) body += ",\n";
    body += "    " + indent_repr(fields[i], 4);
  }
  return type_name_ + "(\n" + body + ")";
}

void TensorDictModuleBase::pretty_print(std::ostream& stream) const {
  stream << type_name_ << "(in_keys=" << keys_to_string(in_keys_)
         << ", out_keys=" << keys_to_string(out_keys_) << ")";
}

std::string TensorDictModuleBase::describe() const {
  return type_name_ + "(in_keys=" + keys_to_string(in_keys_) +
         ", out_keys=" + keys_to_string(out_keys_) + ")";
}

}  // namespace tdp::nn
