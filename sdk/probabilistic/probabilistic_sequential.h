// ProbabilisticTensorDictSequential: a TensorDictSequential whose modules end with (or contain)
// probabilistic modules, and which can therefore return their distribution and score samples.
// Python's tensordict.nn.ProbabilisticTensorDictSequential.
//
//   using namespace tdp::nn;
//   ProbabilisticTensorDictSequential actor({
//       TensorDictModule(mlp, TensorDictModuleOptions({"observation"}, {"param"})),
//       TensorDictModule(NormalParamExtractor(), TensorDictModuleOptions({"param"}, {"loc", "scale"})),
//       ProbabilisticTensorDictModule(ProbabilisticTensorDictModuleOptions({"loc", "scale"}, {"action"})
//           .distribution("normal").return_log_prob(true))});
//   actor(td);                                    // "param", "loc", "scale", "action", "action_log_prob"
//   AnyDistribution d = actor->get_dist(td);      // the last module's Normal
//   LogProb lp = actor->log_prob(td);             // recomputes "action"'s log-prob
//
// return_composite (default: true when the last module is not probabilistic or when there is
// more than one probabilistic module) makes get_dist() a CompositeDistribution over every
// probabilistic module, each drawn in turn so that later ones see earlier samples; false
// requires the last module to be probabilistic and uses only it. slice() returns a
// ProbabilisticTensorDictSequential when the slice still ends with (or, with return_composite,
// contains) a probabilistic module, else a plain TensorDictSequential.
#pragma once

#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sdk/nn/tensordict_sequential.h"
#include "sdk/probabilistic/any_distribution.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

struct ProbabilisticTensorDictSequentialOptions {
  // Unset: the reference's default (see the header comment).
  TORCH_ARG(std::optional<bool>, return_composite);
  TORCH_ARG(bool, partial_tolerant) = false;
  TORCH_ARG(std::vector<NestedKey>, selected_out_keys);
  TORCH_ARG(std::optional<Inplace>, inplace);

 public:
  ProbabilisticTensorDictSequentialOptions& return_composite(bool value) {
    return_composite_ = value;
    return *this;
  }
  ProbabilisticTensorDictSequentialOptions& inplace(bool value) {
    inplace_ = value ? Inplace::kTrue : Inplace::kFalse;
    return *this;
  }
  TensorDictSequentialOptions sequential_options() const;
};

