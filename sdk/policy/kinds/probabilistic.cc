// probabilistic: a distribution built from parameters read at in_keys (a registry distribution
// or a composite of parts), writing a sample and optionally its log-prob
// (tdp::nn::ProbabilisticTensorDictModule).
#include <ATen/Functions.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <map>
#include <set>
#include <stdexcept>

#include "sdk/distributions/registry.h"
#include "sdk/policy/kinds/action_spec.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy::kinds {
namespace {

// ---- validation ---------------------------------------------------------------------------

bool distribution_known(const std::string& name, const std::string& path, ValidationContext& context) {
  if (dist::DistributionRegistry::global().contains(name)) return true;
  return context.fail(path, absl::StrCat("unknown distribution \"", name, "\""),
                      absl::StrCat("one of ", absl::StrJoin(dist::DistributionRegistry::global().names(), ", ")));
}

// Distribution kwargs: known to the distribution (its kwargs, validate_args and, for a
// module's own distribution_kwargs, its parameter names, which become constant tensors),
// with a value, finite, and low < high / a < b where both are given.
// A tensor value (TanhNormal's per-dimension low / high) must name a parameter of the
// distribution (the registry passes tensor kwargs as parameters), be a finite floating-point
// constant within the limits, and broadcast onto the first parameter's per-environment shape.
bool kwargs_known(const google::protobuf::Map<std::string, tdpolicy::Scalar>& kwargs, const std::string& distribution,
                  bool params_allowed, const Shape& param_shape, const std::string& path,
                  ValidationContext& context) {
  if (kwargs.empty() || !dist::DistributionRegistry::global().contains(distribution)) return true;
  const dist::DistributionSignature signature = dist::DistributionRegistry::global().signature(distribution);
  std::set<std::string> accepted(signature.kwargs.begin(), signature.kwargs.end());
  accepted.insert("validate_args");
  if (params_allowed) {
    for (const auto& names : signature.param_sets) accepted.insert(names.begin(), names.end());
  }
  std::set<std::string> tensor_params;
  for (const auto& names : signature.param_sets) tensor_params.insert(names.begin(), names.end());
  std::map<std::string, double> numbers;
  std::map<std::string, at::Tensor> tensors;
  std::set<std::string> names;  // sorted: the first error does not depend on the map's order
  for (const auto& [name, value] : kwargs) names.insert(name);
  for (const std::string& name : names) {
    const tdpolicy::Scalar& value = kwargs.at(name);
    const std::string field = absl::StrCat(path, "[\"", name, "\"]");
    if (!accepted.count(name)) {
      return context.fail(field, absl::StrCat("distribution \"", distribution, "\" takes no kwarg \"", name, "\""),
                          absl::StrCat("it takes ", absl::StrJoin(accepted, ", ")));
    }
    switch (value.value_case()) {
      case tdpolicy::Scalar::kDoubleValue:
        if (!context.finite(value.double_value(), field)) return false;
        numbers[name] = value.double_value();
        break;
      case tdpolicy::Scalar::kIntValue:
        numbers[name] = static_cast<double>(value.int_value());
        break;
      case tdpolicy::Scalar::kBoolValue:
        break;
      case tdpolicy::Scalar::kTensorValue: {
        if (!params_allowed) {
          return context.fail(field, "a composite part's kwargs are numbers",
                              "give tensor bounds to a probabilistic module of its own");
        }
        if (!tensor_params.count(name)) {
          return context.fail(field, absl::StrCat("distribution \"", distribution, "\" takes kwarg \"", name,
                                                  "\" as a number only"),
                              absl::StrCat("its tensor parameters are ", signature.params_to_string()));
        }
        auto tensor = constant_tensor(value.tensor_value(), field + ".tensor_value",
                                      absl::StrCat("kwarg \"", name, "\""), context);
        if (!tensor) return false;
        if (!broadcasts_onto(*tensor, param_shape, field + ".tensor_value", absl::StrCat("kwarg \"", name, "\""),
                             context)) {
          return false;
        }
        tensors[name] = *tensor;
        break;
      }
      case tdpolicy::Scalar::VALUE_NOT_SET:
        return context.fail(field, "the kwarg has no value", "set double_value, int_value, bool_value or tensor_value");
    }
  }
  for (const auto& bounds : {std::pair<std::string, std::string>{"low", "high"}, {"a", "b"}}) {
    const std::string& low = bounds.first;
    const std::string& high = bounds.second;
    if (numbers.count(low) && numbers.count(high) && !(numbers[low] < numbers[high])) {
      return context.fail(absl::StrCat(path, "[\"", low, "\"]"),
                          absl::StrCat(low, " (", numbers[low], ") must be less than ", high, " (", numbers[high], ")"));
    }
    if (tensors.count(low) || tensors.count(high)) {
      // An absent bound is the distribution's default, -1 / 1.
      auto as_tensor = [&](const std::string& name, double fallback) {
        if (tensors.count(name)) return tensors[name];
        return at::scalar_tensor(numbers.count(name) ? numbers[name] : fallback, at::kDouble);
      };
      if (!ordered(as_tensor(low, -1.0), as_tensor(high, 1.0), /*strict=*/true, absl::StrCat(path, "[\"", low, "\"]"),
                   context)) {
        return false;
      }
    }
  }
  return true;
}

// The sample shape a registry distribution gives from its first parameter's shape.
Shape sample_shape(const std::string& distribution, const Shape& param) {
  if (!param) return std::nullopt;
  if (distribution == "categorical" || distribution == "masked_categorical") {
    if (param->empty()) return std::nullopt;
    return std::vector<int64_t>(param->begin(), param->end() - 1);
  }
  return param;
}

// A distribution is built from its parameters with the earlier modules' draws in front, and
// copies them (a categorical normalizes its logits into a new tensor): each parameter, every
// leaf of a composite's sub-TensorDict included, is bounded like a written tensor (found by the
// fuzzer: 65536 draws in front of logits of per-env shape [3, 255] made the next categorical's
// log-sum-exp a 401 MB tensor).
bool parameters_fit(const std::string& text, const std::string& path, ValidationContext& context) {
  auto key = context.key_at(text, path);
  if (!key) return false;
  for (const auto& [written, shape] : context.written_at_or_under(*key)) {
    if (!context.fits_one_tensor(*shape, path,
                                 absl::StrCat("the distribution's parameter \"", key_string(*written), "\""))) {
      return false;
    }
  }
  return true;
}

// MEAN of a distribution without a closed-form mean (tanh_normal) is estimated from
// n_empirical_estimate draws of its sample (a spec cannot change the default), taken in double:
// bounded like num_samples draws (found by the text fuzzer: the MEAN of a tanh_normal part over
// 32,768 dims made [1000, 2, 32768] doubles, 524 MB).
bool mean_estimate_fits(const Shape& per_env, const std::string& path, const std::string& what,
                        ValidationContext& context) {
  return context.fits_one_tensor(per_env, path, absl::StrCat(what, " (MEAN is estimated by sampling)"),
                                 nn::kDefaultNEmpiricalEstimate, "n_empirical_estimate");
}

bool validate(const tdpolicy::Module& module, const std::string& module_path, const std::set<NestedKey>& overwrites,
              ValidationContext& context) {
  const tdpolicy::ProbabilisticModule& spec = module.probabilistic();
  const std::string path = module_path + ".probabilistic";
  // Key fields the loader parses whether or not they are used (return_log_prob may be off).
  std::vector<std::pair<std::string, std::string>> named_keys;  // field path -> key
  for (int i = 0; i < spec.log_prob_keys_size(); ++i) {
    named_keys.emplace_back(absl::StrCat(path, ".log_prob_keys[", i, "]"), spec.log_prob_keys(i));
  }
  if (!spec.log_prob_key().empty()) named_keys.emplace_back(path + ".log_prob_key", spec.log_prob_key());
  if (!spec.composite().log_prob_key().empty()) {
    named_keys.emplace_back(path + ".composite.log_prob_key", spec.composite().log_prob_key());
  }
  if (!spec.composite().entropy_key().empty()) {
    named_keys.emplace_back(path + ".composite.entropy_key", spec.composite().entropy_key());
  }
  for (int i = 0; i < spec.composite().parts_size(); ++i) {
    if (!spec.composite().parts(i).sample_key().empty()) {
      named_keys.emplace_back(absl::StrCat(path, ".composite.parts[", i, "].sample_key"),
                              spec.composite().parts(i).sample_key());
    }
  }
  for (const auto& [field, key] : named_keys) {
    if (!context.key_at(key, field)) return false;
  }
  std::vector<Shape> params;
  if (spec.in_keys_size() > 0 && spec.in_keys_map_size() > 0) {
    return context.fail(path + ".in_keys_map", "both in_keys and in_keys_map are set", "use one of the two");
  }
  for (int i = 0; i < spec.in_keys_size(); ++i) {
    auto shape = context.read(spec.in_keys(i), absl::StrCat(path, ".in_keys[", i, "]"));
    if (!shape) return false;
    params.push_back(*shape);
  }
  std::set<std::string> names;
  for (int i = 0; i < spec.in_keys_map_size(); ++i) {
    const auto& binding = spec.in_keys_map(i);
    const std::string field = absl::StrCat(path, ".in_keys_map[\"", binding.name(), "\"]");
    if (binding.name().empty() || !names.insert(binding.name()).second) {
      return context.fail(field, "a parameter name is empty or bound twice");
    }
    auto shape = context.read(binding.key(), field);
    if (!shape) return false;
    params.push_back(*shape);
  }
  for (int i = 0; i < spec.in_keys_size(); ++i) {
    if (!parameters_fit(spec.in_keys(i), absl::StrCat(path, ".in_keys[", i, "]"), context)) return false;
  }
  for (int i = 0; i < spec.in_keys_map_size(); ++i) {
    const auto& binding = spec.in_keys_map(i);
    if (!parameters_fit(binding.key(), absl::StrCat(path, ".in_keys_map[\"", binding.name(), "\"]"), context)) {
      return false;
    }
  }
  if (params.empty()) return context.fail(path + ".in_keys", "a probabilistic module reads at least one key");
  std::vector<std::pair<std::string, Shape>> samples;  // out key -> shape
  if (spec.has_composite()) {
    if (!spec.distribution().empty()) {
      return context.fail(path + ".distribution", "both distribution and composite are set", "use one of the two");
    }
    if (spec.composite().parts_size() == 0) {
      return context.fail(path + ".composite.parts", "a composite needs at least one part");
    }
    if (!spec.distribution_kwargs().empty()) {
      std::set<std::string> names;  // sorted: the message does not depend on the map's order
      for (const auto& [name, value] : spec.distribution_kwargs()) names.insert(name);
      return context.fail(path + ".distribution_kwargs",
                          absl::StrCat("a composite takes no distribution_kwargs (got \"", *names.begin(), "\")"),
                          "give a part's kwargs in composite.parts[i].kwargs");
    }
    for (int i = 0; i < spec.composite().parts_size(); ++i) {
      const auto& part = spec.composite().parts(i);
      const std::string field = absl::StrCat(path, ".composite.parts[", i, "]");
      if (!context.key_at(part.key(), field + ".key")) return false;
      if (!distribution_known(part.distribution(), field + ".distribution", context)) return false;
      if (!kwargs_known(part.kwargs(), part.distribution(), /*params_allowed=*/false, std::nullopt, field + ".kwargs",
                        context)) {
        return false;
      }
      samples.emplace_back(part.sample_key().empty() ? part.key() : part.sample_key(), std::nullopt);
    }
  } else {
    const std::string distribution = spec.distribution().empty() ? "delta" : spec.distribution();
    if (!distribution_known(distribution, path + ".distribution", context)) return false;
    if (!kwargs_known(spec.distribution_kwargs(), distribution, /*params_allowed=*/true, params[0],
                      path + ".distribution_kwargs", context)) {
      return false;
    }
    if (spec.out_keys_size() == 0) {
      return context.fail(path + ".out_keys", "no out_keys", "name where the sample goes, e.g. out_keys: \"action\"");
    }
    for (const auto& key : spec.out_keys()) samples.emplace_back(key, sample_shape(distribution, params[0]));
  }
  if (spec.out_keys_size() > 0) {
    if (spec.has_composite() && spec.out_keys_size() != static_cast<int>(samples.size())) {
      return context.fail(path + ".out_keys", absl::StrCat("the composite has ", samples.size(), " parts but ",
                                                           spec.out_keys_size(), " out_keys"));
    }
    for (int i = 0; i < spec.out_keys_size(); ++i) samples[i].first = spec.out_keys(i);
  }
  if (!spec.default_interaction_type().empty()) {
    try {
      nn::interaction_type_from_str(spec.default_interaction_type());
    } catch (const std::exception& error) {
      return context.fail(path + ".default_interaction_type", error.what());
    }
  }
  for (int i = 0; i < spec.num_samples_size(); ++i) {
    if (!context.positive(spec.num_samples(i), absl::StrCat(path, ".num_samples[", i, "]"))) return false;
    // From here on every tensor has these sample dims in front of the batch: write() and the
    // networks check them.
    context.add_draws(static_cast<double>(spec.num_samples(i)));
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!context.write(samples[i].first, absl::StrCat(path, ".out_keys[", i, "]"), samples[i].second, overwrites)) {
      return false;
    }
  }
  if (!spec.has_composite() && spec.distribution() == "tanh_normal" &&
      !mean_estimate_fits(samples[0].second, path + ".distribution", "the tanh_normal sample", context)) {
    return false;
  }
  for (int i = 0; i < spec.composite().parts_size() && spec.in_keys_size() > 0; ++i) {
    const auto& part = spec.composite().parts(i);
    if (part.distribution() != "tanh_normal") continue;
    auto prefix = context.key_at(spec.in_keys(0) + "/" + part.key(), path + ".in_keys[0]");
    if (!prefix) return false;
    for (const auto& [written, shape] : context.written_at_or_under(*prefix)) {
      if (!mean_estimate_fits(*shape, absl::StrCat(path, ".composite.parts[", i, "]"),
                              absl::StrCat("the tanh_normal part's parameter \"", key_string(*written), "\""),
                              context)) {
        return false;
      }
    }
  }
  if (spec.return_log_prob()) {
    std::vector<std::string> lp_keys(spec.log_prob_keys().begin(), spec.log_prob_keys().end());
    if (lp_keys.empty() && !spec.log_prob_key().empty()) lp_keys.push_back(spec.log_prob_key());
    if (lp_keys.empty()) {
      for (const auto& [key, shape] : samples) lp_keys.push_back(key + "_log_prob");
    }
    for (size_t i = 0; i < lp_keys.size(); ++i) {
      if (!context.write(lp_keys[i], absl::StrCat(path, ".log_prob_keys[", i, "]"), std::nullopt, overwrites)) {
        return false;
      }
    }
  }
  return true;
}

