#include "sdk/policy/keys.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

#include <algorithm>
#include <set>

#include "tdpolicy/spec.pb.h"

namespace tdp::policy {
namespace {

void collect_overwrites(const tdpolicy::Module& module, std::set<NestedKey>& overwritten) {
  for (const std::string& text : module.overwrite_keys()) {
    if (auto key = parse_key(text); key.ok()) overwritten.insert(*std::move(key));
  }
  for (const auto& child : module.sequential().modules()) collect_overwrites(child, overwritten);
  for (const auto& child : module.probabilistic_sequential().modules()) collect_overwrites(child, overwritten);
}

// Every key some module of the tree writes (the `out_keys` fields of every kind, found by
// reflection so that a new kind's are found too), and the is_init keys of its recurrent modules.
void collect_writes(const google::protobuf::Message& message, std::set<NestedKey>& written,
                    std::set<NestedKey>& is_init) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_STRING && field->is_repeated() &&
        field->name() == "out_keys") {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        if (auto key = parse_key(reflection->GetRepeatedString(message, field, i)); key.ok()) written.insert(*key);
      }
    } else if (field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE && !field->is_map()) {
      const int n = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
      for (int i = 0; i < n; ++i) {
        collect_writes(field->is_repeated() ? reflection->GetRepeatedMessage(message, field, i)
                                            : reflection->GetMessage(message, field),
                       written, is_init);
      }
    }
  }
  if (message.GetDescriptor() == tdpolicy::RecurrentModule::descriptor()) {
    const auto& recurrent = static_cast<const tdpolicy::RecurrentModule&>(message);
    if (recurrent.in_keys_size() > 0) {
      if (auto key = parse_key(recurrent.in_keys(recurrent.in_keys_size() - 1)); key.ok()) is_init.insert(*key);
    }
  }
}

}  // namespace

absl::StatusOr<NestedKey> parse_key(const std::string& text) {
  std::vector<std::string> path = absl::StrSplit(text, '/');
  for (const std::string& level : path) {
    if (level.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("key \"", text, "\" is empty or has an empty level (levels are separated by \"/\")"));
    }
  }
  return NestedKey(std::move(path));
}

std::string key_string(const NestedKey& key) { return key.join("/"); }

std::vector<StateKey> recurrent_state(const tdpolicy::PolicySpec& spec) {
  std::set<NestedKey> overwritten, written, is_init;
  collect_overwrites(spec.module(), overwritten);
  collect_writes(spec.module(), written, is_init);
  std::vector<StateKey> state;
  for (const tdpolicy::InputSpec& input : spec.inputs()) {
    auto key = parse_key(input.key());
    if (!key.ok() || std::any_of(state.begin(), state.end(), [&](const StateKey& s) { return s.key == *key; })) {
      continue;
    }
    const NestedKey next = NestedKey("next") + *key;
    if (written.count(next)) {
      state.push_back({*key, next});
    } else if (overwritten.count(*key)) {
      state.push_back({*key, *key});
    }
  }
  return state;
}

std::vector<NestedKey> state_keys(const tdpolicy::PolicySpec& spec) {
  std::vector<NestedKey> keys;
  for (StateKey& state : recurrent_state(spec)) keys.push_back(std::move(state.key));
  return keys;
}

std::vector<NestedKey> optional_inputs(const tdpolicy::PolicySpec& spec) {
  std::set<NestedKey> written, is_init;
  collect_writes(spec.module(), written, is_init);
  std::vector<NestedKey> keys;
  for (const tdpolicy::InputSpec& input : spec.inputs()) {
    auto key = parse_key(input.key());
    if (key.ok() && is_init.count(*key) && std::find(keys.begin(), keys.end(), *key) == keys.end()) {
      keys.push_back(*std::move(key));
    }
  }
  return keys;
}

}  // namespace tdp::policy
