// MaskedCategorical and MaskedOneHotCategorical: categorical distributions over the classes a
// boolean mask allows, TorchRL's torchrl.modules.MaskedCategorical / MaskedOneHotCategorical
// with a dense mask. The logits of masked-out classes become `neg_inf` (-inf by default) before
// the logits are normalized, so those classes are never drawn nor chosen by the mode, and their
// log-prob is `neg_inf`. Probabilities given instead of logits are zeroed where masked and
// renormalized first.
//
//   at::Tensor mask = at::tensor({true, false, true}).expand({32, 3});   // class 1 not allowed
//   tdp::dist::MaskedCategorical policy(/*probs=*/{}, scores, mask);     // scores [32, 3]
//   at::Tensor action = policy.sample({}, generator);                     // [32], never 1
//   at::Tensor lp = policy.log_prob(action);                              // [32]
//   policy.log_prob(at::ones({32}, at::kLong));                           // -inf everywhere
//
// Only the dense boolean mask is supported: TorchRL's sparse forms (`indices`, a mask of valid
// indices with sparse_mask / padding_value) throw std::invalid_argument.
#pragma once

#include <limits>

#include "sdk/distributions/categorical.h"
#include "sdk/distributions/distribution.h"

namespace tdp::dist {

struct MaskedCategoricalOptions {
  // The log-probability of masked-out classes (and their logits before normalizing).
  double neg_inf = -std::numeric_limits<double>::infinity();
  // TorchRL's use_cross_entropy: log_prob is the log-softmax of the (normalized) logits at the
  // value; false: the normalized logits at the value, as torch's Categorical. Equal up to rounding.
  bool use_cross_entropy = true;
};

class MaskedCategorical : public Categorical {
 public:
  // Exactly one of `probs` and `logits` must be defined; `mask` is a boolean tensor
  // broadcastable to them (true: allowed).
  MaskedCategorical(const at::Tensor& probs, const at::Tensor& logits, const at::Tensor& mask,
                    MaskedCategoricalOptions options = {});

  std::string name() const override { return "MaskedCategorical"; }
  const at::Tensor& mask() const { return mask_; }
  const MaskedCategoricalOptions& options() const { return options_; }

  // Masked-out classes score neg_inf; no support check (TorchRL's log_prob makes none).
  at::Tensor log_prob(const at::Tensor& value) const override;
  // Over the allowed classes only.
  at::Tensor entropy() const override;
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override;

 private:
  at::Tensor mask_;
  MaskedCategoricalOptions options_;
};

// MaskedCategorical with one-hot values: int64 one-hot samples, a one-hot mode (every maximal
// class set when tied), and log_prob scoring the argmax class of its value.
class MaskedOneHotCategorical : public Distribution {
 public:
  MaskedOneHotCategorical(const at::Tensor& probs, const at::Tensor& logits, const at::Tensor& mask,
                          MaskedCategoricalOptions options = {});

  std::string name() const override { return "MaskedOneHotCategorical"; }
  const at::Tensor& probs() const { return categorical_.probs(); }
  const at::Tensor& logits() const { return categorical_.logits(); }
  const at::Tensor& mask() const { return categorical_.mask(); }

  at::Tensor sample(c10::IntArrayRef sample_shape = {}, const GeneratorOpt& generator = c10::nullopt) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override { return categorical_.entropy(); }
  // NaN, as TorchRL's (it inherits torch's Categorical.mean).
  at::Tensor mean() const override { return categorical_.mean(); }
  at::Tensor variance() const override { return categorical_.variance(); }
  at::Tensor mode() const override;
  at::Tensor deterministic_sample() const override { return mode(); }
  Support support() const override { return Support::one_hot(); }
  std::vector<std::pair<std::string, at::Tensor>> printed_params() const override {
    return categorical_.printed_params();
  }

 private:
  explicit MaskedOneHotCategorical(MaskedCategorical categorical);

  MaskedCategorical categorical_;
};

}  // namespace tdp::dist
