#include "sdk/distributions/registry.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "sdk/distributions/bernoulli.h"
#include "sdk/distributions/beta.h"
#include "sdk/distributions/categorical.h"
#include "sdk/distributions/delta.h"
#include "sdk/distributions/independent.h"
#include "sdk/distributions/masked_categorical.h"
#include "sdk/distributions/normal.h"
#include "sdk/distributions/one_hot_categorical.h"
#include "sdk/distributions/tanh_delta.h"
#include "sdk/distributions/tanh_normal.h"
#include "sdk/distributions/torchrl_truncated_normal.h"
#include "sdk/distributions/truncated_normal.h"
#include "sdk/distributions/uniform.h"

namespace tdp::dist {
namespace {

// A bound of tanh_normal, tanh_delta or torchrl_truncated_normal: the tensor among the params
// (per-dimension or per-agent bounds) when given, else the scalar kwarg `key`, else
// `fallback`; `set` takes either (the options' tensor and number overloads).
template <typename Set>
void set_bound(const at::Tensor& given, const DistributionKwargs& k, const char* key, double fallback,
               const std::string& name, Set set) {
  if (given.defined()) {
    set(given);
  } else {
    set(kwarg_double(k, key, fallback, name));
  }
}

std::string join(const std::vector<std::string>& names) {
  std::ostringstream out;
  out << "{";
  for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << names[i];
  out << "}";
  return out.str();
}

template <typename Map>
std::vector<std::string> keys_of(const Map& map) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : map) keys.push_back(key);
  return keys;
}

// A bound given as a tensor param or as a scalar kwarg (truncated_normal's a and b).
at::Tensor bound(const at::Tensor& param, const DistributionKwargs& kwargs, const std::string& key,
                 const at::Tensor& like, const std::string& distribution) {
  if (param.defined()) return param;
  auto kw = kwargs.find(key);
  if (kw == kwargs.end()) {
    throw std::invalid_argument(distribution + ": missing bound '" + key +
                                "': pass it as a parameter tensor or a scalar kwarg");
  }
  return at::scalar_tensor(kwarg_double(kwargs, key, 0.0, distribution), like.options());
}

MaskedCategoricalOptions masked_options(const DistributionKwargs& kwargs, const std::string& distribution) {
  MaskedCategoricalOptions options;
  options.neg_inf = kwarg_double(kwargs, "neg_inf", options.neg_inf, distribution);
  options.use_cross_entropy = kwarg_bool(kwargs, "use_cross_entropy", options.use_cross_entropy, distribution);
  return options;
}

