// export_spec / save_policy: module tree -> spec + parameters.
#include <absl/strings/str_cat.h>
#include <torch/nn/modules/linear.h>

#include <fstream>
#include <set>

#include "sdk/nn/ensemble_module.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/probabilistic/probabilistic_sequential.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy {
namespace {

class Unexportable : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

template <typename Repeated>
void add_keys(const std::vector<NestedKey>& keys, Repeated* out) {
  for (const NestedKey& key : keys) *out->Add() = key_string(key);
}

tdpolicy::Scalar scalar_of(const c10::Scalar& value) {
  tdpolicy::Scalar scalar;
  if (value.isBoolean()) {
    scalar.set_bool_value(value.toBool());
  } else if (value.isIntegral(/*includeBool=*/false)) {
    scalar.set_int_value(value.toLong());
  } else {
    scalar.set_double_value(value.toDouble());
  }
  return scalar;
}

void add_kwargs(const dist::DistributionKwargs& kwargs, google::protobuf::Map<std::string, tdpolicy::Scalar>* out) {
  for (const auto& [name, value] : kwargs) (*out)[name] = scalar_of(value);
}

std::string registry_name(const dist::DistributionBuilder& builder, const std::string& where) {
  std::string name = builder.to_string();
  if (name.empty() || name.front() == '<') {
    throw Unexportable(absl::StrCat(where, ": its distribution is a C++ factory; a spec can only name "
                                           "registry distributions (register it by name first)"));
  }
  return name;
}

void export_network(const nn::TensorDictModuleImpl& module, tdpolicy::NetworkModule* out, const std::string& where) {
  add_keys(module.in_keys(), out->mutable_in_keys());
  add_keys(module.out_keys_source(), out->mutable_out_keys());
  const auto& inner = module.module();
  auto* net = out->mutable_network();
  if (auto* mlp = dynamic_cast<const nn::MlpImpl*>(inner.get())) {
    const auto& o = mlp->options();
    auto* m = net->mutable_mlp();
    m->set_in_features(o.in_features());
    for (int64_t size : o.hidden_sizes()) m->add_hidden_sizes(size);
    m->set_out_features(o.out_features());
    m->set_activation(o.activation());
    m->set_layer_norm(o.layer_norm());
    m->set_activate_last_layer(o.activate_last_layer());
  } else if (auto* linear = dynamic_cast<const torch::nn::LinearImpl*>(inner.get())) {
    auto* l = net->mutable_linear();
    l->set_in_features(linear->options.in_features());
    l->set_out_features(linear->options.out_features());
    l->set_no_bias(!linear->options.bias());
  } else if (auto* gru = dynamic_cast<const nn::GruCellImpl*>(inner.get())) {
    net->mutable_gru_cell()->set_input_size(gru->options().input_size());
    net->mutable_gru_cell()->set_hidden_size(gru->options().hidden_size());
  } else if (auto* lstm = dynamic_cast<const nn::LstmCellImpl*>(inner.get())) {
    net->mutable_lstm_cell()->set_input_size(lstm->options().input_size());
    net->mutable_lstm_cell()->set_hidden_size(lstm->options().hidden_size());
  } else if (auto* mapping = dynamic_cast<const nn::MappingModuleImpl*>(inner.get())) {
    net->mutable_mapping()->set_name(mapping->name());
  } else if (auto* extractor = dynamic_cast<const nn::NormalParamExtractorImpl*>(inner.get())) {
    auto* e = net->mutable_normal_param_extractor();
    e->set_scale_mapping(extractor->options().scale_mapping());
    e->set_scale_lb(extractor->options().scale_lb());
  } else if (auto* scale = dynamic_cast<const nn::AddStateIndependentNormalScaleImpl*>(inner.get())) {
    const auto& o = scale->options();
    auto* s = net->mutable_add_state_independent_normal_scale();
    for (int64_t size : o.scale_shape()) s->add_scale_shape(size);
    s->set_scale_mapping(o.scale_mapping());
    s->set_scale_lb(o.scale_lb());
    s->set_init_value(o.init_value());
  } else if (auto* one_hot = dynamic_cast<const nn::OneHotImpl*>(inner.get())) {
    net->mutable_one_hot()->set_num_classes(one_hot->num_classes());
  } else if (dynamic_cast<const nn::CatImpl*>(inner.get()) != nullptr) {
    net->mutable_cat();
  } else {
    throw Unexportable(absl::StrCat(where, ": a TensorDictModule around ", inner ? inner->name() : "a function",
                                    " cannot be written to a spec (supported: Mlp, Linear, GruCell, LstmCell, "
                                    "MappingModule, NormalParamExtractor, AddStateIndependentNormalScale, OneHot, "
                                    "Cat)"));
  }
}

void export_probabilistic(const nn::ProbabilisticTensorDictModuleImpl& module, tdpolicy::ProbabilisticModule* out,
                          const std::string& where) {
  const auto& o = module.options();
  const bool leaf_names = [&] {
    for (size_t i = 0; i < o.in_keys().size(); ++i) {
      if (o.dist_keys()[i] != o.in_keys()[i].leaf()) return false;
    }
    return true;
  }();
  if (leaf_names) {
    add_keys(o.in_keys(), out->mutable_in_keys());
  } else {
    for (size_t i = 0; i < o.in_keys().size(); ++i) {
      auto* binding = out->add_in_keys_map();
      binding->set_name(o.dist_keys()[i]);
      binding->set_key(key_string(o.in_keys()[i]));
    }
  }
  add_keys(module.dist_sample_keys(), out->mutable_out_keys());
  if (o.is_composite()) {
    const auto& options = o.composite_options();
    auto* composite = out->mutable_composite();
    for (const auto& [key, builder] : *o.composite_map()) {
      auto* part = composite->add_parts();
      part->set_key(key_string(key));
      part->set_distribution(registry_name(builder, where));
      for (const auto& [from, to] : options.name_map()) {
        if (from == key) part->set_sample_key(key_string(to));
      }
      for (const auto& [from, kwargs] : options.extra_kwargs()) {
        if (from == key) add_kwargs(kwargs, part->mutable_kwargs());
      }
    }
    if (options.log_prob_key()) composite->set_log_prob_key(key_string(*options.log_prob_key()));
    if (options.entropy_key()) composite->set_entropy_key(key_string(*options.entropy_key()));
  } else {
    out->set_distribution(registry_name(o.distribution(), where));
  }
  add_kwargs(o.distribution_kwargs(), out->mutable_distribution_kwargs());
  out->set_default_interaction_type(std::string(nn::to_string(o.default_interaction_type())));
  out->set_return_log_prob(o.return_log_prob());
  if (o.log_prob_key()) out->set_log_prob_key(key_string(*o.log_prob_key()));
  if (o.log_prob_keys()) add_keys(*o.log_prob_keys(), out->mutable_log_prob_keys());
  for (int64_t n : o.num_samples()) out->add_num_samples(n);
}

// A C++ module tree carries no overwrite intent, but one that runs means it: a leaf writing a key
// that a declared input or an earlier module provides (a recurrent state) gets overwrite_keys,
// so that the exported spec validates.
void mark_overwrites(const std::vector<NestedKey>& keys, std::set<NestedKey>& written, tdpolicy::Module* out) {
  for (const NestedKey& key : keys) {
    if (key == NestedKey("_")) continue;
    if (!written.insert(key).second) *out->add_overwrite_keys() = key_string(key);
  }
}

void export_module(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string& where,
                   std::set<NestedKey>& written) {
  if (auto* seq = dynamic_cast<const nn::ProbabilisticTensorDictSequentialImpl*>(&module)) {
    auto* spec = out->mutable_probabilistic_sequential();
    if (seq->prob_options().return_composite()) spec->set_return_composite(*seq->prob_options().return_composite());
    spec->set_partial_tolerant(seq->options().partial_tolerant());
    add_keys(seq->options().selected_out_keys(), spec->mutable_selected_out_keys());
    for (size_t i = 0; i < seq->modules().size(); ++i) {
      export_module(*seq->modules()[i], spec->add_modules(), absl::StrCat(where, ".probabilistic_sequential.modules[", i, "]"),
                    written);
    }
  } else if (auto* seq = dynamic_cast<const nn::TensorDictSequentialImpl*>(&module)) {
    auto* spec = out->mutable_sequential();
    spec->set_partial_tolerant(seq->options().partial_tolerant());
    add_keys(seq->options().selected_out_keys(), spec->mutable_selected_out_keys());
    for (size_t i = 0; i < seq->modules().size(); ++i) {
      auto* child = spec->add_modules();
      if (seq->is_named()) child->set_name(seq->names()[i]);
      export_module(*seq->modules()[i], child, absl::StrCat(where, ".sequential.modules[", i, "]"), written);
    }
  } else if (auto* ensemble = dynamic_cast<const nn::EnsembleModuleImpl*>(&module)) {
    auto* spec = out->mutable_ensemble();
    spec->set_num_copies(ensemble->options().num_copies());
    spec->set_expand_input(ensemble->options().expand_input());
    export_module(*ensemble->module(), spec->mutable_module(), where + ".ensemble.module", written);
  } else if (auto* td_module = dynamic_cast<const nn::TensorDictModuleImpl*>(&module)) {
    export_network(*td_module, out->mutable_network(), where);
    mark_overwrites(td_module->out_keys_source(), written, out);
  } else if (auto* probabilistic = dynamic_cast<const nn::ProbabilisticTensorDictModuleImpl*>(&module)) {
    export_probabilistic(*probabilistic, out->mutable_probabilistic(), where);
    mark_overwrites(probabilistic->out_keys_source(), written, out);
  } else {
    throw Unexportable(absl::StrCat(where, ": a ", module.type_name(), " cannot be written to a spec"));
  }
}

}  // namespace

