// Builders for the spec kinds that come from sdk/probabilistic and the distribution modules.
#include <absl/strings/str_cat.h>

#include "sdk/nn/normal_param_extractor.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/probabilistic/probabilistic_sequential.h"
#include "sdk/policy/build_internal.h"
#include "sdk/policy/keys.h"

namespace tdp::policy::internal {
namespace {

dist::DistributionKwargs kwargs_of(const google::protobuf::Map<std::string, tdpolicy::Scalar>& scalars) {
  dist::DistributionKwargs kwargs;
  for (const auto& [name, scalar] : scalars) {
    switch (scalar.value_case()) {
      case tdpolicy::Scalar::kDoubleValue:
        kwargs.emplace(name, c10::Scalar(scalar.double_value()));
        break;
      case tdpolicy::Scalar::kIntValue:
        kwargs.emplace(name, c10::Scalar(static_cast<int64_t>(scalar.int_value())));
        break;
      case tdpolicy::Scalar::kBoolValue:
        kwargs.emplace(name, c10::Scalar(scalar.bool_value()));
        break;
      case tdpolicy::Scalar::VALUE_NOT_SET:
        throw std::invalid_argument(absl::StrCat("kwarg \"", name, "\" has no value"));
    }
  }
  return kwargs;
}

}  // namespace

std::shared_ptr<nn::TensorDictModuleBase> build_distribution_network(const tdpolicy::Network& network,
                                                                     const nn::TensorDictModuleOptions& options) {
  if (network.has_normal_param_extractor()) {
    const auto& spec = network.normal_param_extractor();
    nn::NormalParamExtractorOptions extractor;
    if (!spec.scale_mapping().empty()) extractor.scale_mapping(spec.scale_mapping());
    if (spec.has_scale_lb()) extractor.scale_lb(spec.scale_lb());
    return nn::TensorDictModule(nn::NormalParamExtractor(extractor), options).ptr();
  }
  const auto& spec = network.add_state_independent_normal_scale();
  nn::AddStateIndependentNormalScaleOptions scale(
      std::vector<int64_t>(spec.scale_shape().begin(), spec.scale_shape().end()));
  if (!spec.scale_mapping().empty()) scale.scale_mapping(spec.scale_mapping());
  if (spec.has_scale_lb()) scale.scale_lb(spec.scale_lb());
  scale.init_value(spec.init_value());
  return nn::TensorDictModule(nn::AddStateIndependentNormalScale(scale), options).ptr();
}

std::shared_ptr<nn::TensorDictModuleBase> build_probabilistic(const tdpolicy::ProbabilisticModule& spec) {
  std::vector<NestedKey> out_keys = keys_of(spec.out_keys());
  std::optional<nn::ProbabilisticTensorDictModuleOptions> options;
  if (spec.in_keys_map_size() > 0) {
    nn::DistKeyMap map;
    for (const auto& binding : spec.in_keys_map()) map.emplace_back(binding.name(), *parse_key(binding.key()));
    options.emplace(map, out_keys);
  } else {
    options.emplace(keys_of(spec.in_keys()), out_keys);
  }
  if (spec.has_composite()) {
    std::vector<std::pair<NestedKey, dist::DistributionBuilder>> parts;
    dist::CompositeDistributionOptions composite;
    std::vector<std::pair<NestedKey, NestedKey>> name_map;
    std::vector<std::pair<NestedKey, dist::DistributionKwargs>> extra_kwargs;
    for (const auto& part : spec.composite().parts()) {
      NestedKey key = *parse_key(part.key());
      parts.emplace_back(key, dist::DistributionBuilder(part.distribution()));
      if (!part.sample_key().empty()) name_map.emplace_back(key, *parse_key(part.sample_key()));
      if (!part.kwargs().empty()) extra_kwargs.emplace_back(key, kwargs_of(part.kwargs()));
    }
    composite.name_map(name_map).extra_kwargs(extra_kwargs);
    if (!spec.composite().log_prob_key().empty()) composite.log_prob_key(*parse_key(spec.composite().log_prob_key()));
    if (!spec.composite().entropy_key().empty()) composite.entropy_key(*parse_key(spec.composite().entropy_key()));
    options->composite(parts, composite);
  } else {
    options->distribution(dist::DistributionBuilder(spec.distribution().empty() ? "delta" : spec.distribution()));
  }
  options->distribution_kwargs(kwargs_of(spec.distribution_kwargs()));
  if (!spec.default_interaction_type().empty()) {
    options->default_interaction_type(nn::interaction_type_from_str(spec.default_interaction_type()));
  }
  options->return_log_prob(spec.return_log_prob());
  if (!spec.log_prob_key().empty()) options->log_prob_key(*parse_key(spec.log_prob_key()));
  if (spec.log_prob_keys_size() > 0) options->log_prob_keys(keys_of(spec.log_prob_keys()));
  options->num_samples(std::vector<int64_t>(spec.num_samples().begin(), spec.num_samples().end()));
  return nn::ProbabilisticTensorDictModule(*options).ptr();
}

std::shared_ptr<nn::TensorDictModuleBase> build_probabilistic_sequential(
    const tdpolicy::ProbabilisticSequential& spec,
    std::vector<std::pair<std::string, nn::TensorDictModuleRef>> children) {
  std::vector<nn::TensorDictModuleRef> modules;
  for (auto& [name, module] : children) modules.push_back(std::move(module));
  nn::ProbabilisticTensorDictSequentialOptions options;
  if (spec.has_return_composite()) options.return_composite(spec.return_composite());
  options.partial_tolerant(spec.partial_tolerant()).selected_out_keys(keys_of(spec.selected_out_keys()));
  return nn::ProbabilisticTensorDictSequential(modules, options).ptr();
}

}  // namespace tdp::policy::internal
