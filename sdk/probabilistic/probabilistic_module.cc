#include "sdk/probabilistic/probabilistic_module.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/stack.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "sdk/log/log.h"

namespace tdp::nn {
namespace {

const char* py_bool(bool value) { return value ? "True" : "False"; }

std::string kwargs_to_string(const dist::DistributionKwargs& kwargs) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : kwargs) {
    if (!first) out += ", ";
    first = false;
    out += "'" + key + "': ";
    if (value.isBoolean()) {
      out += py_bool(value.toBool());
    } else if (value.isIntegral(false)) {
      out += std::to_string(value.toLong());
    } else {
      std::ostringstream s;
      s << value.toDouble();
      out += s.str();
    }
  }
  return out + "}";
}

std::vector<int64_t> concat(const std::vector<int64_t>& a, c10::IntArrayRef b) {
  std::vector<int64_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

// ---- options -------------------------------------------------------------------------------

ProbabilisticTensorDictModuleOptions::ProbabilisticTensorDictModuleOptions(
    std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys)
    : in_keys_(std::move(in_keys)), out_keys_(std::move(out_keys)) {
  for (const NestedKey& key : in_keys_) dist_keys_.push_back(key.empty() ? "" : key.leaf());
}

ProbabilisticTensorDictModuleOptions::ProbabilisticTensorDictModuleOptions(
    DistKeyMap in_keys_map, std::vector<NestedKey> out_keys)
    : out_keys_(std::move(out_keys)) {
  for (auto& [name, key] : in_keys_map) {
    dist_keys_.push_back(name);
    in_keys_.push_back(std::move(key));
  }
}

ProbabilisticTensorDictModuleOptions& ProbabilisticTensorDictModuleOptions::seed(uint64_t seed) {
  generator_ = at::detail::createCPUGenerator(seed);
  return *this;
}

ProbabilisticTensorDictModuleOptions& ProbabilisticTensorDictModuleOptions::composite(
    std::vector<std::pair<NestedKey, dist::DistributionBuilder>> distribution_map,
    dist::CompositeDistributionOptions options) {
  composite_map_ = std::move(distribution_map);
  composite_options_ = std::move(options);
  return *this;
}

// ---- construction --------------------------------------------------------------------------

ProbabilisticTensorDictModuleImpl::ProbabilisticTensorDictModuleImpl(
    ProbabilisticTensorDictModuleOptions options)
    : TensorDictModuleBase("ProbabilisticTensorDictModule"), options_(std::move(options)) {
  honor_skip_existing();
  handle_forward_in_entry_point();
  if (options_.in_keys().empty()) {
    throw std::invalid_argument("ProbabilisticTensorDictModule: in_keys must not be empty.");
  }
  if (options_.dist_keys().size() != options_.in_keys().size()) {
    throw std::invalid_argument(
        "ProbabilisticTensorDictModule: dist_keys and in_keys must have the same length (got " +
        std::to_string(options_.dist_keys().size()) + " and " +
        std::to_string(options_.in_keys().size()) + ").");
  }
  std::vector<NestedKey> out_keys = options_.out_keys();
  if (out_keys.empty()) {
    if (options_.is_composite()) {
      const auto& name_map = options_.composite_options().name_map();
      for (const auto& [key, builder] : *options_.composite_map()) {
        NestedKey out = key;
        for (const auto& [from, to] : name_map) {
          if (from == key) out = to;
        }
        out_keys.push_back(out);
      }
    } else {
      out_keys.push_back("_");
    }
  }
  if (options_.is_composite() && options_.in_keys().size() != 1) {
    throw std::invalid_argument(
        "ProbabilisticTensorDictModule: a composite distribution reads one in_key, the "
        "TensorDict of its parts' parameters; got in_keys=" +
        keys_to_string(options_.in_keys()) + ".");
  }
  if (options_.is_composite() && !options_.distribution_kwargs().empty()) {
    // tensordict's CompositeDistribution takes no extra keywords (a TypeError there); ignoring
    // them here would run a different policy than the one written.
    throw std::invalid_argument(
        "ProbabilisticTensorDictModule: a composite distribution takes no distribution_kwargs (got " +
        kwargs_to_string(options_.distribution_kwargs()) +
        "); give each part's kwargs in CompositeDistributionOptions().extra_kwargs.");
  }
  sample_keys_ = out_keys;
  bind_distribution();

  const bool aggregate = composite_lp_aggregate();
  aggregate_at_init_ = aggregate;
  const auto& given_key = options_.log_prob_key();
  const auto& given_keys = options_.log_prob_keys();
  if (!given_keys.has_value()) {
    if (out_keys.size() == 1 && given_key.has_value()) {
      log_prob_keys_ = std::vector<NestedKey>{*given_key};
    } else if (aggregate) {
      if (out_keys.size() == 1) log_prob_keys_ = std::vector<NestedKey>{"sample_log_prob"};
    } else {
      std::vector<NestedKey> keys;
      for (const NestedKey& key : out_keys) keys.push_back(dist::add_suffix(key, "_log_prob"));
      log_prob_keys_ = std::move(keys);
    }
  } else if (aggregate) {
    throw std::runtime_error(
        "composite_lp_aggregate is set to True but log_prob_keys were passed. When "
        "composite_lp_aggregate() returns ``True``, log_prob_key must be used instead.");
  } else {
    if (given_keys->size() != out_keys.size()) {
      throw std::invalid_argument(
          "ProbabilisticTensorDictModule: log_prob_keys " + keys_to_string(*given_keys) +
          " must have one key per out_key " + keys_to_string(out_keys) + ".");
    }
    log_prob_keys_ = given_keys;
  }
  if (!given_key.has_value()) {
    if (aggregate) {
      log_prob_key_ = NestedKey("sample_log_prob");
    } else if (out_keys.size() == 1) {
      log_prob_key_ = dist::add_suffix(out_keys[0], "_log_prob");
    }
  } else if (out_keys.size() > 1 && !aggregate) {
    throw std::runtime_error(
        "composite_lp_aggregate is set to `False` but a `log_prob_key` was passed. When "
        "composite_lp_aggregate() returns ``False``, log_prob_keys must be used instead.");
  } else {
    log_prob_key_ = given_key;
  }
  if (!aggregate && log_prob_keys_.has_value()) {
    for (size_t i = 0; i < sample_keys_.size() && i < log_prob_keys_->size(); ++i) {
      if ((*log_prob_keys_)[i] != dist::add_suffix(sample_keys_[i], "_log_prob")) {
        part_log_prob_keys_.emplace_back(sample_keys_[i], (*log_prob_keys_)[i]);
      }
    }
  }
  if (options_.cache_dist()) {
    logger()->warn(
        "ProbabilisticTensorDictModule: cache_dist has no effect: no distribution here can be "
        "updated in place (as in the reference, where it needs a distribution with `update`).");
  }
  if (options_.n_empirical_estimate() < 1) {
    throw std::invalid_argument("ProbabilisticTensorDictModule: n_empirical_estimate must be >= 1.");
  }

  std::vector<NestedKey> all_out = out_keys;
  if (options_.return_log_prob()) {
    for (const NestedKey& key : aggregate ? std::vector<NestedKey>{*log_prob_key_} : *log_prob_keys_) {
      if (std::find(all_out.begin(), all_out.end(), key) == all_out.end()) all_out.push_back(key);
    }
  }
  set_in_keys(options_.in_keys());
  set_out_keys(std::move(all_out));
  single_in_place_ =
      !options_.is_composite() && options_.num_samples().empty() && !options_.generator_key().has_value();
}

// ---- keys ----------------------------------------------------------------------------------

void ProbabilisticTensorDictModuleImpl::check_aggregate(const char* what) const {
  const bool aggregate = composite_lp_aggregate();
  if (aggregate != aggregate_at_init_) {
    throw std::runtime_error(std::string("composite_lp_aggregate is set to `") + py_bool(aggregate) +
                             "`, but the class was instantiated with `" +
                             py_bool(aggregate_at_init_) + "` which may affect the " + what +
                             " property.");
  }
}

const NestedKey& ProbabilisticTensorDictModuleImpl::log_prob_key() const {
  check_aggregate("log_prob_key");
  if (!aggregate_at_init_) {
    if (log_prob_keys_.has_value() && log_prob_keys_->size() == 1) return (*log_prob_keys_)[0];
    throw std::runtime_error(
        "composite_lp_aggregate is set to ``False``, hence ProbabilisticTensorDictModule.log_prob_key "
        "cannot be accessed unless there is one and only one element in log_prob_keys (got "
        "log_prob_keys=" +
        keys_to_string(log_prob_keys_.value_or(std::vector<NestedKey>{})) +
        "). When composite_lp_aggregate() returns ``False``, try to use "
        "ProbabilisticTensorDictModule.log_prob_keys instead.");
  }
  return *log_prob_key_;
}

std::vector<NestedKey> ProbabilisticTensorDictModuleImpl::log_prob_keys() const {
  check_aggregate("log_prob_keys");
  if (aggregate_at_init_) return {*log_prob_key_};
  return log_prob_keys_.value_or(std::vector<NestedKey>{});
}

// ---- distribution --------------------------------------------------------------------------

void ProbabilisticTensorDictModuleImpl::bind_distribution() {
  // Resolved once, as Python binds its distribution class once: forward() builds the
  // distribution with no registry lock or lookup, and re-registering a name later does not
  // change this module.
  if (options_.is_composite()) {
    auto map = *options_.composite_map();
    for (auto& [key, builder] : map) builder = builder.resolved();
    options_.composite(std::move(map), options_.composite_options());
  } else {
    options_.distribution(options_.distribution().resolved());
  }
  // Python passes distribution_kwargs next to the tensors, so a constant parameter (Normal's
  // scale=1) can be a kwarg. Registry signatures separate the two: a kwarg that names a
  // parameter and is not also accepted as a kwarg (TanhNormal's low/high are both) becomes a
  // constant tensor at each call.
  build_kwargs_ = options_.distribution_kwargs();
  kwargs_as_params_.clear();
  tensor_kwargs_.assign(options_.distribution_tensor_kwargs().begin(), options_.distribution_tensor_kwargs().end());
  bound_.reset();
  if (options_.is_composite()) {
    if (!tensor_kwargs_.empty()) {
      throw std::invalid_argument(describe() + ": a composite distribution takes no tensor kwargs (got \"" +
                                  tensor_kwargs_.front().first + "\")");
    }
    return;
  }
  // A factory has no signature: nothing to split.
  if (const dist::DistributionSignature* signature = options_.distribution().signature()) {
    const std::vector<std::string> param_names = signature->param_names();
    for (const auto& [name, tensor] : tensor_kwargs_) {
      if (std::find(param_names.begin(), param_names.end(), name) == param_names.end()) {
        throw std::invalid_argument(describe() + ": the distribution takes no tensor kwarg \"" + name +
                                    "\" (its tensor parameters: " + signature->params_to_string() + ")");
      }
      if (!tensor.defined()) throw std::invalid_argument(describe() + ": tensor kwarg \"" + name + "\" is undefined");
    }
    for (auto it = build_kwargs_.begin(); it != build_kwargs_.end();) {
      auto named = [&](const std::vector<std::string>& names) {
        return std::find(names.begin(), names.end(), it->first) != names.end();
      };
      if (named(param_names) && (!named(signature->kwargs) || !tensor_kwargs_.empty())) {
        kwargs_as_params_.emplace_back(it->first, it->second);
        it = build_kwargs_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // The parameter names and kwargs get_dist() passes are the same on every call: the
  // distribution is bound to them here, once, and takes the tensors by position on each forward.
  if (kwargs_as_params_.empty() && tensor_kwargs_.empty()) bound_.emplace(options_.distribution().bind(options_.dist_keys(), build_kwargs_));
}

AnyDistribution ProbabilisticTensorDictModuleImpl::get_dist(const TensorDict& tensordict) const {
  if (!options_.is_composite()) return AnyDistribution(build_single(tensordict));
  const NestedKey& key = options_.in_keys()[0];
  if (!tensordict.contains(key)) {
    throw KeyError(describe() + ": the composite's parameters " + key.to_string() +
                   " are not in the TensorDict, whose keys are " + keys_to_string(tensordict.keys(true)) + ".");
  }
  return AnyDistribution(std::make_shared<const dist::CompositeDistribution>(
      tensordict.get_tensordict(key), *options_.composite_map(), options_.composite_options()));
}

dist::DistributionPtr ProbabilisticTensorDictModuleImpl::build_single(const TensorDict& tensordict) const {
  const auto& keys = options_.in_keys();
  c10::SmallVector<at::Tensor, 4> tensors;
  static const at::Tensor kMissing;
  for (size_t i = 0; i < keys.size(); ++i) {
    // One lookup per key: this runs on every forward.
    tensors.push_back(tensordict.get(keys[i], kMissing));
    if (!tensors.back().defined()) {
      throw KeyError(describe() + ": distribution parameter '" + options_.dist_keys()[i] + "' is read from " +
                     keys[i].to_string() + ", which is not in the TensorDict; its keys are " +
                     keys_to_string(tensordict.keys(true)) + ".");
    }
  }
  if (bound_.has_value()) return bound_->make(tensors);
  return build_with_constant_params(tensors);
}

dist::DistributionPtr ProbabilisticTensorDictModuleImpl::build_with_constant_params(dist::ParamTensors tensors) const {
  dist::Params params;
  for (size_t i = 0; i < tensors.size(); ++i) params.emplace(options_.dist_keys()[i], tensors[i]);
  dist::DistributionKwargs kwargs = build_kwargs_;
  const at::Tensor& like = params.begin()->second;
  for (const auto& [name, value] : tensor_kwargs_) {
    if (params.count(name)) {
      throw std::invalid_argument(describe() + ": parameter \"" + name + "\" is both read from the TensorDict and a tensor kwarg");
    }
    params.emplace(name, value.to(like.device()));
  }
  for (const auto& [name, value] : kwargs_as_params_) {
    if (params.count(name)) {
      kwargs.emplace(name, value);  // a tensor was given too: the registry reports the clash
    } else {
      params.emplace(name, at::full_like(like, value));
    }
  }
  return options_.distribution().build(params, kwargs);
}

void ProbabilisticTensorDictModuleImpl::check_mean_is_an_action(const dist::Distribution& dist,
                                                                 const at::Tensor& mean) const {
  // A discrete distribution whose mean is undefined (Categorical's is NaN, as in
  // torch.distributions) has no mean action. Without return_log_prob the NaN is written, as
  // tensordict does; scoring it would fail later with an out-of-range index that names nothing.
  if (options_.return_log_prob() && dist.support().is_discrete() && mean.is_floating_point() &&
      mean.isnan().any().item<bool>()) {
    throw std::invalid_argument(describe() + ": interaction type MEAN: " + dist.name() +
                                " has no mean (its actions are discrete); use MODE or DETERMINISTIC");
  }
}

std::variant<at::Tensor, TensorDict> ProbabilisticTensorDictModuleImpl::dist_sample(
    const AnyDistribution& dist, std::optional<InteractionType> type,
    const std::optional<at::Generator>& generator) const {
  // Public API: an unset type reads the scope here; the forward path passes its request's.
  if (!type.has_value()) type = interaction_type();
  if (!type.has_value()) type = options_.default_interaction_type();
  const dist::GeneratorOpt gen =
      generator.has_value() ? dist::GeneratorOpt(*generator) : dist::GeneratorOpt();
  const std::vector<int64_t>& shape = options_.num_samples();
  const int64_t n = options_.n_empirical_estimate();
  if (dist.is_composite()) {
    const dist::CompositeDistribution& c = *dist.composite();
    switch (*type) {
      case InteractionType::kDeterministic:
        return c.deterministic_sample();
      case InteractionType::kMode:
        return c.mode();
      case InteractionType::kMedian:
        throw dist::NotImplementedError("method CompositeDistribution.median is not implemented");
      case InteractionType::kMean:
        try {
          TensorDict mean = c.mean();
          for (const auto& [key, part] : c.dists()) check_mean_is_an_action(*part, mean.get(key));
          return mean;
        } catch (const dist::NotImplementedError&) {
          TensorDict draws = dist.has_rsample() ? c.rsample({n}, gen) : c.sample({n}, gen);
          return draws.apply([](const at::Tensor& t) { return t.to(at::kDouble).mean(0).to(t.scalar_type()); },
                             std::vector<int64_t>(c.batch_shape()));
        }
      case InteractionType::kRandom:
        return dist.has_rsample() ? c.rsample(shape, gen) : c.sample(shape, gen);
    }
  }
  return value_of(*dist.distribution(), *type, gen);
}

at::Tensor ProbabilisticTensorDictModuleImpl::value_of(const dist::Distribution& d, InteractionType type,
                                                       const dist::GeneratorOpt& generator) const {
  switch (type) {
    case InteractionType::kRandom:
      return d.has_rsample() ? d.rsample(options_.num_samples(), generator) : d.sample(options_.num_samples(), generator);
    case InteractionType::kDeterministic:
      return d.deterministic_sample();
    case InteractionType::kMode:
      return d.mode();
    case InteractionType::kMedian:
      // torch.distributions define no median; the inverse cdf at 1/2 is one where it exists.
      try {
        return d.icdf(at::full(d.extended_shape(), 0.5, at::TensorOptions().dtype(at::kFloat)));
      } catch (const dist::NotImplementedError&) {
        throw dist::NotImplementedError("method " + d.name() + ".median is not implemented");
      }
    case InteractionType::kMean:
      try {
        at::Tensor mean = d.mean();
        check_mean_is_an_action(d, mean);
        return mean;
      } catch (const dist::NotImplementedError&) {
        const int64_t n = options_.n_empirical_estimate();
        return (d.has_rsample() ? d.rsample({n}, generator) : d.sample({n}, generator)).mean(0);
      }
  }
  throw std::logic_error("unknown interaction type");
}

// ---- generator -----------------------------------------------------------------------------

std::optional<at::Generator> ProbabilisticTensorDictModuleImpl::resolve_generator(
    const TensorDict& tensordict, const std::optional<at::Generator>& scoped) const {
  if (options_.generator().has_value()) return options_.generator();
  const auto& key = options_.generator_key();
  if (!key.has_value() || !tensordict.contains(*key)) return scoped;
  at::Tensor seed = tensordict.get(*key);
  if (seed.numel() != 1) {
    throw std::invalid_argument("Generator key " + key->to_string() +
                                " resolved to a tensor of " + std::to_string(seed.numel()) +
                                " elements; expected a scalar seed.");
  }
  if (!at::isIntegralType(seed.scalar_type(), /*includeBool=*/false)) {
    throw std::invalid_argument("Generator key " + key->to_string() +
                                " resolved to a tensor of dtype " +
                                std::string(c10::toString(seed.scalar_type())) +
                                "; expected an integer seed.");
  }
  return at::detail::createCPUGenerator(static_cast<uint64_t>(seed.item<int64_t>()));
}

void ProbabilisticTensorDictModuleImpl::write_back_seed(TensorDict tensordict,
                                                       const at::Generator& generator) const {
  const NestedKey& key = *options_.generator_key();
  at::Tensor old = tensordict.get(key);
  at::Tensor next = at::randint(0, int64_t{1} << 62, {}, generator,
                                at::TensorOptions().dtype(at::kLong));
  tensordict.set(key, next.reshape(old.sizes()).to(old.options()));
}

// ---- log-prob ------------------------------------------------------------------------------

LogProb ProbabilisticTensorDictModuleImpl::score(const AnyDistribution& dist,
                                                 const std::variant<at::Tensor, TensorDict>& sample,
                                                 TensorDict* parts_out) const {
  if (!dist.is_composite()) return dist.distribution()->log_prob(std::get<at::Tensor>(sample));
  const bool aggregate = composite_lp_aggregate();
  if (aggregate != aggregate_at_init_) {
    throw std::runtime_error(
        "The value returned by composite_lp_aggregate changed between init of "
        "ProbabilisticTensorDictModule and its execution (" +
        std::string(py_bool(aggregate_at_init_)) + " -> " + py_bool(aggregate) +
        "). Make sure the mode matches.");
  }
  const TensorDict& samples = std::get<TensorDict>(sample);
  if (aggregate) return dist.composite()->score_parts(samples, /*sum=*/true, parts_out);
  TensorDict fresh;
  if (parts_out == nullptr) {
    fresh = TensorDict(samples.batch_size().vec(), samples.device());
    parts_out = &fresh;
  }
  dist.composite()->score_parts(samples, /*sum=*/false, parts_out, part_log_prob_keys_);
  return *parts_out;
}

LogProb ProbabilisticTensorDictModuleImpl::log_prob(const TensorDict& tensordict,
                                                   const std::optional<AnyDistribution>& dist) const {
  const AnyDistribution d = dist.has_value() ? *dist : get_dist(tensordict);
  if (!d.is_composite()) return score(d, tensordict.get(sample_keys_[0]), nullptr);
  // As the reference: when aggregating, the per-part entries are also written into the input.
  TensorDict& input = const_cast<TensorDict&>(tensordict);
  return score(d, tensordict.select(sample_keys_), composite_lp_aggregate() ? &input : nullptr);
}

// ---- forward -------------------------------------------------------------------------------

TensorDict ProbabilisticTensorDictModuleImpl::forward_requires_sample(
    const TensorDict& tensordict, const std::optional<TensorDict>& tensordict_out,
    bool requires_sample) {
  return forward_with_request(tensordict, SampleRequest::from_scopes(requires_sample), tensordict_out);
}

TensorDict ProbabilisticTensorDictModuleImpl::forward_impl(
    TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  return forward_with_request(tensordict, SampleRequest::from_scopes(), tensordict_out);
}

TensorDict ProbabilisticTensorDictModuleImpl::forward_with_request(
    const TensorDict& tensordict, const SampleRequest& request,
    const std::optional<TensorDict>& tensordict_out) {
  if (skips(tensordict)) return tensordict;
  if (draws_in_place(request, tensordict_out)) return draw_in_place(tensordict, request);
  const std::vector<bool> given = dropped_keys_given(tensordict);
  TensorDict out = tensordict_out.value_or(tensordict);
  AnyDistribution dist = get_dist(tensordict);
  if (request.requires_sample) {
    std::optional<at::Generator> generator = resolve_generator(tensordict, request.generator);
    auto value = dist_sample(dist, request.type.value_or(options_.default_interaction_type()), generator);
    // Scored before anything is written, the next seed included, so that a failure leaves the
    // TensorDicts as they were (draw_in_place() keeps the same order).
    auto* sample = std::get_if<TensorDict>(&value);
    const NestedKey* log_prob_at = nullptr;  // a single distribution's
    at::Tensor log_prob;
    if (options_.return_log_prob() && sample != nullptr) {
      LogProb lp = score(dist, value, sample);
      if (auto* total = std::get_if<at::Tensor>(&lp)) sample->set(*log_prob_key_, *total);
    } else if (options_.return_log_prob()) {
      log_prob_at = &log_prob_key();
      log_prob = std::get<at::Tensor>(score(dist, value, nullptr));
    }
    const auto& seed_key = options_.generator_key();
    if (generator.has_value() && !options_.generator().has_value() && seed_key.has_value() &&
        tensordict.contains(*seed_key)) {
      write_back_seed(tensordict, *generator);
    }
    if (!options_.num_samples().empty()) {
      out = out.expand(concat(options_.num_samples(), out.batch_size()));
    }
    if (sample != nullptr) {
      out.update(*sample);
    } else {
      out.set(sample_keys_[0], std::get<at::Tensor>(value));
      if (log_prob_at != nullptr) out.set(*log_prob_at, log_prob);
    }
  } else if (options_.return_log_prob()) {
    if (!dist.is_composite()) {
      out.set(log_prob_key(), std::get<at::Tensor>(score(dist, tensordict.get(sample_keys_[0]), nullptr)));
    } else {
      // Not aggregating: the per-part entries go straight into `out`; aggregating: only the sum.
      LogProb lp = score(dist, tensordict.select(sample_keys_), composite_lp_aggregate() ? nullptr : &out);
      if (auto* total = std::get_if<at::Tensor>(&lp)) out.set(log_prob_key(), *total);
    }
  }
  project_entries(options_.projections(), out, request.generator);
  return apply_selection(std::move(out), tensordict, given);
}

TensorDict ProbabilisticTensorDictModuleImpl::draw_in_place(const TensorDict& tensordict,
                                                            const SampleRequest& request) const {
  // Everything that can fail runs before the first write, so that a failure leaves the
  // TensorDict as it was.
  const NestedKey* log_prob_at = options_.return_log_prob() ? &log_prob_key() : nullptr;
  const dist::DistributionPtr dist = build_single(tensordict);
  // The module's own generator, else the scope's (no generator_key here).
  const dist::GeneratorOpt& generator = options_.generator().has_value() ? options_.generator() : request.generator;
  at::Tensor value = value_of(*dist, request.type.value_or(options_.default_interaction_type()), generator);
  at::Tensor log_prob;
  if (log_prob_at != nullptr) log_prob = dist->log_prob(value);  // score() for one distribution
  TensorDict out = tensordict;
  out.set(sample_keys_[0], std::move(value));
  if (log_prob_at != nullptr) out.set(*log_prob_at, std::move(log_prob));
  project_entries(options_.projections(), out, generator);
  return out;
}

std::vector<std::string> ProbabilisticTensorDictModuleImpl::repr_fields() const {
  std::vector<std::string> fields;
  if (options_.is_composite()) {
    std::string map = "{";
    bool first = true;
    for (const auto& [key, builder] : *options_.composite_map()) {
      map += std::string(first ? "" : ", ") + key.to_string() + ": " + builder.to_string();
      first = false;
    }
    fields.push_back("distribution_class=CompositeDistribution(distribution_map=" + map + "})");
  } else {
    fields.push_back("distribution_class=" + options_.distribution().to_string());
  }
  fields.push_back("distribution_kwargs=" + kwargs_to_string(options_.distribution_kwargs()));
  fields.push_back("default_interaction_type=" +
                   std::string(nn::to_string(options_.default_interaction_type())));
  fields.push_back("num_samples=" + (options_.num_samples().empty()
                                         ? std::string("None")
                                         : shape_to_string(options_.num_samples())));
  if (options_.return_log_prob()) fields.push_back("return_log_prob=True");
  return fields;
}

}  // namespace tdp::nn