// By position, in the order of each signature's param_names().
void register_builtins(DistributionRegistry& registry) {
  using Factory = PositionalFactory;
  registry.register_distribution("normal", {{{"loc", "scale"}}, {}},
                                 Factory([](ParamTensors p, const DistributionKwargs& k) {
                                   return std::make_shared<Normal>(p[0], p[1], kwarg_validate_args(k, "normal"));
                                 }));
  registry.register_distribution("independent_normal", {{{"loc", "scale"}}, {"event_dims", "tanh_loc", "upscale"}},
                                 Factory([](ParamTensors p, const DistributionKwargs& k) -> DistributionPtr {
                                   // TorchRL's IndependentNormal: optional tanh squashing of loc, one event dim
                                   // default.
                                   const std::string name = "independent_normal";
                                   at::Tensor loc = p[0];
                                   if (kwarg_bool(k, "tanh_loc", false, name)) {
                                     const double upscale = kwarg_double(k, "upscale", 5.0, name);
                                     loc = upscale * (loc / upscale).tanh();
                                   }
                                   auto validate = kwarg_validate_args(k, name);
                                   return std::make_shared<Independent>(std::make_shared<Normal>(loc, p[1], validate),
                                                                        kwarg_int(k, "event_dims", 1, name), validate);
                                 }));
  registry.register_distribution(
      "tanh_normal",
      {{{"loc", "scale"}, {"loc", "scale", "low", "high"}, {"loc", "scale", "low"}, {"loc", "scale", "high"}},
       {"upscale", "low", "high", "event_dims", "tanh_loc", "safe_tanh"}},
      Factory([](ParamTensors p, const DistributionKwargs& k) {
        const std::string name = "tanh_normal";
        TanhNormalOptions options;
        options.upscale(kwarg_double(k, "upscale", 5.0, name))
            .tanh_loc(kwarg_bool(k, "tanh_loc", false, name))
            .safe_tanh(kwarg_bool(k, "safe_tanh", true, name));
        set_bound(p[2], k, "low", -1.0, name, [&](auto bound) { options.low(bound); });
        set_bound(p[3], k, "high", 1.0, name, [&](auto bound) { options.high(bound); });
        if (k.count("event_dims")) options.event_dims(kwarg_int(k, "event_dims", 1, name));
        if (auto v = kwarg_validate_args(k, name)) options.validate_args(*v);
        return std::make_shared<TanhNormal>(p[0], p[1], options);
      }));
  // {logits} or {probs}: p[0] is logits, p[1] probs, one of them undefined.
  registry.register_distribution(
      "categorical", {{{"logits"}, {"probs"}}, {}}, Factory([](ParamTensors p, const DistributionKwargs& k) {
        return std::make_shared<Categorical>(p[1], p[0], kwarg_validate_args(k, "categorical"));
      }));
  registry.register_distribution(
      "one_hot_categorical", {{{"logits"}, {"probs"}}, {}}, Factory([](ParamTensors p, const DistributionKwargs& k) {
        return std::make_shared<OneHotCategorical>(p[1], p[0], kwarg_validate_args(k, "one_hot_categorical"));
      }));
  // TorchRL's MaskedCategorical / MaskedOneHotCategorical with a dense boolean mask: p[0] is
  // logits, p[1] the mask, p[2] probs (logits or probs undefined).
  registry.register_distribution(
      "masked_categorical", {{{"logits", "mask"}, {"probs", "mask"}}, {"neg_inf", "use_cross_entropy"}},
      Factory([](ParamTensors p, const DistributionKwargs& k) {
        return std::make_shared<MaskedCategorical>(p[2], p[0], p[1], masked_options(k, "masked_categorical"));
      }));
  registry.register_distribution("masked_one_hot_categorical", {{{"logits", "mask"}, {"probs", "mask"}}, {"neg_inf"}},
                                 Factory([](ParamTensors p, const DistributionKwargs& k) {
                                   return std::make_shared<MaskedOneHotCategorical>(
                                       p[2], p[0], p[1], masked_options(k, "masked_one_hot_categorical"));
                                 }));
  registry.register_distribution("bernoulli", {{{"logits"}, {"probs"}}, {}},
                                 Factory([](ParamTensors p, const DistributionKwargs& k) {
                                   return std::make_shared<Bernoulli>(p[1], p[0], kwarg_validate_args(k, "bernoulli"));
                                 }));
  registry.register_distribution("beta", {{{"concentration1", "concentration0"}}, {}},
                                 Factory([](ParamTensors p, const DistributionKwargs& k) {
                                   return std::make_shared<Beta>(p[0], p[1], kwarg_validate_args(k, "beta"));
                                 }));
  registry.register_distribution("uniform", {{{"low", "high"}}, {}},
                                 Factory([](ParamTensors p, const DistributionKwargs& k) {
                                   return std::make_shared<Uniform>(p[0], p[1], kwarg_validate_args(k, "uniform"));
                                 }));
  registry.register_distribution(
      "delta", {{{"param"}}, {"atol", "rtol"}}, Factory([](ParamTensors p, const DistributionKwargs& k) {
        return std::make_shared<Delta>(p[0], kwarg_double(k, "atol", 1e-6, "delta"),
                                       kwarg_double(k, "rtol", 1e-6, "delta"), std::vector<int64_t>{},
                                       std::vector<int64_t>{}, kwarg_validate_args(k, "delta"));
      }));
  registry.register_distribution(
      "tanh_delta",
      {{{"param"}, {"param", "low"}, {"param", "high"}, {"param", "low", "high"}},
       {"low", "high", "event_dims", "atol", "rtol", "safe"}},
      Factory([](ParamTensors p, const DistributionKwargs& k) {
        const std::string name = "tanh_delta";
        TanhDeltaOptions options;
        set_bound(p[1], k, "low", -1.0, name, [&](auto bound) { options.low(bound); });
        set_bound(p[2], k, "high", 1.0, name, [&](auto bound) { options.high(bound); });
        options.event_dims(kwarg_int(k, "event_dims", 1, name))
            .atol(kwarg_double(k, "atol", 1e-6, name))
            .rtol(kwarg_double(k, "rtol", 1e-6, name))
            .safe(kwarg_bool(k, "safe", true, name));
        return std::make_shared<TanhDelta>(p[0], options);
      }));
  registry.register_distribution(
      "torchrl_truncated_normal",
      {{{"loc", "scale"}, {"loc", "scale", "low", "high"}, {"loc", "scale", "low"}, {"loc", "scale", "high"}},
       {"upscale", "low", "high", "tanh_loc"}},
      Factory([](ParamTensors p, const DistributionKwargs& k) {
        const std::string name = "torchrl_truncated_normal";
        TorchRLTruncatedNormalOptions options;
        set_bound(p[2], k, "low", -1.0, name, [&](auto bound) { options.low(bound); });
        set_bound(p[3], k, "high", 1.0, name, [&](auto bound) { options.high(bound); });
        options.upscale(kwarg_double(k, "upscale", 5.0, name)).tanh_loc(kwarg_bool(k, "tanh_loc", false, name));
        return std::make_shared<TorchRLTruncatedNormal>(p[0], p[1], options);
      }));
  registry.register_distribution("truncated_normal", {{{"loc", "scale", "a", "b"}, {"loc", "scale"}}, {"a", "b"}},
                                 Factory([](ParamTensors p, const DistributionKwargs& k) {
                                   const std::string name = "truncated_normal";
                                   return std::make_shared<TruncatedNormal>(p[0], p[1], bound(p[2], k, "a", p[0], name),
                                                                            bound(p[3], k, "b", p[0], name),
                                                                            kwarg_validate_args(k, name));
                                 }));
}