absl::StatusOr<tdpolicy::PolicySpec> export_spec(const nn::TensorDictModuleBase& module,
                                                const tdpolicy::PolicySpec& header) {
  tdpolicy::PolicySpec spec = header;
  spec.clear_module();
  spec.clear_parameters();
  spec.clear_parameters_file();
  spec.clear_init_seed();
  try {
    std::set<NestedKey> written;
    for (const auto& input : spec.inputs()) {
      auto key = parse_key(input.key());
      if (key.ok()) written.insert(*key);
    }
    export_module(module, spec.mutable_module(), "module", written);
    auto* parameters = spec.mutable_parameters();
    for (const auto& item : module.named_parameters()) {
      auto* named = parameters->add_tensors();
      named->set_name(item.key());
      *named->mutable_tensor() = to_tensor_proto(item.value());
    }
    for (const auto& item : module.named_buffers()) {
      auto* named = parameters->add_tensors();
      named->set_name(item.key());
      *named->mutable_tensor() = to_tensor_proto(item.value());
    }
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("export_spec: ", error.what()));
  }
  // What was exported must load back: check it as the loader would.
  if (auto status = validate_spec(spec, "export_spec"); !status.ok()) return status;
  return spec;
}

absl::Status save_policy(const Policy& policy, const std::string& path, const SaveOptions& options) {
  auto spec = export_spec(*policy.module, policy.spec);
  if (!spec.ok()) return spec.status();
  if (!options.embed_parameters) {
    const std::string parameters_path = path + ".params.pb";
    std::string bytes;
    spec->parameters().SerializeToString(&bytes);
    std::ofstream out(parameters_path, std::ios::binary | std::ios::trunc);
    if (!out || !(out << bytes)) {
      return absl::PermissionDeniedError(absl::StrCat(parameters_path, ": cannot write the parameters file"));
    }
    const size_t slash = parameters_path.find_last_of('/');
    spec->set_parameters_file(slash == std::string::npos ? parameters_path : parameters_path.substr(slash + 1));
    spec->clear_parameters();
  }
  return write_spec(*spec, path);
}

}  // namespace tdp::policy
