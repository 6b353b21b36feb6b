#include "sdk/distributions/composite_distribution.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <sstream>
#include <stdexcept>

#include "sdk/distributions/composite_lp_aggregate.h"
#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

constexpr char kName[] = "CompositeDistribution";

std::vector<NestedKey> keys_of(const std::vector<std::pair<NestedKey, DistributionPtr>>& dists) {
  std::vector<NestedKey> keys;
  for (const auto& [key, dist] : dists) keys.push_back(key);
  return keys;
}

// Sums every dim past the first `ndim` (a part's event dims) so the parts add up.
at::Tensor reduce_to(const at::Tensor& value, int64_t ndim) {
  if (value.dim() > ndim) return value.flatten(ndim, -1).sum(-1);
  return value;
}

at::Tensor accumulate(const at::Tensor& total, const at::Tensor& part) {
  return total.defined() ? total + part : part;
}

// Monte-Carlo fallback for parts whose entropy has no closed form, as tensordict does.
at::Tensor part_entropy(const Distribution& dist, int64_t samples_mc,
                        const GeneratorOpt& generator) {
  try {
    return dist.entropy();
  } catch (const NotImplementedError&) {
    at::Tensor x = dist.has_rsample() ? dist.rsample({samples_mc}, generator)
                                      : dist.sample({samples_mc}, generator);
    return -dist.log_prob(x).mean(0);
  }
}

const NestedKey* find_key(const PartKeys& pairs,
                          const NestedKey& key) {
  for (const auto& [from, to] : pairs) {
    if (from == key) return &to;
  }
  return nullptr;
}

// Resolves name_map and checks that every name_map / extra_kwargs key names a part.
template <typename Value>
void check_option_keys(const std::vector<std::pair<NestedKey, Value>>& option,
                       const std::vector<NestedKey>& names, const std::string& what) {
  for (const auto& [key, value] : option) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      throw std::invalid_argument(std::string(kName) + ": " + what + " key " + key.to_string() +
                                  " is not a key of the distribution map " +
                                  keys_to_string(names));
    }
  }
}

}  // namespace

DistributionPtr DistributionBuilder::build(const Params& params, const DistributionKwargs& kwargs) const {
  if (factory_) {
    DistributionPtr dist = factory_(params, kwargs);
    if (!dist) throw std::runtime_error("CompositeDistribution: a distribution factory returned null");
    return dist;
  }
  if (registered_) return registered_->make(params, kwargs);
  return make_distribution(registry_name_, params, kwargs);
}

DistributionBuilder DistributionBuilder::resolved() const {
  if (factory_ || registered_) return *this;
  DistributionBuilder out = *this;
  out.registered_ = DistributionRegistry::global().find(registry_name_);
  return out;
}

BoundDistribution DistributionBuilder::bind(const std::vector<std::string>& param_names,
                                            const DistributionKwargs& kwargs) const {
  if (!factory_) return resolved().registered_->bind(param_names, kwargs);
  return BoundDistribution("<factory>", by_position(param_names, factory_), {}, param_names.size(), kwargs);
}

std::string DistributionBuilder::to_string() const {
  return factory_ ? std::string("<factory>") : registry_name_;
}

CompositeDistribution::CompositeDistribution(
    const TensorDict& params,
    const std::vector<std::pair<NestedKey, DistributionBuilder>>& distribution_map,
    const CompositeDistributionOptions& options)
    : batch_shape_(params.batch_size().vec()) {
  std::vector<NestedKey> names;
  for (const auto& [name, builder] : distribution_map) names.push_back(name);
  check_option_keys(options.name_map(), names, "name_map");
  check_option_keys(options.extra_kwargs(), names, "extra_kwargs");
  std::vector<std::pair<NestedKey, DistributionPtr>> dists;
  for (const auto& [name, builder] : distribution_map) {
    if (!params.contains(name)) {
      throw KeyError(std::string(kName) + ": no params for " + name.to_string() +
                     " in params with keys " + keys_to_string(params.keys(true, true)));
    }
    if (!params.is_tensordict(name)) {
      throw std::invalid_argument(std::string(kName) + ": params at " + name.to_string() +
                                  " must be a TensorDict of parameter tensors (e.g. loc, scale), "
                                  "found a tensor");
    }
    Params part_params;
    for (const auto& [key, entry] : params.get_tensordict(name).items()) {
      if (entry.is_tensordict()) {
        throw std::invalid_argument(std::string(kName) + ": parameter " + (name + key).to_string() +
                                    " of " + builder.to_string() +
                                    " is a nested TensorDict; parameters must be tensors");
      }
      part_params[key.leaf()] = entry.tensor();
    }
    DistributionKwargs kwargs;
    for (const auto& [key, value] : options.extra_kwargs()) {
      if (key == name) kwargs = value;
    }
    DistributionPtr dist;
    try {
      dist = builder.build(part_params, kwargs);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(kName) + ": building " + name.to_string() + " (" +
                                  builder.to_string() + "): " + e.what());
    }
    const NestedKey* mapped = find_key(options.name_map(), name);
    dists.emplace_back(mapped ? *mapped : name, std::move(dist));
  }
  *this = from_distributions(batch_shape_, dists, CompositeDistributionOptions()
                                                      .log_prob_key(options.log_prob_key().value_or(
                                                          NestedKey("sample_log_prob")))
                                                      .entropy_key(options.entropy_key().value_or(
                                                          NestedKey("entropy"))));
}

