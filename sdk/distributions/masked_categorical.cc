#include "sdk/distributions/masked_categorical.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace tdp::dist {
namespace {

const at::Tensor& checked_mask(const at::Tensor& mask, const std::string& name) {
  if (!mask.defined()) throw std::invalid_argument(name + ": a `mask` must be provided.");
  if (mask.scalar_type() != at::kBool) {
    throw std::invalid_argument(name + ": the mask must be a boolean tensor (true: allowed), got " +
                                std::string(c10::toString(mask.scalar_type())) +
                                "; TorchRL's sparse forms (`indices`, sparse_mask, padding_value) are not supported");
  }
  return mask;
}

// TorchRL's MaskedCategorical.__init__ up to the Categorical it builds: probs zeroed where masked
// and renormalized, taken to logits; then the masked logits set to neg_inf.
at::Tensor masked_logits(const at::Tensor& probs, const at::Tensor& logits, const at::Tensor& mask,
                         const MaskedCategoricalOptions& options, const std::string& name) {
  checked_mask(mask, name);
  if (probs.defined() == logits.defined()) {
    throw std::invalid_argument(name + ": either `probs` or `logits` must be specified, but not both.");
  }
  at::Tensor unnormalized = logits;
  const at::Tensor not_allowed = mask.logical_not();
  if (probs.defined()) {
    at::Tensor zeroed = probs.masked_fill(not_allowed, 0);
    zeroed = zeroed / zeroed.sum(-1, /*keepdim=*/true);
    unnormalized = zeroed.log();
  }
  return unnormalized.masked_fill(not_allowed, options.neg_inf);
}

// The errors name the one-hot distribution.
MaskedCategorical make_categorical(const at::Tensor& probs, const at::Tensor& logits, const at::Tensor& mask,
                                   MaskedCategoricalOptions options) {
  try {
    return MaskedCategorical(probs, logits, mask, options);
  } catch (const std::invalid_argument& e) {
    std::string message = e.what();
    const std::string prefix = "MaskedCategorical";
    if (message.rfind(prefix, 0) == 0) message = "MaskedOneHotCategorical" + message.substr(prefix.size());
    throw std::invalid_argument(message);
  }
}

}  // namespace

MaskedCategorical::MaskedCategorical(const at::Tensor& probs, const at::Tensor& logits, const at::Tensor& mask,
                                     MaskedCategoricalOptions options)
    : Categorical(at::Tensor(), masked_logits(probs, logits, mask, options, "MaskedCategorical")),
      mask_(mask),
      options_(options) {}

at::Tensor MaskedCategorical::log_prob(const at::Tensor& value) const {
  // torch's cross_entropy is the log-softmax at the class; it normalizes the (already normalized)
  // logits once more, which the gather of Categorical::log_prob does not.
  const at::Tensor scores = options_.use_cross_entropy ? logits().log_softmax(-1) : logits();
  at::Tensor index = value.to(at::kLong).unsqueeze(-1);
  at::Tensor result;
  if (value.sizes().equals(batch_shape())) {
    result = scores.gather(-1, index).squeeze(-1);
  } else {
    std::vector<at::Tensor> both = at::broadcast_tensors({index, scores});
    result = both[1].gather(-1, both[0].narrow(-1, 0, 1)).squeeze(-1);
  }
  return at::where(result.isfinite(), result, at::scalar_tensor(options_.neg_inf, result.options()));
}

at::Tensor MaskedCategorical::entropy() const {
  const double min_real = logits().scalar_type() == at::kDouble
                              ? std::numeric_limits<double>::lowest()
                              : static_cast<double>(std::numeric_limits<float>::lowest());
  const at::Tensor excluded = mask_.expand_as(logits()).logical_not().logical_or(logits().isfinite().logical_not());
  at::Tensor filled = logits().masked_fill(excluded, min_real);
  filled = filled - filled.logsumexp(-1, /*keepdim=*/true);
  return -(filled * filled.exp()).sum(-1);
}

std::vector<std::pair<std::string, at::Tensor>> MaskedCategorical::printed_params() const {
  return {{"logits", logits()}, {"mask", mask_}};
}

MaskedOneHotCategorical::MaskedOneHotCategorical(const at::Tensor& probs, const at::Tensor& logits,
                                                 const at::Tensor& mask, MaskedCategoricalOptions options)
    : MaskedOneHotCategorical(make_categorical(probs, logits, mask, options)) {}

MaskedOneHotCategorical::MaskedOneHotCategorical(MaskedCategorical categorical)
    : Distribution(categorical.batch_shape(), {categorical.num_events()}, c10::nullopt),
      categorical_(std::move(categorical)) {}

at::Tensor MaskedOneHotCategorical::sample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  return at::one_hot(categorical_.sample(sample_shape, generator), categorical_.num_events());
}

at::Tensor MaskedOneHotCategorical::log_prob(const at::Tensor& value) const {
  return categorical_.log_prob(value.argmax(-1));
}

at::Tensor MaskedOneHotCategorical::mode() const {
  const at::Tensor& logits = categorical_.logits();
  return (logits == std::get<0>(logits.max(-1, /*keepdim=*/true))).to(at::kLong);
}

}  // namespace tdp::dist