const c10::Scalar* find_kwarg(const DistributionKwargs& kwargs, std::string_view key) {
  auto it = kwargs.find(key);
  return it == kwargs.end() ? nullptr : &it->second;
}

[[noreturn]] void bad_kwarg(std::string_view distribution, std::string_view key, const char* expected,
                            const c10::Scalar& value) {
  std::ostringstream out;
  out << distribution << ": kwarg '" << key << "' must be " << expected << ", got " << value;
  throw std::invalid_argument(out.str());
}

}  // namespace

PositionalFactory by_position(std::vector<std::string> names, DistributionFactory factory) {
  return
      [names = std::move(names), factory = std::move(factory)](ParamTensors tensors, const DistributionKwargs& kwargs) {
        Params params;
        for (size_t i = 0; i < names.size(); ++i) {
          if (tensors[i].defined()) params.emplace(names[i], tensors[i]);
        }
        return factory(params, kwargs);
      };
}

std::string DistributionSignature::params_to_string() const {
  std::string out;
  for (size_t i = 0; i < param_sets.size(); ++i) {
    std::vector<std::string> sorted = param_sets[i];
    std::sort(sorted.begin(), sorted.end());
    out += (i ? " or " : "") + join(sorted);
  }
  return out;
}

std::vector<std::string> DistributionSignature::param_names() const {
  std::vector<std::string> names;
  for (const auto& set : param_sets) {
    for (const std::string& name : set) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

struct RegisteredDistribution::Entry {
  std::string name;
  DistributionSignature signature;
  std::vector<std::string> param_names;  // signature.param_names(): the factory's positions
  PositionalFactory factory;
};

const std::string& RegisteredDistribution::name() const { return entry_->name; }
const DistributionSignature& RegisteredDistribution::signature() const { return entry_->signature; }

struct DistributionRegistry::Impl {
  // A std::shared_mutex (pthread's rwlock), not absl::Mutex: ThreadSanitizer intercepts pthread
  // but cannot see inside the uninstrumented libabsl from Debian, and would report every
  // registration as a race.
  mutable std::shared_mutex mutex;
  // Guarded by `mutex`. Entries are immutable once registered (replace swaps the pointer), so a
  // RegisteredDistribution shares one without copying it and without the lock.
  std::map<std::string, RegisteredDistribution, std::less<>> entries;

  // Called with `mutex` held exclusively.
  void put(const std::string& name, DistributionSignature signature, PositionalFactory factory) {
    std::vector<std::string> param_names = signature.param_names();
    entries.insert_or_assign(
        name,
        RegisteredDistribution(std::make_shared<const RegisteredDistribution::Entry>(
            RegisteredDistribution::Entry{name, std::move(signature), std::move(param_names), std::move(factory)})));
  }
};

DistributionRegistry::DistributionRegistry() : impl_(std::make_unique<Impl>()) {}
DistributionRegistry::~DistributionRegistry() = default;

DistributionRegistry& DistributionRegistry::global() {
  static DistributionRegistry* registry = [] {
    auto* r = new DistributionRegistry();
    register_builtins(*r);
    return r;
  }();
  return *registry;
}

void DistributionRegistry::register_distribution(const std::string& name,
                                                 DistributionSignature signature,
                                                 DistributionFactory factory) {
  if (!factory) throw std::invalid_argument("register_distribution('" + name + "'): null factory");
  std::vector<std::string> names = signature.param_names();
  register_distribution(name, std::move(signature), by_position(std::move(names), std::move(factory)));
}

void DistributionRegistry::register_distribution(const std::string& name, DistributionSignature signature,
                                                 PositionalFactory factory) {
  if (name.empty()) throw std::invalid_argument("register_distribution: empty name");
  if (!factory) throw std::invalid_argument("register_distribution('" + name + "'): null factory");
  if (signature.param_sets.empty()) {
    throw std::invalid_argument("register_distribution('" + name +
                                "'): the signature needs at least one parameter set");
  }
  std::unique_lock lock(impl_->mutex);
  if (impl_->entries.count(name)) {
    throw std::invalid_argument("register_distribution: '" + name +
                                "' is already registered (use replace to override it)");
  }
  impl_->put(name, std::move(signature), std::move(factory));
}

void DistributionRegistry::replace(const std::string& name, DistributionSignature signature,
                                   DistributionFactory factory) {
  if (!factory) throw std::invalid_argument("replace('" + name + "'): null factory");
  std::vector<std::string> names = signature.param_names();
  replace(name, std::move(signature), by_position(std::move(names), std::move(factory)));
}

void DistributionRegistry::replace(const std::string& name, DistributionSignature signature,
                                   PositionalFactory factory) {
  if (!factory) throw std::invalid_argument("replace('" + name + "'): null factory");
  std::unique_lock lock(impl_->mutex);
  impl_->put(name, std::move(signature), std::move(factory));
}

bool DistributionRegistry::contains(const std::string& name) const {
  std::shared_lock lock(impl_->mutex);
  return impl_->entries.count(name) > 0;
}

std::vector<std::string> DistributionRegistry::names() const {
  std::shared_lock lock(impl_->mutex);
  return keys_of(impl_->entries);
}

DistributionSignature DistributionRegistry::signature(const std::string& name) const {
  return find(name).signature();
}

RegisteredDistribution DistributionRegistry::find(const std::string& name) const {
  std::shared_lock lock(impl_->mutex);
  auto it = impl_->entries.find(name);
  if (it == impl_->entries.end()) {
    throw std::invalid_argument("unknown distribution '" + name + "'; registered: " + join(keys_of(impl_->entries)));
  }
  return it->second;
}

DistributionPtr DistributionRegistry::make(const std::string& name, const Params& params,
                                           const DistributionKwargs& kwargs) const {
  return find(name).make(params, kwargs);
}

namespace {

// The one call of a registered factory: by make() and by a bound distribution.
DistributionPtr call_factory(const std::string& name, const PositionalFactory& factory, ParamTensors tensors,
                             const DistributionKwargs& kwargs) {
  DistributionPtr dist = factory(tensors, kwargs);
  if (!dist) throw std::runtime_error("distribution '" + name + "': its factory returned null");
  return dist;
}

// Whether `count` distinct names, of which `has` tells membership, equal one of the parameter
// sets: equal sizes plus membership is set equality, checked without building sets.
template <typename Has>
bool fits_a_param_set(const DistributionSignature& signature, size_t count, Has has) {
  return std::any_of(signature.param_sets.begin(), signature.param_sets.end(),
                     [&](const auto& set) { return set.size() == count && std::all_of(set.begin(), set.end(), has); });
}

const std::string* unknown_kwarg(const DistributionSignature& signature, const DistributionKwargs& kwargs) {
  for (const auto& [key, value] : kwargs) {
    const auto& allowed = signature.kwargs;
    if (key != "validate_args" && std::find(allowed.begin(), allowed.end(), key) == allowed.end()) return &key;
  }
  return nullptr;
}

}  // namespace

bool RegisteredDistribution::accepts(const std::vector<std::string>& param_names,
                                     const DistributionKwargs& kwargs) const {
  std::vector<std::string> names = param_names;
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) return false;
  const auto has = [&](const std::string& key) { return std::binary_search(names.begin(), names.end(), key); };
  return fits_a_param_set(entry_->signature, names.size(), has) && unknown_kwarg(entry_->signature, kwargs) == nullptr;
}

DistributionPtr RegisteredDistribution::make(const Params& params, const DistributionKwargs& kwargs) const {
  const std::string& name = entry_->name;
  // Params is ordered by name and has no duplicates.
  if (!fits_a_param_set(entry_->signature, params.size(),
                        [&](const std::string& key) { return params.count(key) > 0; })) {
    throw std::invalid_argument(name + ": expected parameters " +
                                entry_->signature.params_to_string() + ", got " + join(keys_of(params)));
  }
  for (const auto& [key, value] : params) {
    if (!value.defined()) {
      throw std::invalid_argument(name + ": parameter '" + key + "' is an undefined tensor");
    }
  }
  if (const std::string* key = unknown_kwarg(entry_->signature, kwargs)) {
    std::vector<std::string> accepted = entry_->signature.kwargs;
    accepted.push_back("validate_args");
    throw std::invalid_argument(name + ": unexpected kwarg '" + *key + "'; accepted kwargs: " + join(accepted));
  }
  const std::vector<std::string>& names = entry_->param_names;
  c10::SmallVector<at::Tensor, 4> tensors(names.size());
  for (const auto& [key, value] : params) {
    tensors[static_cast<size_t>(std::find(names.begin(), names.end(), key) - names.begin())] = value;
  }
  return call_factory(name, entry_->factory, tensors, kwargs);
}

BoundDistribution RegisteredDistribution::bind(const std::vector<std::string>& param_names,
                                               const DistributionKwargs& kwargs) const {
  const std::vector<std::string>& names = entry_->param_names;
  if (!accepts(param_names, kwargs)) {
    // Checked by name on each call, which throws what make() throws for these names.
    return BoundDistribution(entry_->name,
                             by_position(param_names,
                                         [registered = *this](const Params& params, const DistributionKwargs& kwargs) {
                                           return registered.make(params, kwargs);
                                         }),
                             {}, param_names.size(), kwargs);
  }
  std::vector<size_t> positions;
  for (const std::string& name : param_names) {
    positions.push_back(static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin()));
  }
  bool same = positions.size() == names.size();
  for (size_t i = 0; same && i < positions.size(); ++i) same = positions[i] == i;
  if (same) positions.clear();
  return BoundDistribution(entry_->name, entry_->factory, std::move(positions), names.size(), kwargs);
}

