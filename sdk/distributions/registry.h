// DistributionRegistry: builds distributions by name from named parameter tensors plus scalar
// keyword arguments, the way policy specs and CompositeDistribution name them. The global
// registry knows normal, independent_normal, tanh_normal, categorical, one_hot_categorical,
// bernoulli, beta, uniform, delta, truncated_normal (tensordict's), tanh_delta and
// torchrl_truncated_normal (TorchRL's); users register their own.
//
// A kwarg that the Python class also takes as a tensor (TanhNormal's, TanhDelta's and TorchRL
// TruncatedNormal's low / high, per action dim or per agent) is also a parameter of the
// signature: given as a tensor it is passed among the params (DistributionTensorKwargs, which a
// ProbabilisticTensorDictModule passes that way), given as a number it stays a kwarg.
//
//   auto d = tdp::dist::make_distribution("tanh_normal", {{"loc", loc}, {"scale", scale}},
//                                         {{"low", -2.0}, {"high", 2.0}, {"tanh_loc", true}});
//   tdp::dist::DistributionRegistry::global().register_distribution(
//       "laplace_like", {{{"loc", "scale"}}, {}},
//       [](const tdp::dist::Params& p, const tdp::dist::DistributionKwargs&) { return make_mine(p); });
//
// Every name accepts the kwarg `validate_args` (bool). An unknown name, a missing or extra
// parameter, or an unknown kwarg throws std::invalid_argument naming the distribution and
// what it expects. The registry is safe to use and extend from several threads. Code that makes
// the same distribution on every call binds it once (find(name).bind(param_names, kwargs)): the
// BoundDistribution takes the tensors in the caller's order and looks no name up.
//
// A factory takes its parameters by name (Params) or by position (ParamTensors, in the order of
// the signature's param_names()); the registry calls every factory by position, turning
// positions into names for a by-name one. The built-in distributions are registered by position,
// so that a module building one on every forward (at batch 1, a measurable share of an actor
// step) handles no strings.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sdk/distributions/distribution.h"

namespace tdp::dist {

// Parameter tensors by name ("loc", "scale", "logits", ...), in name order and with the lookups
// of a std::map<std::string, at::Tensor>: what specs, composites and by-name factories use (a
// module's forward passes its tensors by position instead, see BoundDistribution). A sorted
// inline array holds up to four without allocating, where a map allocates a node per parameter.
class Params {
 public:
  using value_type = std::pair<std::string, at::Tensor>;
  using iterator = value_type*;
  using const_iterator = const value_type*;

  Params() = default;
  // As a std::map: a name given twice keeps its first tensor.
  Params(std::initializer_list<value_type> entries) {
    for (const value_type& entry : entries) emplace(entry.first, entry.second);
  }

  // Adds `value` under `name` unless the name is present; the entry and whether it was added.
  std::pair<iterator, bool> emplace(std::string name, at::Tensor value) {
    iterator it = lower_bound(name);
    if (it != end() && it->first == name) return {it, false};
    const auto index = it - begin();
    entries_.insert(entries_.begin() + index, value_type(std::move(name), std::move(value)));
    return {begin() + index, true};
  }
  // The tensor under `name`, added (undefined) when absent.
  at::Tensor& operator[](const std::string& name) { return emplace(name, at::Tensor()).first->second; }
  // Throws std::out_of_range when `name` is absent.
  const at::Tensor& at(std::string_view name) const {
    const_iterator it = find(name);
    if (it == end()) throw std::out_of_range("Params: no parameter '" + std::string(name) + "'");
    return it->second;
  }
  const_iterator find(std::string_view name) const {
    const_iterator it = const_cast<Params*>(this)->lower_bound(name);
    return it != end() && it->first == name ? it : end();
  }
  size_t count(std::string_view name) const { return find(name) != end() ? 1 : 0; }

  iterator begin() { return entries_.data(); }
  iterator end() { return entries_.data() + entries_.size(); }
  const_iterator begin() const { return entries_.data(); }
  const_iterator end() const { return entries_.data() + entries_.size(); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  iterator lower_bound(std::string_view name) {
    return std::lower_bound(begin(), end(), name,
                            [](const value_type& entry, std::string_view key) { return entry.first < key; });
  }

  c10::SmallVector<value_type, 4> entries_;
};

// Scalar keyword arguments by name ("upscale", "tanh_loc", "atol", ...).
// (std::less<>: looked up by string_view, so a factory's literal key builds no string.)
using DistributionKwargs = std::map<std::string, c10::Scalar, std::less<>>;
// Tensor keyword arguments by name (a TanhNormal's per-dimension "low" / "high"): passed to the
// registry as parameters of the same name (see the header comment).
using DistributionTensorKwargs = std::map<std::string, at::Tensor, std::less<>>;
using DistributionFactory = std::function<DistributionPtr(const Params&, const DistributionKwargs&)>;

// A distribution's parameter tensors by position: entry i is the parameter named
// DistributionSignature::param_names()[i]; an undefined tensor stands for one not given
// (categorical's probs when logits are given).
using ParamTensors = c10::ArrayRef<at::Tensor>;
using PositionalFactory = std::function<DistributionPtr(ParamTensors, const DistributionKwargs&)>;

// A by-name factory called by position: each defined tensor is passed under the name of its
// position in `names`.
PositionalFactory by_position(std::vector<std::string> names, DistributionFactory factory);

// What a registered name accepts.
struct DistributionSignature {
  // Alternative sets of parameter names; the given params must equal one of them
  // (categorical: {{"logits"}, {"probs"}}).
  std::vector<std::vector<std::string>> param_sets;
  // Accepted kwargs besides validate_args.
  std::vector<std::string> kwargs;