// ---- build --------------------------------------------------------------------------------

dist::DistributionTensorKwargs tensor_kwargs_of(const google::protobuf::Map<std::string, tdpolicy::Scalar>& scalars) {
  dist::DistributionTensorKwargs kwargs;
  for (const auto& [name, scalar] : scalars) {
    if (scalar.value_case() == tdpolicy::Scalar::kTensorValue) kwargs.emplace(name, constant(scalar.tensor_value()));
  }
  return kwargs;
}

// The number kwargs (tensor_kwargs_of takes the tensors).
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
      case tdpolicy::Scalar::kTensorValue:
        break;
      case tdpolicy::Scalar::VALUE_NOT_SET:
        throw std::invalid_argument(absl::StrCat("kwarg \"", name, "\" has no value"));
    }
  }
  return kwargs;
}

ModulePtr build(const tdpolicy::Module& module, const std::string&, const BuildContext&) {
  const tdpolicy::ProbabilisticModule& spec = module.probabilistic();
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
  options->distribution_tensor_kwargs(tensor_kwargs_of(spec.distribution_kwargs()));
  options->projections(projections_of(module));
  if (!spec.default_interaction_type().empty()) {
    options->default_interaction_type(nn::interaction_type_from_str(spec.default_interaction_type()));
  }
  options->return_log_prob(spec.return_log_prob());
  if (!spec.log_prob_key().empty()) options->log_prob_key(*parse_key(spec.log_prob_key()));
  if (spec.log_prob_keys_size() > 0) options->log_prob_keys(keys_of(spec.log_prob_keys()));
  options->num_samples(std::vector<int64_t>(spec.num_samples().begin(), spec.num_samples().end()));
  return nn::ProbabilisticTensorDictModule(*options).ptr();
}