BoundDistribution::BoundDistribution(std::string name, PositionalFactory factory, std::vector<size_t> positions,
                                     size_t num_positions, DistributionKwargs kwargs)
    : name_(std::move(name)),
      factory_(std::move(factory)),
      positions_(std::move(positions)),
      num_positions_(num_positions),
      kwargs_(std::move(kwargs)) {}

DistributionPtr BoundDistribution::make(ParamTensors params) const {
  if (positions_.empty()) return call_factory(name_, factory_, params, kwargs_);
  c10::SmallVector<at::Tensor, 4> ordered(num_positions_);
  for (size_t i = 0; i < positions_.size(); ++i) ordered[positions_[i]] = params[i];
  return call_factory(name_, factory_, ordered, kwargs_);
}

DistributionPtr make_distribution(const std::string& name, const Params& params,
                                  const DistributionKwargs& kwargs) {
  return DistributionRegistry::global().make(name, params, kwargs);
}

double kwarg_double(const DistributionKwargs& kwargs, std::string_view key, double fallback,
                    std::string_view distribution) {
  const c10::Scalar* v = find_kwarg(kwargs, key);
  if (v == nullptr) return fallback;
  if (v->isBoolean() || v->isComplex()) bad_kwarg(distribution, key, "a real number", *v);
  return v->toDouble();
}