  // "{loc, scale}" or "{logits} or {probs}", for error messages.
  std::string params_to_string() const;
  // Every name of param_sets once, in order of first appearance: the positions of ParamTensors
  // ({loc, scale} for normal; {logits, probs} for categorical).
  std::vector<std::string> param_names() const;
};

// A registered distribution bound once to the names of the parameters its caller passes on
// every call (in the caller's order) and to the kwargs: make() takes the tensors in that order
// and looks no name up. Made by RegisteredDistribution::bind() (and DistributionBuilder::bind()).
// Names and kwargs that do not fit the signature are reported by make(), on each call, with the
// registry's message, as RegisteredDistribution::make() does.
class BoundDistribution {
 public:
  // `params[i]` is the parameter named param_names[i] of the bind; all defined.
  DistributionPtr make(ParamTensors params) const;

 private:
  friend class RegisteredDistribution;
  friend class DistributionBuilder;
  BoundDistribution(std::string name, PositionalFactory factory, std::vector<size_t> positions, size_t num_positions,
                    DistributionKwargs kwargs);
  std::string name_;  // the registered name, for a factory returning null
  PositionalFactory factory_;
  // Per parameter of the caller, its position among the factory's; empty when they are the same.
  std::vector<size_t> positions_;
  size_t num_positions_ = 0;
  DistributionKwargs kwargs_;
};

// One registry entry, resolved once. make() checks the params and kwargs against the signature
// and calls the factory with no lock; bind() checks them once for a caller that passes the same
// names on every call (a module binds its distribution when it is built). It keeps the entry it
// was resolved to: registering or replacing the name afterwards does not change it.
class RegisteredDistribution {
 public:
  const std::string& name() const;
  const DistributionSignature& signature() const;
  // Throws std::invalid_argument naming the distribution for a missing or extra parameter, an
  // undefined tensor or an unknown kwarg.
  DistributionPtr make(const Params& params, const DistributionKwargs& kwargs = {}) const;
  // Whether parameters with these names and these kwargs fit the signature: what make() checks
  // on every call apart from the tensors being defined.
  bool accepts(const std::vector<std::string>& param_names, const DistributionKwargs& kwargs) const;
  // This distribution for a caller passing parameters named `param_names`, in that order, and
  // `kwargs`, on every call: accepts() is checked here, once.
  BoundDistribution bind(const std::vector<std::string>& param_names, const DistributionKwargs& kwargs) const;

 private:
  friend class DistributionRegistry;
  struct Entry;
  explicit RegisteredDistribution(std::shared_ptr<const Entry> entry) : entry_(std::move(entry)) {}
  std::shared_ptr<const Entry> entry_;
};

class DistributionRegistry {
 public:
  // An empty registry.
  DistributionRegistry();
  ~DistributionRegistry();
  // The process-wide registry, holding the built-in distributions.
  static DistributionRegistry& global();

  // Throws std::invalid_argument when `name` is taken (use replace to override on purpose).
  void register_distribution(const std::string& name, DistributionSignature signature,
                             DistributionFactory factory);
  void register_distribution(const std::string& name, DistributionSignature signature, PositionalFactory factory);
  void replace(const std::string& name, DistributionSignature signature,
               DistributionFactory factory);
  void replace(const std::string& name, DistributionSignature signature, PositionalFactory factory);
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;
  DistributionSignature signature(const std::string& name) const;
  // The entry registered under `name` now. Throws std::invalid_argument listing the registered
  // names when there is none.
  RegisteredDistribution find(const std::string& name) const;

  // find(name).make(params, kwargs).
  DistributionPtr make(const std::string& name, const Params& params,
                       const DistributionKwargs& kwargs = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// DistributionRegistry::global().make(...).
DistributionPtr make_distribution(const std::string& name, const Params& params,
                                  const DistributionKwargs& kwargs = {});

// Kwarg readers for factories: the value under `key`, or `fallback` when absent. Throw
// std::invalid_argument naming `distribution` when the scalar has the wrong kind.
double kwarg_double(const DistributionKwargs& kwargs, std::string_view key, double fallback,
                    std::string_view distribution);
int64_t kwarg_int(const DistributionKwargs& kwargs, std::string_view key, int64_t fallback,
                  std::string_view distribution);
bool kwarg_bool(const DistributionKwargs& kwargs, std::string_view key, bool fallback, std::string_view distribution);
// validate_args when given, else nullopt (the process default).
c10::optional<bool> kwarg_validate_args(const DistributionKwargs& kwargs, std::string_view distribution);

}  // namespace tdp::dist