// ---- export -------------------------------------------------------------------------------

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
    throw std::invalid_argument(absl::StrCat(where, ": its distribution is a C++ factory; a spec can only name "
                                                    "registry distributions (register it by name first)"));
  }
  return name;
}

bool export_module(const nn::TensorDictModuleBase& base, tdpolicy::Module* module_out, const std::string& where,
                   ExportContext& context) {
  auto* module = dynamic_cast<const nn::ProbabilisticTensorDictModuleImpl*>(&base);
  if (module == nullptr) return false;
  tdpolicy::ProbabilisticModule* out = module_out->mutable_probabilistic();
  const auto& o = module->options();
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
  add_keys(module->dist_sample_keys(), out->mutable_out_keys());
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
  for (const auto& [name, tensor] : o.distribution_tensor_kwargs()) {
    *(*out->mutable_distribution_kwargs())[name].mutable_tensor_value() = to_tensor_proto(tensor);
  }
  add_projections(o.projections(), module_out);
  out->set_default_interaction_type(std::string(nn::to_string(o.default_interaction_type())));
  out->set_return_log_prob(o.return_log_prob());
  if (o.log_prob_key()) out->set_log_prob_key(key_string(*o.log_prob_key()));
  if (o.log_prob_keys()) add_keys(*o.log_prob_keys(), out->mutable_log_prob_keys());
  for (int64_t n : o.num_samples()) out->add_num_samples(n);
  context.mark_overwrites(module->out_keys_source(), module_out);
  return true;
}

}  // namespace

extern const ModuleKind kProbabilistic{tdpolicy::Module::kProbabilistic, validate, build, export_module};

}  // namespace tdp::policy::kinds