CompositeDistribution CompositeDistribution::from_distributions(
    std::vector<int64_t> batch_shape,
    const std::vector<std::pair<NestedKey, DistributionPtr>>& distributions,
    const CompositeDistributionOptions& options) {
  CompositeDistribution out;
  out.batch_shape_ = std::move(batch_shape);
  std::vector<NestedKey> names;
  for (const auto& [name, dist] : distributions) names.push_back(name);
  check_option_keys(options.name_map(), names, "name_map");
  for (const auto& [name, dist] : distributions) {
    if (!dist) {
      throw std::invalid_argument(std::string(kName) + ": distribution " + name.to_string() +
                                  " is null");
    }
    const NestedKey* mapped = find_key(options.name_map(), name);
    const NestedKey write_name = mapped ? *mapped : name;
    for (const auto& [existing, other] : out.dists_) {
      if (existing == write_name) {
        throw std::invalid_argument(std::string(kName) + ": two distributions write " +
                                    write_name.to_string());
      }
    }
    out.dists_.emplace_back(write_name, dist);
  }
  out.log_prob_key_ = options.log_prob_key();
  out.entropy_key_ = options.entropy_key();
  return out;
}

const DistributionPtr& CompositeDistribution::get(const NestedKey& key) const {
  for (const auto& [name, dist] : dists_) {
    if (name == key) return dist;
  }
  throw KeyError(std::string(kName) + ": no distribution at " + key.to_string() +
                 "; distributions: " + keys_to_string(keys_of(dists_)));
}

TensorDict CompositeDistribution::sample(c10::IntArrayRef sample_shape,
                                         const GeneratorOpt& generator) const {
  TensorDict out(internal::concat(sample_shape, batch_shape_));
  for (const auto& [name, dist] : dists_) out.set(name, dist->sample(sample_shape, generator));
  return out;
}

TensorDict CompositeDistribution::rsample(c10::IntArrayRef sample_shape,
                                          const GeneratorOpt& generator) const {
  TensorDict out(internal::concat(sample_shape, batch_shape_));
  for (const auto& [name, dist] : dists_) out.set(name, dist->rsample(sample_shape, generator));
  return out;
}

TensorDict CompositeDistribution::mode() const {
  TensorDict out(batch_shape_);
  for (const auto& [name, dist] : dists_) out.set(name, dist->mode());
  return out;
}

TensorDict CompositeDistribution::mean() const {
  TensorDict out(batch_shape_);
  for (const auto& [name, dist] : dists_) out.set(name, dist->mean());
  return out;
}

TensorDict CompositeDistribution::deterministic_sample() const {
  TensorDict out(batch_shape_);
  for (const auto& [name, dist] : dists_) out.set(name, dist->deterministic_sample());
  return out;
}

at::Tensor CompositeDistribution::score_parts(const TensorDict& sample, bool sum, TensorDict* parts,
                                              const PartKeys& part_keys) const {
  // Every part is scored before anything is written: `parts` may be `sample` itself.
  std::vector<std::pair<NestedKey, at::Tensor>> entries;
  at::Tensor total;
  for (const auto& [name, dist] : dists_) {
    at::Tensor lp = dist->log_prob(sample.get(name));
    if (sum) total = accumulate(total, reduce_to(lp, sample.ndim()));
    if (parts == nullptr) continue;
    const NestedKey* key = find_key(part_keys, name);
    entries.emplace_back(key != nullptr ? *key : add_suffix(name, "_log_prob"), std::move(lp));
  }
  if (sum && !total.defined()) total = at::zeros(sample.batch_size());
  for (const auto& [key, value] : entries) set_mirroring(*parts, sample, key, value);
  return total;
}