int64_t kwarg_int(const DistributionKwargs& kwargs, std::string_view key, int64_t fallback,
                  std::string_view distribution) {
  const c10::Scalar* v = find_kwarg(kwargs, key);
  if (v == nullptr) return fallback;
  if (v->isIntegral(/*includeBool=*/false)) return v->toLong();
  if (v->isFloatingPoint() && std::floor(v->toDouble()) == v->toDouble()) return v->toLong();
  bad_kwarg(distribution, key, "an integer", *v);
}

bool kwarg_bool(const DistributionKwargs& kwargs, std::string_view key, bool fallback, std::string_view distribution) {
  const c10::Scalar* v = find_kwarg(kwargs, key);
  if (v == nullptr) return fallback;
  if (v->isBoolean()) return v->toBool();
  if (v->isIntegral(false) && (v->toLong() == 0 || v->toLong() == 1)) return v->toLong() == 1;
  bad_kwarg(distribution, key, "a bool", *v);
}

c10::optional<bool> kwarg_validate_args(const DistributionKwargs& kwargs, std::string_view distribution) {
  if (find_kwarg(kwargs, "validate_args") == nullptr) return c10::nullopt;
  return kwarg_bool(kwargs, "validate_args", false, distribution);
}

}  // namespace tdp::dist
