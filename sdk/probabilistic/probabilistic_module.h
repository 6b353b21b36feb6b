// ProbabilisticTensorDictModule: builds a distribution from TensorDict entries (its in_keys) and
// writes a value taken from it (its out_keys), optionally with the value's log-probability.
// Which value is taken follows interaction_type() (see interaction_type.h), else the module's
// default_interaction_type: a random draw, the mode, the median, the mean or the distribution's
// deterministic_sample. Python's tensordict.nn.ProbabilisticTensorDictModule.
//
//   using namespace tdp::nn;
//   ProbabilisticTensorDictModule actor(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
//       .distribution("normal").return_log_prob(true).seed(0));
//   actor(td);                                   // writes "action" and "action_log_prob"
//   AnyDistribution d = actor->get_dist(td);     // Normal(loc: [3, 4], scale: [3, 4])
//   {
//     InteractionTypeGuard explore(InteractionType::kRandom, /*thread_local_only=*/true);
//     actor(td);                                 // a fresh draw from the seeded generator
//   }
//
// Semantics (as the reference):
// - The distribution (a registry name or a factory) is resolved when the module is built: an
//   unknown name is a construction error, forward() takes no registry lock, and re-registering
//   the name afterwards does not change an existing module.
// - in_keys: the leaf of each key names the distribution parameter; with a {parameter, key}
//   map the names are given explicitly. A registry distribution also takes a missing parameter
//   from distribution_kwargs (Normal's "scale": 1.0 becomes a tensor of ones like the others).
// - composite(distribution_map): the single in_key holds a TensorDict of per-part parameters,
//   and the module builds a dist::CompositeDistribution; out_keys default to where the parts'
//   samples go (name_map, else the distribution_map keys).
// - log-prob keys depend on composite_lp_aggregate() when the module is built: with it false,
//   one `<out_key>_log_prob` per out_key (or log_prob_keys); with it true, one summed
//   "sample_log_prob" (or log_prob_key). Changing the setting afterwards makes the log-prob
//   accessors throw, as in the reference.
// - When the input already holds the samples (forward_requires_sample(td, out, false), or a
//   SampleRequest with requires_sample false, as ProbabilisticTensorDictSequential passes when
//   an earlier module wrote them), no value is drawn but the log-prob is still written when
//   return_log_prob.
// - num_samples adds leading sample dims: the output TensorDict is expanded to
//   num_samples + batch_size and a RANDOM draw has that shape.
// - Randomness: generator(g) or seed(s) draw from one module-owned generator (shared by every
//   call and thread); generator_key(k) reads a one-element integer seed tensor at k from each
//   input, draws with a generator seeded by it, and writes the next seed back at k (a
//   JAX-style key stream). Without either, LibTorch's default generator is used.
// The module holds no mutable state besides the generator, so one instance may serve several
// threads at once (each with its own thread-local interaction type).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sdk/distributions/composite_distribution.h"
#include "sdk/distributions/registry.h"
#include "sdk/nn/tensor_spec.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/probabilistic/any_distribution.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module_interface.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

// The draws MEAN takes when a distribution has no analytic mean (tensordict's default). Named so
// that the spec validator bounds the same number a module draws.
inline constexpr int64_t kDefaultNEmpiricalEstimate = 1000;

// {distribution parameter name, TensorDict key} pairs, in order.
using DistKeyMap = std::vector<std::pair<std::string, NestedKey>>;

struct ProbabilisticTensorDictModuleOptions {
  ProbabilisticTensorDictModuleOptions(std::vector<NestedKey> in_keys,
                                       std::vector<NestedKey> out_keys = {});
  // The braced form {"loc", "scale"}; without it a braced list is ambiguous with the map form.
  ProbabilisticTensorDictModuleOptions(std::initializer_list<NestedKey> in_keys,
                                       std::vector<NestedKey> out_keys = {})
      : ProbabilisticTensorDictModuleOptions(std::vector<NestedKey>(in_keys),
                                             std::move(out_keys)) {}
  // Parameter names given explicitly; write the map's type: DistKeyMap{{"loc", "loc2"}}.
  ProbabilisticTensorDictModuleOptions(DistKeyMap in_keys_map, std::vector<NestedKey> out_keys = {});

