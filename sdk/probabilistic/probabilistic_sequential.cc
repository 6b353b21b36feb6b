#include "sdk/probabilistic/probabilistic_sequential.h"

#include <algorithm>
#include <stdexcept>

#include "sdk/probabilistic/composite_lp_aggregate.h"

namespace tdp::nn {
namespace {

// The one cast from a module to the probabilistic interface; for configuration only.
ProbabilisticModuleInterface* as_probabilistic(torch::nn::Module* module) {
  return dynamic_cast<ProbabilisticModuleInterface*>(module);
}

bool is_probabilistic(const std::shared_ptr<TensorDictModuleBase>& module) {
  return as_probabilistic(module.get()) != nullptr;
}

std::vector<TensorDictModuleRef> refs_of(
    const std::vector<std::shared_ptr<TensorDictModuleBase>>& modules) {
  return std::vector<TensorDictModuleRef>(modules.begin(), modules.end());
}

// Validates before the base class sees the modules, so that the reference's errors come first.
std::vector<TensorDictModuleRef> checked(std::vector<TensorDictModuleRef> modules,
                                         const ProbabilisticTensorDictSequentialOptions& options) {
  if (modules.empty()) {
    throw std::invalid_argument(
        "ProbabilisticTensorDictSequential must consist of zero or more TensorDictModules "
        "followed by a ProbabilisticTensorDictModule");
  }
  if (options.return_composite() == std::optional<bool>(false) &&
      !is_probabilistic(modules.back().ptr())) {
    throw std::invalid_argument(
        "The final module passed to ProbabilisticTensorDictSequential must be an instance of "
        "ProbabilisticTensorDictModule or another ProbabilisticTensorDictSequential (unless "
        "return_composite is set to ``True``).");
  }
  return modules;
}

std::vector<std::pair<std::string, TensorDictModuleRef>> checked(
    std::vector<std::pair<std::string, TensorDictModuleRef>> named_modules,
    const ProbabilisticTensorDictSequentialOptions& options) {
  std::vector<TensorDictModuleRef> modules;
  for (const auto& entry : named_modules) modules.push_back(entry.second);
  checked(std::move(modules), options);
  return named_modules;
}

// The probabilistic children's `keys_of`, last module first, joined: the one walk behind
// log_prob_keys(), dist_params_keys(), dist_sample_keys() and num_samples().
template <typename T, typename KeysOf>
std::vector<T> join(const std::vector<ProbabilisticModuleInterface*>& children, KeysOf keys_of) {
  std::vector<T> joined;
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    if (*it == nullptr) continue;
    std::vector<T> part = keys_of(**it);
    joined.insert(joined.end(), part.begin(), part.end());
  }
  return joined;
}

std::vector<int64_t> concat(const std::vector<int64_t>& a, c10::IntArrayRef b) {
  std::vector<int64_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

TensorDictSequentialOptions ProbabilisticTensorDictSequentialOptions::sequential_options() const {
  TensorDictSequentialOptions options;
  options.partial_tolerant(partial_tolerant_);
  options.selected_out_keys(selected_out_keys_);
  options.inplace(inplace_);
  return options;
}

ProbabilisticTensorDictSequentialImpl::ProbabilisticTensorDictSequentialImpl(
    std::vector<TensorDictModuleRef> modules, ProbabilisticTensorDictSequentialOptions options)
    : TensorDictSequentialImpl("ProbabilisticTensorDictSequential",
                               checked(std::move(modules), options), options.sequential_options()),
      prob_options_(std::move(options)) {
  handle_forward_in_entry_point();
  configure();
}

ProbabilisticTensorDictSequentialImpl::ProbabilisticTensorDictSequentialImpl(
    std::vector<std::pair<std::string, TensorDictModuleRef>> named_modules,
    ProbabilisticTensorDictSequentialOptions options)
    : TensorDictSequentialImpl("ProbabilisticTensorDictSequential", checked(std::move(named_modules), options),
                               options.sequential_options()),
      prob_options_(std::move(options)) {
  handle_forward_in_entry_point();
  configure();
}

void ProbabilisticTensorDictSequentialImpl::modules_changed() { configure(); }

void ProbabilisticTensorDictSequentialImpl::configure() {
  const auto& mods = this->modules();
  // Resolved once: forward() calls the children through these, with no cast.
  prob_children_.clear();
  prob_modules_.clear();
  needs_scopes_.clear();
  last_prob_module_ = nullptr;
  det_part_ = nullptr;
  for (const auto& m : mods) {
    ProbabilisticModuleInterface* child = nullptr;
    bool holds_probabilistic = false;
    // The module, then its descendants depth first: one cast each.
    for (const auto& sub : m->torch::nn::Module::modules(/*include_self=*/true)) {
      ProbabilisticModuleInterface* p = as_probabilistic(sub.get());
      if (p == nullptr) continue;
      if (sub.get() == m.get()) {
        child = p;
      } else {
        holds_probabilistic = true;
      }
      if (ProbabilisticTensorDictModuleImpl* module = p->as_module()) {
        last_prob_module_ = std::shared_ptr<ProbabilisticTensorDictModuleImpl>(sub, module);
      }
    }
    prob_children_.push_back(child);
    prob_modules_.push_back(child != nullptr ? child->as_module() : nullptr);
    needs_scopes_.push_back(child == nullptr && holds_probabilistic);
  }
  const int64_t num_prob = std::count_if(prob_modules_.begin(), prob_modules_.end(),
                                         [](const auto* m) { return m != nullptr; });
  const bool any_prob = std::any_of(prob_children_.begin(), prob_children_.end(),
                                    [](const auto* p) { return p != nullptr; });
  if (!any_prob) {
    // A plain sequence: forward() just runs the modules.
    return_composite_ = true;
    requires_sample_ = false;
    return;
  }
  return_composite_ =
      prob_options_.return_composite().value_or(prob_children_.back() == nullptr || num_prob > 1);
  // When earlier modules already write the last module's samples, it only scores them.
  std::vector<NestedKey> earlier_out;
  for (size_t i = 0; i + 1 < mods.size(); ++i) {
    for (const NestedKey& key : mods[i]->out_keys()) earlier_out.push_back(key);
  }
  std::vector<NestedKey> last_samples;
  if (prob_children_.back() != nullptr) last_samples = prob_children_.back()->dist_sample_keys();
  requires_sample_ =
      last_samples.empty() ||
      std::any_of(last_samples.begin(), last_samples.end(), [&](const NestedKey& key) {
        return std::find(earlier_out.begin(), earlier_out.end(), key) == earlier_out.end();
      });
  std::vector<TensorDictModuleRef> det(mods.begin(), mods.end() - 1);
  det_part_ = std::make_shared<TensorDictSequentialImpl>(std::move(det));
}

std::optional<InteractionType> ProbabilisticTensorDictSequentialImpl::default_interaction_type() const {
  for (size_t i = prob_children_.size(); i-- > 0;) {
    if (prob_children_[i] == nullptr) continue;
    if (auto type = prob_children_[i]->default_interaction_type()) return type;
  }
  return interaction_type();
}

TensorDict ProbabilisticTensorDictSequentialImpl::forward_impl(
    TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  // The outermost call: the scopes are read here, once, and passed down.
  return forward_with_request(tensordict, SampleRequest::from_scopes(), tensordict_out);
}

TensorDict ProbabilisticTensorDictSequentialImpl::forward_with_request(
    const TensorDict& tensordict, const SampleRequest& request,
    const std::optional<TensorDict>& tensordict_out) {
  // Of forward()'s handling only skip-existing is left: a sequence applies its own
  // select_out_keys() (run_modules()).
  if (skips(tensordict)) return tensordict;
  // Without return_composite the modules before the last run under the interaction type the
  // last one will use, so that probabilistic modules among them agree with it
  // (get_dist_params()). Resolved at most once per call.
  std::optional<std::optional<InteractionType>> det_type;
  return run_modules(tensordict, tensordict_out, [&](size_t index, const TensorDict& td) {
    ProbabilisticModuleInterface* p = prob_children_[index];
    // A plain module takes no request: nothing below is worked out for it.
    if (p == nullptr && !needs_scopes_[index]) return modules()[index]->forward(td);
    const bool last = index + 1 == prob_children_.size();
    SampleRequest child = request;
    if (!return_composite_ && !last) {
      // Without a requested type none was in scope either, so default_interaction_type()'s last
      // resort (the scope) adds nothing: it is the same walk over the children's defaults.
      if (!det_type.has_value()) det_type = request.type.has_value() ? request.type : default_interaction_type();
      child.type = *det_type;
    }
    // A module draws as this sequence says; a sequence decides for itself.
    child.requires_sample = prob_modules_[index] != nullptr && (return_composite_ || last) ? requires_sample_ : true;
    if (p != nullptr) return p->forward_with_request(td, child);
    const auto& module = modules()[index];
    // Probabilistic modules inside a plain module can only read the scopes.
    InteractionTypeGuard type_scope(child.type, /*thread_local_only=*/true);
    std::optional<GeneratorGuard> generator_scope;
    if (child.generator.has_value()) generator_scope.emplace(*child.generator);
    return module->forward(td);
  });
}

TensorDict ProbabilisticTensorDictSequentialImpl::get_dist_params(const TensorDict& tensordict) const {
  if (det_part_ == nullptr) {
    throw std::runtime_error("No distribution module found in " + describe() + ".");
  }
  std::optional<InteractionType> type = interaction_type();
  if (!type.has_value()) type = default_interaction_type();
  if (!type.has_value()) {
    throw std::invalid_argument("Could not find a default interaction in the modules.");
  }
  InteractionTypeGuard guard(type, /*thread_local_only=*/true);
  return det_part_->forward(tensordict);
}

std::shared_ptr<ProbabilisticTensorDictModuleImpl>
ProbabilisticTensorDictSequentialImpl::last_prob_module() const {
  if (last_prob_module_ == nullptr) {
    throw std::runtime_error("Could not find any ProbabilisticTensorDictModule in the sequence.");
  }
  return last_prob_module_;
}

AnyDistribution ProbabilisticTensorDictSequentialImpl::build_dist_from_params(
    const TensorDict& tensordict) const {
  return last_prob_module()->get_dist(tensordict);
}

AnyDistribution ProbabilisticTensorDictSequentialImpl::get_dist(const TensorDict& tensordict) const {
  if (!return_composite_) {
    TensorDict params = get_dist_params(tensordict);
    if (prob_modules_.back() == nullptr && prob_children_.back() != nullptr) {
      return prob_children_.back()->get_dist(params);
    }
    return build_dist_from_params(params);
  }
  return composite_dist(tensordict, /*keep_given=*/false);
}

AnyDistribution ProbabilisticTensorDictSequentialImpl::get_dist_given_samples(const TensorDict& tensordict) const {
  if (!return_composite_) return get_dist(tensordict);
  return composite_dist(tensordict, /*keep_given=*/true);
}

AnyDistribution ProbabilisticTensorDictSequentialImpl::composite_dist(const TensorDict& tensordict,
                                                                      bool keep_given) const {
  const SampleRequest request = SampleRequest::from_scopes();
  TensorDict td = tensordict.clone(/*deep=*/false);
  std::vector<std::pair<NestedKey, dist::DistributionPtr>> parts;
  const auto& mods = modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    ProbabilisticModuleInterface* p = prob_children_[i];
    if (p == nullptr) {
      td = mods[i]->forward(td);
      continue;
    }
    AnyDistribution d = p->get_dist(td);
    const auto has_samples = [&] {
      const std::vector<NestedKey> keys = p->dist_sample_keys();
      return !keys.empty() && std::all_of(keys.begin(), keys.end(), [&](const NestedKey& k) { return td.contains(k); });
    };
    if (i + 1 < mods.size() && !(keep_given && has_samples())) {
      // Later modules are conditioned on this one's value, drawn as forward() would.
      if (ProbabilisticTensorDictModuleImpl* m = prob_modules_[i]) {
        TensorDict drawn = m->forward_with_request(td.clone(/*deep=*/false), request);
        for (const NestedKey& key : m->dist_sample_keys()) td.set(key, drawn.get_entry(key));
        // A generator_key's seed advances as it does in forward().
        const auto& seed_key = m->options().generator_key();
        if (seed_key.has_value() && drawn.contains(*seed_key)) {
          td.set(*seed_key, drawn.get_entry(*seed_key));
        }
        if (!m->num_samples().empty()) td = td.expand(concat(m->num_samples(), td.batch_size()));
      } else {
        td = p->forward_with_request(td, request);
      }
    }
    if (d.is_composite()) {
      for (const auto& part : d.composite()->dists()) parts.push_back(part);
    } else {
      parts.emplace_back(mods[i]->out_keys()[0], d.distribution());
    }
  }
  if (parts.empty()) {
    throw std::runtime_error("No distribution module found in " + describe() + ".");
  }
  std::vector<int64_t> batch(td.batch_size().begin(), td.batch_size().end());
  return AnyDistribution(std::make_shared<const dist::CompositeDistribution>(
      dist::CompositeDistribution::from_distributions(batch, parts)));
}

LogProb ProbabilisticTensorDictSequentialImpl::log_prob(const TensorDict& tensordict,
                                                        const std::optional<AnyDistribution>& dist) const {
  AnyDistribution d = dist.has_value() ? *dist : get_dist(tensordict);
  if (return_composite_ && d.is_composite()) return d.composite()->log_prob(tensordict);
  if (ProbabilisticModuleInterface* last = prob_children_.back()) return last->log_prob(tensordict, d);
  throw std::runtime_error(describe() + ": the last module is not probabilistic; use return_composite.");
}

LogProb ProbabilisticTensorDictSequentialImpl::log_prob(const TensorDict& tensordict, TensorDict tensordict_out,
                                                        const std::optional<AnyDistribution>& dist) const {
  LogProb result = log_prob(tensordict.clone(/*deep=*/false), dist);
  const auto* parts = std::get_if<TensorDict>(&result);
  if (parts == nullptr) return result;
  // In the parts' order (log_prob_keys() lists the last module first).
  const std::vector<NestedKey> wanted = log_prob_keys();
  for (const NestedKey& key : parts->keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    if (std::find(wanted.begin(), wanted.end(), key) != wanted.end()) tensordict_out.set(key, parts->get(key));
  }
  return tensordict_out;
}

std::vector<NestedKey> ProbabilisticTensorDictSequentialImpl::log_prob_keys() const {
  return join<NestedKey>(prob_children_,
                        [](const ProbabilisticModuleInterface& p) { return p.log_prob_keys(); });
}

NestedKey ProbabilisticTensorDictSequentialImpl::log_prob_key() const {
  if (composite_lp_aggregate()) return last_prob_module()->log_prob_key();
  std::vector<NestedKey> keys = log_prob_keys();
  if (keys.size() == 1) return keys[0];
  throw std::runtime_error(
      "composite_lp_aggregate is set to ``False``, hence ProbabilisticTensorDictSequential.log_prob_key "
      "cannot be accessed unless there is one and only one element in log_prob_keys (got "
      "log_prob_keys=" +
      keys_to_string(keys) +
      "). When composite_lp_aggregate() returns ``False``, try to use "
      "ProbabilisticTensorDictSequential.log_prob_keys instead.");
}

std::vector<NestedKey> ProbabilisticTensorDictSequentialImpl::dist_params_keys() const {
  return join<NestedKey>(prob_children_,
                        [](const ProbabilisticModuleInterface& p) { return p.dist_params_keys(); });
}

std::vector<NestedKey> ProbabilisticTensorDictSequentialImpl::dist_sample_keys() const {
  return join<NestedKey>(prob_children_,
                        [](const ProbabilisticModuleInterface& p) { return p.dist_sample_keys(); });
}

// The later modules' sample dims outermost: the same joining.
std::vector<int64_t> ProbabilisticTensorDictSequentialImpl::num_samples() const {
  return join<int64_t>(prob_children_,
                        [](const ProbabilisticModuleInterface& p) { return p.num_samples(); });
}

std::shared_ptr<TensorDictSequentialImpl> ProbabilisticTensorDictSequentialImpl::slice(
    int64_t start, int64_t stop) const {
  std::shared_ptr<TensorDictSequentialImpl> plain = TensorDictSequentialImpl::slice(start, stop);
  const auto& mods = plain->modules();
  if (mods.empty()) return plain;
  if (return_composite_ && std::any_of(mods.begin(), mods.end(), is_probabilistic)) {
    return std::make_shared<ProbabilisticTensorDictSequentialImpl>(
        refs_of(mods), ProbabilisticTensorDictSequentialOptions().return_composite(true));
  }
  if (is_probabilistic(mods.back())) {
    return std::make_shared<ProbabilisticTensorDictSequentialImpl>(refs_of(mods));
  }
  return plain;
}

std::vector<std::string> ProbabilisticTensorDictSequentialImpl::repr_fields() const {
  return {std::string("return_composite=") + (return_composite_ ? "True" : "False")};
}

}  // namespace tdp::nn
