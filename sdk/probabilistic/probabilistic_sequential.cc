#include "sdk/probabilistic/probabilistic_sequential.h"

#include <algorithm>
#include <stdexcept>

#include "sdk/probabilistic/composite_lp_aggregate.h"

namespace tdp::nn {
namespace {

bool is_probabilistic(const std::shared_ptr<TensorDictModuleBase>& module) {
  return std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(module) != nullptr ||
         std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(module) != nullptr;
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
  configure();
}

void ProbabilisticTensorDictSequentialImpl::modules_changed() { configure(); }

void ProbabilisticTensorDictSequentialImpl::configure() {
  const auto& mods = this->modules();
  // Resolved once: forward() asks these of every module on every call.
  prob_modules_.clear();
  prob_sequentials_.clear();
  det_part_ = nullptr;
  for (const auto& m : mods) {
    prob_modules_.push_back(std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(m).get());
    prob_sequentials_.push_back(std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(m).get());
  }
  const int64_t num_prob = std::count_if(prob_modules_.begin(), prob_modules_.end(),
                                         [](const auto* m) { return m != nullptr; });
  const bool any_prob = std::any_of(mods.begin(), mods.end(), is_probabilistic);
  if (!any_prob) {
    // A plain sequence: forward() just runs the modules.
    return_composite_ = true;
    requires_sample_ = false;
    return;
  }
  return_composite_ = prob_options_.return_composite().value_or(!is_probabilistic(mods.back()) ||
                                                                num_prob > 1);
  // When earlier modules already write the last module's samples, it only scores them.
  std::vector<NestedKey> earlier_out;
  for (size_t i = 0; i + 1 < mods.size(); ++i) {
    for (const NestedKey& key : mods[i]->out_keys()) earlier_out.push_back(key);
  }
  std::vector<NestedKey> last_samples;
  if (auto m = std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(mods.back())) {
    last_samples = m->dist_sample_keys();
  } else if (auto s = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(mods.back())) {
    last_samples = s->dist_sample_keys();
  }
  requires_sample_ =
      last_samples.empty() ||
      std::any_of(last_samples.begin(), last_samples.end(), [&](const NestedKey& key) {
        return std::find(earlier_out.begin(), earlier_out.end(), key) == earlier_out.end();
      });
  std::vector<TensorDictModuleRef> det(mods.begin(), mods.end() - 1);
  det_part_ = std::make_shared<TensorDictSequentialImpl>(std::move(det));
}

std::optional<InteractionType> ProbabilisticTensorDictSequentialImpl::default_interaction_type() const {
  for (size_t i = prob_modules_.size(); i-- > 0;) {
    if (prob_modules_[i] != nullptr) return prob_modules_[i]->default_interaction_type();
    if (prob_sequentials_[i] != nullptr) {
      if (auto type = prob_sequentials_[i]->default_interaction_type()) return type;
    }
  }
  return interaction_type();
}

TensorDict ProbabilisticTensorDictSequentialImpl::run_module(size_t index, TensorDict tensordict) {
  const auto& mods = modules();
  if (det_part_ == nullptr) return TensorDictSequentialImpl::run_module(index, tensordict);
  if (ProbabilisticTensorDictModuleImpl* m = prob_modules_[index]) {
    if (return_composite_ || index + 1 == mods.size()) {
      return m->forward_requires_sample(tensordict, std::nullopt, requires_sample_);
    }
  }
  if (!return_composite_ && index + 1 < mods.size()) {
    // The deterministic part runs under the interaction type the last module will use, so
    // that probabilistic modules inside it agree with it (get_dist_params()).
    std::optional<InteractionType> type = interaction_type();
    if (!type.has_value()) type = default_interaction_type();
    InteractionTypeGuard guard(type, /*thread_local_only=*/true);
    return TensorDictSequentialImpl::run_module(index, tensordict);
  }
  return TensorDictSequentialImpl::run_module(index, tensordict);
}

TensorDict ProbabilisticTensorDictSequentialImpl::get_dist_params(const TensorDict& tensordict) {
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
  std::shared_ptr<ProbabilisticTensorDictModuleImpl> last;
  // Depth first, in order: the last one found is the last one to run.
  for (const auto& child : const_cast<ProbabilisticTensorDictSequentialImpl*>(this)->torch::nn::Module::modules(
           /*include_self=*/false)) {
    if (auto m = std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(child)) last = m;
  }
  if (last == nullptr) {
    throw std::runtime_error("Could not find any ProbabilisticTensorDictModule in the sequence.");
  }
  return last;
}

AnyDistribution ProbabilisticTensorDictSequentialImpl::build_dist_from_params(
    const TensorDict& tensordict) const {
  return last_prob_module()->get_dist(tensordict);
}

AnyDistribution ProbabilisticTensorDictSequentialImpl::get_dist(const TensorDict& tensordict) {
  if (!return_composite_) {
    TensorDict params = get_dist_params(tensordict);
    const auto& last = modules().back();
    if (auto s = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(last)) {
      return s->get_dist(params);
    }
    return build_dist_from_params(params);
  }
  TensorDict td = tensordict.clone(/*deep=*/false);
  std::vector<std::pair<NestedKey, dist::DistributionPtr>> parts;
  const auto& mods = modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    auto m = std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(mods[i]);
    auto s = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(mods[i]);
    if (m == nullptr && s == nullptr) {
      td = mods[i]->forward(td);
      continue;
    }
    AnyDistribution d = m ? m->get_dist(td) : s->get_dist(td);
    if (i + 1 < mods.size()) {
      // Later modules are conditioned on this one's value, drawn as forward() would.
      if (m) {
        TensorDict drawn = m->forward_requires_sample(td.clone(/*deep=*/false), std::nullopt, true);
        for (const NestedKey& key : m->dist_sample_keys()) td.set(key, drawn.get_entry(key));
        // A generator_key's seed advances as it does in forward().
        const auto& seed_key = m->options().generator_key();
        if (seed_key.has_value() && drawn.contains(*seed_key)) {
          td.set(*seed_key, drawn.get_entry(*seed_key));
        }
        if (!m->num_samples().empty()) td = td.expand(concat(m->num_samples(), td.batch_size()));
      } else {
        td = s->forward(td);
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
                                                        const std::optional<AnyDistribution>& dist) {
  AnyDistribution d = dist.has_value() ? *dist : get_dist(tensordict);
  if (return_composite_ && d.is_composite()) return d.composite()->log_prob(tensordict);
  const auto& last = modules().back();
  if (auto m = std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(last)) {
    return m->log_prob(tensordict, d);
  }
  if (auto s = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(last)) {
    return s->log_prob(tensordict, d);
  }
  throw std::runtime_error(describe() + ": the last module is not probabilistic; use return_composite.");
}

std::vector<NestedKey> ProbabilisticTensorDictSequentialImpl::log_prob_keys() const {
  std::vector<NestedKey> keys;
  const auto& mods = modules();
  for (auto it = mods.rbegin(); it != mods.rend(); ++it) {
    std::vector<NestedKey> part;
    if (auto m = std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(*it)) {
      part = m->log_prob_keys();
    } else if (auto s = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(*it)) {
      part = s->log_prob_keys();
    }
    keys.insert(keys.end(), part.begin(), part.end());
  }
  return keys;
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
  std::vector<NestedKey> keys;
  const auto& mods = modules();
  for (auto it = mods.rbegin(); it != mods.rend(); ++it) {
    std::vector<NestedKey> part;
    if (auto m = std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(*it)) {
      part = m->dist_params_keys();
    } else if (auto s = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(*it)) {
      part = s->dist_params_keys();
    }
    keys.insert(keys.end(), part.begin(), part.end());
  }
  return keys;
}

std::vector<NestedKey> ProbabilisticTensorDictSequentialImpl::dist_sample_keys() const {
  std::vector<NestedKey> keys;
  const auto& mods = modules();
  for (auto it = mods.rbegin(); it != mods.rend(); ++it) {
    std::vector<NestedKey> part;
    if (auto m = std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(*it)) {
      part = m->dist_sample_keys();
    } else if (auto s = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(*it)) {
      part = s->dist_sample_keys();
    }
    keys.insert(keys.end(), part.begin(), part.end());
  }
  return keys;
}

std::vector<int64_t> ProbabilisticTensorDictSequentialImpl::num_samples() const {
  std::vector<int64_t> shape;
  for (const auto& module : modules()) {
    std::vector<int64_t> local;
    if (auto m = std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(module)) {
      local = m->num_samples();
    } else if (auto s = std::dynamic_pointer_cast<ProbabilisticTensorDictSequentialImpl>(module)) {
      local = s->num_samples();
    }
    shape.insert(shape.begin(), local.begin(), local.end());
  }
  return shape;
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