  TORCH_ARG(std::vector<NestedKey>, in_keys);
  // The distribution parameter name for each in_key (the keys' leaves unless a map was given).
  TORCH_ARG(std::vector<std::string>, dist_keys);
  TORCH_ARG(std::vector<NestedKey>, out_keys);
  TORCH_ARG(InteractionType, default_interaction_type) = InteractionType::kDeterministic;
  // A registry name ("normal", "tanh_normal", ...) or a factory.
  TORCH_ARG(dist::DistributionBuilder, distribution) = "delta";
  TORCH_ARG(dist::DistributionKwargs, distribution_kwargs);
  // Kwargs given as tensors (a TanhNormal's per-dimension low / high): each names a parameter of
  // the distribution's signature and is passed as a constant parameter on every call (on the
  // first parameter's device). With any, the scalar kwargs that name parameters are passed as
  // constant tensors too.
  TORCH_ARG(dist::DistributionTensorKwargs, distribution_tensor_kwargs);
  // TorchRL's safe=True: after the module runs, each listed entry is projected onto its spec
  // (TensorSpec::project); the log-prob is the unprojected sample's, as in TorchRL.
  TORCH_ARG(std::vector<SpecProjection>, projections);
  TORCH_ARG(bool, return_log_prob) = false;
  // Experimental in the reference and without effect there for every built-in distribution
  // (it needs a distribution with `update`); kept for spec compatibility, logged when set.
  TORCH_ARG(bool, cache_dist) = false;
  // Draws used for MEAN when a distribution has no analytic mean.
  TORCH_ARG(int64_t, n_empirical_estimate) = kDefaultNEmpiricalEstimate;
  TORCH_ARG(std::vector<int64_t>, num_samples);
  TORCH_ARG(std::optional<at::Generator>, generator);

 public:
  // Where the log-prob goes (see the header comment for the defaults). Setters and getters are
  // written out: TORCH_ARG's std::optional setters make "key" arguments ambiguous.
  ProbabilisticTensorDictModuleOptions& log_prob_key(NestedKey key) {
    log_prob_key_ = std::move(key);
    return *this;
  }
  const std::optional<NestedKey>& log_prob_key() const { return log_prob_key_; }
  ProbabilisticTensorDictModuleOptions& log_prob_keys(std::vector<NestedKey> keys) {
    log_prob_keys_ = std::move(keys);
    return *this;
  }
  const std::optional<std::vector<NestedKey>>& log_prob_keys() const { return log_prob_keys_; }
  ProbabilisticTensorDictModuleOptions& generator(at::Generator generator) {
    generator_ = std::move(generator);
    return *this;
  }
  ProbabilisticTensorDictModuleOptions& generator_key(NestedKey key) {
    generator_key_ = std::move(key);
    return *this;
  }
  const std::optional<NestedKey>& generator_key() const { return generator_key_; }
  // A CPU generator seeded with `seed`, owned by the module (Python's generator=<int>).
  ProbabilisticTensorDictModuleOptions& seed(uint64_t seed);
  // Makes the module build a dist::CompositeDistribution over its params TensorDict.
  ProbabilisticTensorDictModuleOptions& composite(
      std::vector<std::pair<NestedKey, dist::DistributionBuilder>> distribution_map,
      dist::CompositeDistributionOptions options = {});

  bool is_composite() const { return composite_map_.has_value(); }
  const std::optional<std::vector<std::pair<NestedKey, dist::DistributionBuilder>>>&
  composite_map() const {
    return composite_map_;
  }
  const dist::CompositeDistributionOptions& composite_options() const {
    return composite_options_;
  }

 private:
  std::optional<NestedKey> log_prob_key_;
  std::optional<std::vector<NestedKey>> log_prob_keys_;
  std::optional<NestedKey> generator_key_;
  std::optional<std::vector<std::pair<NestedKey, dist::DistributionBuilder>>> composite_map_;
  dist::CompositeDistributionOptions composite_options_;
};