class ProbabilisticTensorDictSequentialImpl : public TensorDictSequentialImpl,
                                              public ProbabilisticModuleInterface {
 public:
  // Throws std::invalid_argument for an empty list, or for return_composite(false) when the
  // last module is not probabilistic.
  explicit ProbabilisticTensorDictSequentialImpl(
      std::vector<TensorDictModuleRef> modules, ProbabilisticTensorDictSequentialOptions options = {});
  // Named modules, in this order (Python's OrderedDict form); the same rules.
  explicit ProbabilisticTensorDictSequentialImpl(
      std::vector<std::pair<std::string, TensorDictModuleRef>> named_modules,
      ProbabilisticTensorDictSequentialOptions options = {});

  bool return_composite() const { return return_composite_; }
  // The modules before the last one, as a TensorDictSequential sharing them; null when no
  // module is probabilistic.
  const std::shared_ptr<TensorDictSequentialImpl>& det_part() const { return det_part_; }

  // forward() with the choices of `request` (see probabilistic_module_interface.h); the
  // sequence decides for its own children whether a value must be drawn.
  TensorDict forward_with_request(const TensorDict& tensordict, const SampleRequest& request,
                                  const std::optional<TensorDict>& tensordict_out = std::nullopt) override;

  // Runs det_part() on `tensordict` (in place) under interaction_type(), else the last
  // probabilistic default, and returns it: the last module's distribution parameters.
  TensorDict get_dist_params(const TensorDict& tensordict) const;
  // The last probabilistic module's distribution, or the composite over all of them.
  AnyDistribution get_dist(const TensorDict& tensordict) const override;
  // C++ addition for autoregressive heads: the CompositeDistribution over every probabilistic
  // module, each built from `tensordict` with the samples it already holds left in place
  // (teacher forcing), so that later parts are conditioned on the given earlier samples. Its
  // log_prob of those samples is the joint log p(a1) + log p(a2 | a1) + ... that a
  // policy-gradient update needs, and its entropy is H(a1) + H(a2 | given a1) + ... . A sample
  // the tensordict lacks is drawn as get_dist() draws it. tensordict's get_dist (and so
  // log_prob without `dist`) instead re-draws every intermediate sample under the current
  // interaction type (the module's default, usually deterministic, when none is set) and
  // conditions the later parts on that draw, whatever the tensordict holds. Requires
  // return_composite (else it is get_dist()).
  AnyDistribution get_dist_given_samples(const TensorDict& tensordict) const;
  // The last ProbabilisticTensorDictModule's distribution built from `tensordict` as it is.
  AnyDistribution build_dist_from_params(const TensorDict& tensordict) const;
  LogProb log_prob(const TensorDict& tensordict,
                   const std::optional<AnyDistribution>& dist = std::nullopt) const override;
  // log_prob() computed on a shallow copy of `tensordict` (which is left as it was), with the
  // log-prob entries written into `tensordict_out` when they form a TensorDict (per-part
  // log-probs): then `tensordict_out` is returned. A single log-prob tensor is returned as is,
  // as in tensordict. (tensordict 0.13 returns a composite's per-part TensorDict without
  // writing it into tensordict_out; here it is written, as its documentation says.)
  LogProb log_prob(const TensorDict& tensordict, TensorDict tensordict_out,
                   const std::optional<AnyDistribution>& dist = std::nullopt) const;

  // The sub-modules' keys, last module first (as the reference).
  std::vector<NestedKey> log_prob_keys() const override;
  NestedKey log_prob_key() const;
  std::vector<NestedKey> dist_params_keys() const override;
  std::vector<NestedKey> dist_sample_keys() const override;
  // The sample dims all probabilistic modules add, the later modules' outermost.
  std::vector<int64_t> num_samples() const override;
  // The last probabilistic module's default; interaction_type() when there is none.
  std::optional<InteractionType> default_interaction_type() const override;

  std::shared_ptr<TensorDictSequentialImpl> slice(int64_t start, int64_t stop) const override;

  const ProbabilisticTensorDictSequentialOptions& prob_options() const { return prob_options_; }

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;
  void modules_changed() override;

 private:
  // Derives return_composite, the sampling rule, det_part() and each module's interface
  // (one cast per module) from modules().
  void configure();
  std::shared_ptr<ProbabilisticTensorDictModuleImpl> last_prob_module() const;
  // get_dist() with return_composite; keep_given: a module whose samples are all present
  // keeps them instead of drawing (get_dist_given_samples()).
  AnyDistribution composite_dist(const TensorDict& tensordict, bool keep_given) const;

  ProbabilisticTensorDictSequentialOptions prob_options_;
  bool return_composite_ = true;
  bool requires_sample_ = false;
  std::shared_ptr<TensorDictSequentialImpl> det_part_;
  // Per module: its probabilistic interface (null for other modules); owned through modules().
  std::vector<ProbabilisticModuleInterface*> prob_children_;
  // Per module: a ProbabilisticTensorDictModule (not a sequence), which draws when the sequence
  // says so; other children decide for themselves.
  std::vector<ProbabilisticTensorDictModuleImpl*> prob_modules_;
  // Per module: not probabilistic itself, but holds probabilistic modules that can only read
  // the scopes (the request is re-established around it as guards).
  std::vector<bool> needs_scopes_;
  // The last ProbabilisticTensorDictModule, depth first (found at configuration).
  std::shared_ptr<ProbabilisticTensorDictModuleImpl> last_prob_module_;
};

class ProbabilisticTensorDictSequential
    : public torch::nn::ModuleHolder<ProbabilisticTensorDictSequentialImpl> {
 public:
  using torch::nn::ModuleHolder<ProbabilisticTensorDictSequentialImpl>::ModuleHolder;
  using Impl = ProbabilisticTensorDictSequentialImpl;

  ProbabilisticTensorDictSequential(std::initializer_list<TensorDictModuleRef> modules,
                                    ProbabilisticTensorDictSequentialOptions options = {})
      : ModuleHolder(std::make_shared<ProbabilisticTensorDictSequentialImpl>(
            std::vector<TensorDictModuleRef>(modules), std::move(options))) {}
  ProbabilisticTensorDictSequential(std::vector<TensorDictModuleRef> modules,
                                    ProbabilisticTensorDictSequentialOptions options = {})
      : ModuleHolder(std::make_shared<ProbabilisticTensorDictSequentialImpl>(
            std::move(modules), std::move(options))) {}
  ProbabilisticTensorDictSequential(std::vector<std::pair<std::string, TensorDictModuleRef>> named_modules,
                                    ProbabilisticTensorDictSequentialOptions options = {})
      : ModuleHolder(std::make_shared<ProbabilisticTensorDictSequentialImpl>(
            std::move(named_modules), std::move(options))) {}
};

}  // namespace tdp::nn
