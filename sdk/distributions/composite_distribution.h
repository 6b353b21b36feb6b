// CompositeDistribution: several named distributions over the entries of a TensorDict
// (tensordict.nn.CompositeDistribution). Each entry of `params` holds one distribution's
// parameters; sampling returns a TensorDict with one sample per entry, and log_prob scores
// such a TensorDict, either summed into one tensor or per entry, as composite_lp_aggregate()
// says.
//
//   tdp::TensorDict params({{{"cont", "loc"}, loc}, {{"cont", "scale"}, scale},   // [3, 4]
//                           {{"nested", "disc", "logits"}, logits}}, {3});         // [3, 10]
//   tdp::dist::CompositeDistribution dist(params, {{"cont", "normal"},
//                                                  {{"nested", "disc"}, "categorical"}});
//   tdp::TensorDict sample = dist.sample({4}, generator);   // cont [4, 3, 4], (nested, disc) [4, 3]
//   auto lp = dist.log_prob(sample);   // TensorDict with cont_log_prob, (nested, disc_log_prob)
//
// With composite_lp_aggregate() false (the default), log_prob returns a new TensorDict holding
// `<name>_log_prob` next to where each sample lives; with it true, one tensor with the batch
// shape of `sample`, each part's log-prob summed over its extra (event) dims. entropy follows
// the same switch. cdf and icdf write `<name>_cdf` / `<name>_icdf` into the given TensorDict.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sdk/distributions/distribution.h"
#include "sdk/distributions/registry.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::dist {

// How to build one part: a name in the DistributionRegistry ("normal") or a factory.
class DistributionBuilder {
 public:
  DistributionBuilder(const char* registry_name) : registry_name_(registry_name) {}  // NOLINT
  DistributionBuilder(std::string registry_name)                                      // NOLINT
      : registry_name_(std::move(registry_name)) {}
  // Any callable DistributionPtr(const Params&, const DistributionKwargs&), lambdas included.
  template <typename F, typename = std::enable_if_t<std::is_invocable_r_v<
                            DistributionPtr, const F&, const Params&, const DistributionKwargs&>>>
  DistributionBuilder(F factory) : factory_(std::move(factory)) {}  // NOLINT

  // This builder with its registry name resolved in the global registry now (a factory is
  // returned as it is): build() then takes no lock and does no lookup, and re-registering the
  // name later does not change it. Modules resolve their builders when they are constructed.
  // Throws std::invalid_argument for an unknown name.
  DistributionBuilder resolved() const;
  // This builder for a caller that passes parameters named `param_names`, in that order, and
  // `kwargs` on every call (a module): a registry name is resolved now and bound
  // (RegisteredDistribution::bind()); a factory gets the tensors under those names.
  BoundDistribution bind(const std::vector<std::string>& param_names, const DistributionKwargs& kwargs) const;

  DistributionPtr build(const Params& params, const DistributionKwargs& kwargs) const;
  // The registry name, or "<factory>".
  std::string to_string() const;
  // The resolved entry's signature (nullptr for a factory or an unresolved name).
  const DistributionSignature* signature() const { return registered_ ? &registered_->signature() : nullptr; }

 private:
  std::string registry_name_;
  std::optional<RegisteredDistribution> registered_;
  DistributionFactory factory_;
};

// {part key, value} pairs, keyed like distribution_map; order is kept.
using PartKeys = std::vector<std::pair<NestedKey, NestedKey>>;
using PartKwargs = std::vector<std::pair<NestedKey, DistributionKwargs>>;

struct CompositeDistributionOptions {
  // Where each part's sample is written, when not under its params key.
  TORCH_ARG(PartKeys, name_map);
  // Scalar kwargs per part (keyed like distribution_map), e.g. TanhNormal's low/high.
  TORCH_ARG(PartKwargs, extra_kwargs);
  // Key of the summed log-prob in log_prob_composite(include_sum); default "sample_log_prob".
  TORCH_ARG(std::optional<NestedKey>, log_prob_key);
  // Key of the summed entropy in entropy_composite(include_sum); default "entropy".
  TORCH_ARG(std::optional<NestedKey>, entropy_key);
};