class ProbabilisticTensorDictModuleImpl : public TensorDictModuleBase,
                                          public ProbabilisticModuleInterface {
 public:
  explicit ProbabilisticTensorDictModuleImpl(ProbabilisticTensorDictModuleOptions options);

  // forward() with `requires_sample` false reuses the samples already in `tensordict` (only
  // the log-prob is computed, when return_log_prob); Python's forward(_requires_sample=...).
  // A separate name: an overloaded forward() would break the module holder's operator().
  TensorDict forward_requires_sample(const TensorDict& tensordict,
                                     const std::optional<TensorDict>& tensordict_out,
                                     bool requires_sample);
  // forward() with the choices of `request` (see probabilistic_module_interface.h).
  TensorDict forward_with_request(const TensorDict& tensordict, const SampleRequest& request,
                                  const std::optional<TensorDict>& tensordict_out = std::nullopt) override;

  // The distribution built from `tensordict`'s in_keys. Throws tdp::KeyError naming the
  // module when a parameter is missing.
  AnyDistribution get_dist(const TensorDict& tensordict) const override;
  AnyDistribution build_dist_from_params(const TensorDict& tensordict) const {
    return get_dist(tensordict);
  }
  // The log-probability of the samples in `tensordict` under `dist` (default get_dist):
  // a tensor, or for a composite with composite_lp_aggregate() false a TensorDict keyed by
  // log_prob_keys().
  LogProb log_prob(const TensorDict& tensordict,
                   const std::optional<AnyDistribution>& dist = std::nullopt) const override;

  // The value `dist` gives under `type` (nullopt: interaction_type(), else the default),
  // drawn with `generator` when random. A tensor, or a TensorDict for a composite.
  std::variant<at::Tensor, TensorDict> dist_sample(
      const AnyDistribution& dist, std::optional<InteractionType> type = std::nullopt,
      const std::optional<at::Generator>& generator = std::nullopt) const;

  // Where the log-prob is written. Throw std::runtime_error when composite_lp_aggregate()
  // differs from its value at construction, or (log_prob_key, aggregation off) when there is
  // not exactly one log-prob key.
  const NestedKey& log_prob_key() const;
  std::vector<NestedKey> log_prob_keys() const override;
  std::vector<NestedKey> dist_params_keys() const override { return in_keys(); }
  std::vector<NestedKey> dist_sample_keys() const override { return sample_keys_; }
  std::vector<int64_t> num_samples() const override { return options_.num_samples(); }
  // Always set for a module.
  std::optional<InteractionType> default_interaction_type() const override {
    return options_.default_interaction_type();
  }
  const ProbabilisticTensorDictModuleOptions& options() const { return options_; }
  ProbabilisticTensorDictModuleImpl* as_module() override { return this; }

 protected:
  TensorDict forward_impl(TensorDict tensordict,
                          const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  // Throws std::invalid_argument naming the module when this module scores its values
  // (return_log_prob) and `mean` is no action of `dist` (a discrete distribution with an
  // undefined, NaN mean: Categorical).
  void check_mean_is_an_action(const dist::Distribution& dist, const at::Tensor& mean) const;
  // Resolves the distribution (or the composite's parts) in the registry and splits
  // distribution_kwargs into kwargs and constant parameters, once, at construction.
  void bind_distribution();
  // The generator for this call (own, else generator_key, else the request's) and, for
  // generator_key, the seed stream to advance after it.
  std::optional<at::Generator> resolve_generator(const TensorDict& tensordict,
                                                 const std::optional<at::Generator>& scoped) const;
  // `tensordict` is a handle: the next seed lands in the caller's TensorDict.
  void write_back_seed(TensorDict tensordict, const at::Generator& generator) const;
  void check_aggregate(const char* what) const;
  // The parameters read from `tensordict` at in_keys (plus constant ones from
  // distribution_kwargs) and the single distribution built from them; get_dist() without the
  // AnyDistribution around it.
  dist::DistributionPtr build_single(const TensorDict& tensordict) const;
  // build_single() when distribution_kwargs name parameters (Normal's scale=1): those become
  // constant tensors shaped like the first parameter.
  dist::DistributionPtr build_with_constant_params(dist::ParamTensors tensors) const;
  // The value a single distribution gives under `type`: dist_sample() for one distribution.
  at::Tensor value_of(const dist::Distribution& dist, InteractionType type, const dist::GeneratorOpt& generator) const;
  // The common step: one distribution, drawn and scored into the caller's TensorDict.
  // forward_with_request() takes it when draws_in_place() holds; everything else goes the
  // general way, through the same build_single() and value_of().
  bool draws_in_place(const SampleRequest& request, const std::optional<TensorDict>& tensordict_out) const {
    return single_in_place_ && request.requires_sample && !tensordict_out.has_value() && !has_out_keys_selection();
  }
  TensorDict draw_in_place(const TensorDict& tensordict, const SampleRequest& request) const;
  // The one log-prob path. A single distribution: the log-prob of the tensor `sample`. A
  // composite: each part's log-prob of its entry of the TensorDict `sample`, written into
  // `parts_out` (a new TensorDict when null and not aggregating) at `<part>_log_prob` when
  // composite_lp_aggregate() is on, else at the part's log_prob_keys() entry; returns their
  // sum over the feature dims when aggregating, else the per-part TensorDict.
  LogProb score(const AnyDistribution& dist, const std::variant<at::Tensor, TensorDict>& sample,
                TensorDict* parts_out) const;

  ProbabilisticTensorDictModuleOptions options_;
  std::vector<NestedKey> sample_keys_;
  // distribution_kwargs split once (bind_distribution): passed as kwargs, or turned
  // into constant parameter tensors shaped like the first parameter.
  dist::DistributionKwargs build_kwargs_;
  std::vector<std::pair<std::string, c10::Scalar>> kwargs_as_params_;
  // distribution_tensor_kwargs(), in name order.
  std::vector<std::pair<std::string, at::Tensor>> tensor_kwargs_;
  // The distribution bound to dist_keys() and build_kwargs_ (bind_distribution), which
  // build_single() makes from the tensors by position; unset for a composite and when
  // distribution_kwargs name parameters (build_with_constant_params()).
  std::optional<dist::BoundDistribution> bound_;
  std::optional<NestedKey> log_prob_key_;
  std::optional<std::vector<NestedKey>> log_prob_keys_;
  // Where a composite part's log-prob goes when not aggregating: {sample key, log-prob key}
  // for the sample keys whose log_prob_keys() entry is not `<sample key>_log_prob`.
  std::vector<std::pair<NestedKey, NestedKey>> part_log_prob_keys_;
  bool aggregate_at_init_;
  // Neither a composite, nor num_samples, nor generator_key: see draws_in_place().
  bool single_in_place_ = false;
};

TORCH_MODULE(ProbabilisticTensorDictModule);

}  // namespace tdp::nn