std::variant<at::Tensor, TensorDict> CompositeDistribution::log_prob(
    const TensorDict& sample) const {
  if (!composite_lp_aggregate()) return log_prob_composite(sample);
  return score_parts(sample, /*sum=*/true, /*parts=*/nullptr);
}

TensorDict CompositeDistribution::log_prob_composite(const TensorDict& sample,
                                                     std::optional<bool> include_sum) const {
  const bool aggregate = composite_lp_aggregate();
  const bool with_sum = include_sum.value_or(aggregate);
  // tensordict writes into the sample when aggregating, and into a fresh TensorDict otherwise.
  TensorDict out = aggregate ? sample : TensorDict(sample.batch_size().vec(), sample.device());
  at::Tensor total = score_parts(sample, with_sum, &out);
  if (with_sum) set_mirroring(out, sample, log_prob_key(), total);
  return out;
}

std::variant<at::Tensor, TensorDict> CompositeDistribution::entropy(
    int64_t samples_mc, const GeneratorOpt& generator) const {
  if (!composite_lp_aggregate()) return entropy_composite(samples_mc, std::nullopt, generator);
  at::Tensor total;
  for (const auto& [name, dist] : dists_) {
    total = accumulate(total, reduce_to(part_entropy(*dist, samples_mc, generator),
                                 static_cast<int64_t>(batch_shape_.size())));
  }
  if (!total.defined()) return at::zeros(batch_shape_);
  return total;
}

TensorDict CompositeDistribution::entropy_composite(int64_t samples_mc,
                                                    std::optional<bool> include_sum,
                                                    const GeneratorOpt& generator) const {
  const bool with_sum = include_sum.value_or(composite_lp_aggregate());
  TensorDict out(batch_shape_);
  at::Tensor total;
  for (const auto& [name, dist] : dists_) {
    at::Tensor e = part_entropy(*dist, samples_mc, generator);
    out.set(add_suffix(name, "_entropy"), e);
    if (with_sum) total = accumulate(total, reduce_to(e, static_cast<int64_t>(batch_shape_.size())));
  }
  if (with_sum) out.set(entropy_key(), total.defined() ? total : at::zeros(batch_shape_));
  return out;
}

TensorDict CompositeDistribution::cdf(const TensorDict& sample) const {
  std::vector<std::pair<NestedKey, at::Tensor>> cdfs;
  for (const auto& [name, dist] : dists_) {
    cdfs.emplace_back(add_suffix(name, "_cdf"), dist->cdf(sample.get(name)));
  }
  TensorDict out = sample;
  for (const auto& [key, value] : cdfs) out.set(key, value);
  return out;
}

TensorDict CompositeDistribution::icdf(const TensorDict& sample) const {
  TensorDict out = sample;
  for (const auto& [name, dist] : dists_) {
    const NestedKey cdf_key = add_suffix(name, "_cdf");
    at::Tensor prob;
    if (sample.contains(cdf_key)) {
      prob = sample.get(cdf_key);
    } else if (sample.contains(name)) {
      prob = dist->cdf(sample.get(name));
    } else {
      throw KeyError(std::string(kName) + ": neither " + name.to_string() + " nor " +
                     cdf_key.to_string() +
                     " could be found in the sample; icdf needs one of them. Keys: " +
                     keys_to_string(sample.keys(true, true)));
    }
    out.set(add_suffix(name, "_icdf"), dist->icdf(prob));
  }
  return out;
}

std::string CompositeDistribution::to_string() const {
  std::ostringstream out;
  out << kName << "({";
  bool first = true;
  for (const auto& [name, dist] : dists_) {
    out << (first ? "" : ", ") << name.to_string() << ": " << dist->to_string();
    first = false;
  }
  out << "})";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const CompositeDistribution& distribution) {
  return out << distribution.to_string();
}

NestedKey add_suffix(const NestedKey& key, const std::string& suffix) {
  std::vector<std::string> path = key.path();
  if (path.empty()) throw std::invalid_argument("add_suffix: empty key");
  path.back() += suffix;
  return NestedKey(std::move(path));
}

}  // namespace tdp::dist