class CompositeDistribution {
 public:
  // params: a TensorDict whose entry at each key of distribution_map is a TensorDict of that
  // part's parameter tensors. Its batch_size is the composite's batch shape. Throws
  // tdp::KeyError when a key has no params, std::invalid_argument for bad params.
  CompositeDistribution(const TensorDict& params,
                        const std::vector<std::pair<NestedKey, DistributionBuilder>>& distribution_map,
                        const CompositeDistributionOptions& options = CompositeDistributionOptions());
  // From distributions built elsewhere; `batch_shape` plays the role of params' batch size.
  static CompositeDistribution from_distributions(
      std::vector<int64_t> batch_shape,
      const std::vector<std::pair<NestedKey, DistributionPtr>>& distributions,
      const CompositeDistributionOptions& options = CompositeDistributionOptions());

  const std::vector<int64_t>& batch_shape() const { return batch_shape_; }
  // The parts in distribution_map order, keyed by where their samples are written.
  const std::vector<std::pair<NestedKey, DistributionPtr>>& dists() const { return dists_; }
  // The part written at `key`; throws tdp::KeyError listing the keys.
  const DistributionPtr& get(const NestedKey& key) const;
  NestedKey log_prob_key() const { return log_prob_key_.value_or(NestedKey("sample_log_prob")); }
  NestedKey entropy_key() const { return entropy_key_.value_or(NestedKey("entropy")); }

  // batch_size = sample_shape + batch_shape. One generator feeds every part in order.
  TensorDict sample(c10::IntArrayRef sample_shape = {},
                    const GeneratorOpt& generator = c10::nullopt) const;
  TensorDict rsample(c10::IntArrayRef sample_shape = {},
                     const GeneratorOpt& generator = c10::nullopt) const;
  TensorDict mode() const;
  TensorDict mean() const;
  TensorDict deterministic_sample() const;

  // composite_lp_aggregate() true: the summed tensor, shaped like sample.batch_size().
  // false: log_prob_composite(sample).
  std::variant<at::Tensor, TensorDict> log_prob(const TensorDict& sample) const;
  // The one log-prob computation of a composite, under log_prob, log_prob_composite and the
  // probabilistic modules: each part's log-prob of its entry in `sample`, written into `*parts`
  // (when not null; laid out as `sample`) at the key `part_keys` gives that part, else at
  // `<name>_log_prob`. Returns the sum of the parts over their event dims (shaped like
  // sample.batch_size()) when `sum`, else an undefined tensor.
  at::Tensor score_parts(const TensorDict& sample, bool sum, TensorDict* parts,
                         const PartKeys& part_keys = {}) const;
  // Per-part `<name>_log_prob` entries, plus the sum at log_prob_key() when `include_sum`
  // (default composite_lp_aggregate()). When composite_lp_aggregate() is true the entries are
  // written into `sample` and `sample` is returned; otherwise a new TensorDict is.
  TensorDict log_prob_composite(const TensorDict& sample,
                                std::optional<bool> include_sum = std::nullopt) const;
  // Same switch as log_prob. A part without a closed-form entropy is estimated as
  // -mean(log_prob) over `samples_mc` draws.
  std::variant<at::Tensor, TensorDict> entropy(int64_t samples_mc = 1,
                                               const GeneratorOpt& generator = c10::nullopt) const;
  TensorDict entropy_composite(int64_t samples_mc = 1,
                               std::optional<bool> include_sum = std::nullopt,
                               const GeneratorOpt& generator = c10::nullopt) const;
  // Writes `<name>_cdf` for each part into `sample` and returns it.
  TensorDict cdf(const TensorDict& sample) const;
  // Writes `<name>_icdf` for each part, from `<name>_cdf` when present, else from the cdf of
  // `<name>`; throws tdp::KeyError when neither exists.
  TensorDict icdf(const TensorDict& sample) const;

  // "CompositeDistribution({'cont': Normal(loc: [3, 4], scale: [3, 4]), ...})".
  std::string to_string() const;

 private:
  CompositeDistribution() = default;
  void set_keys(const CompositeDistributionOptions& options);

  std::vector<int64_t> batch_shape_;
  std::vector<std::pair<NestedKey, DistributionPtr>> dists_;
  std::optional<NestedKey> log_prob_key_;
  std::optional<NestedKey> entropy_key_;
};

std::ostream& operator<<(std::ostream& out, const CompositeDistribution& distribution);

// ('a', 'b') + "_log_prob" -> ('a', 'b_log_prob').
NestedKey add_suffix(const NestedKey& key, const std::string& suffix);

}  // namespace tdp::dist
