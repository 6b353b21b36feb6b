// The table: one entry per kind, each defined in its own file in this folder.
#include <absl/strings/str_join.h>

#include "sdk/policy/kinds/kind.h"

namespace tdp::policy::kinds {

extern const ModuleKind kSequential, kProbabilisticSequential, kNetwork, kProbabilistic, kEnsemble, kQValue, kEGreedy,
    kTanh, kLstm, kGru;
extern const NetworkKind kMlp, kLinear, kGruCell, kLstmCell, kTorchScript, kMapping, kNormalParamExtractor,
    kAddStateIndependentNormalScale, kOneHot, kCat, kSequence, kActivation, kConv2d, kFlatten, kLayerNorm, kDueling,
    kMultiAgentMlp, kObservationNorm, kToDtype, kToTensorImage, kAotiPackage, kUnflatten;

const std::vector<const ModuleKind*>& module_kinds() {
  static const std::vector<const ModuleKind*> kinds = {&kSequential, &kProbabilisticSequential, &kNetwork, &kProbabilistic,
                                                       &kEnsemble,   &kQValue,  &kEGreedy, &kTanh, &kLstm, &kGru};
  return kinds;
}

const std::vector<const NetworkKind*>& network_kinds() {
  static const std::vector<const NetworkKind*> kinds = {
      &kMlp,     &kLinear,  &kGruCell, &kLstmCell, &kTorchScript, &kMapping, &kNormalParamExtractor,
      &kAddStateIndependentNormalScale, &kOneHot, &kCat, &kSequence, &kActivation, &kConv2d, &kFlatten,
      &kLayerNorm, &kDueling, &kMultiAgentMlp, &kObservationNorm, &kToDtype, &kToTensorImage, &kAotiPackage,
      &kUnflatten};
  return kinds;
}

namespace {

template <typename Kind, typename Case>
const Kind* find(const std::vector<const Kind*>& kinds, Case kind) {
  for (const Kind* entry : kinds) {
    if (entry->kind == kind) return entry;
  }
  return nullptr;
}

// The field names of a message's `kind` oneof, in order.
std::vector<std::string> oneof_names(const google::protobuf::Descriptor* message) {
  const google::protobuf::OneofDescriptor* oneof = message->FindOneofByName("kind");
  std::vector<std::string> names;
  for (int i = 0; i < oneof->field_count(); ++i) names.push_back(oneof->field(i)->name());
  return names;
}

// The case of a oneof is its field's number.
std::string field_name(const google::protobuf::Descriptor* message, int number) {
  const google::protobuf::FieldDescriptor* field = message->FindFieldByNumber(number);
  return field == nullptr ? std::to_string(number) : field->name();
}

}  // namespace

const ModuleKind* module_kind(tdpolicy::Module::KindCase kind) { return find(module_kinds(), kind); }
const NetworkKind* network_kind(tdpolicy::Network::KindCase kind) { return find(network_kinds(), kind); }

std::string module_kind_names() { return absl::StrJoin(oneof_names(tdpolicy::Module::descriptor()), ", "); }
std::string network_kind_names() { return absl::StrJoin(oneof_names(tdpolicy::Network::descriptor()), ", "); }
std::string kind_name(tdpolicy::Module::KindCase kind) { return field_name(tdpolicy::Module::descriptor(), kind); }
std::string kind_name(tdpolicy::Network::KindCase kind) { return field_name(tdpolicy::Network::descriptor(), kind); }

std::vector<NestedKey> keys_of(const google::protobuf::RepeatedPtrField<std::string>& texts) {
  std::vector<NestedKey> keys;
  for (const std::string& text : texts) keys.push_back(text == "_" ? NestedKey("_") : *parse_key(text));
  return keys;
}

void add_keys(const std::vector<NestedKey>& keys, google::protobuf::RepeatedPtrField<std::string>* out) {
  for (const NestedKey& key : keys) *out->Add() = key_string(key);
}

}  // namespace tdp::policy::kinds
