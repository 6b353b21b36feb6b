#include "sdk/distributions/one_hot_categorical.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

// The inner Categorical validates the parameters; it also rejects a missing/duplicate param,
// which must happen before the event shape is read.
Categorical make_categorical(const at::Tensor& probs, const at::Tensor& logits,
                             c10::optional<bool> validate_args) {
  try {
    return Categorical(probs, logits, validate_args);
  } catch (const std::invalid_argument& e) {
    std::string message = e.what();
    const std::string prefix = "Categorical";
    if (message.rfind(prefix, 0) == 0) message = "OneHotCategorical" + message.substr(prefix.size());
    throw std::invalid_argument(message);
  }
}

}  // namespace

OneHotCategorical::OneHotCategorical(const at::Tensor& probs, const at::Tensor& logits,
                                     c10::optional<bool> validate_args)
    : OneHotCategorical(make_categorical(probs, logits, validate_args), validate_args) {}

OneHotCategorical::OneHotCategorical(Categorical categorical, c10::optional<bool> validate_args)
    : Distribution(categorical.batch_shape(), {categorical.num_events()}, validate_args),
      categorical_(std::move(categorical)) {}

at::Tensor OneHotCategorical::sample(c10::IntArrayRef sample_shape,
                                     const GeneratorOpt& generator) const {
  at::Tensor indices = categorical_.sample(sample_shape, generator);
  return at::one_hot(indices, categorical_.num_events()).to(at::kLong);
}

at::Tensor OneHotCategorical::rsample(c10::IntArrayRef sample_shape,
                                      const GeneratorOpt& generator) const {
  // RelaxedOneHotCategorical(temperature=1, logits).rsample: Gumbel-perturbed log-softmax,
  // then exp. The relaxed distribution's own Categorical normalizes the logits once more.
  at::Tensor logits = categorical_.logits();
  logits = logits - logits.logsumexp(-1, /*keepdim=*/true);
  at::Tensor uniforms = internal::clamp_probs(
      at::rand(extended_shape(sample_shape), generator, logits.options()));
  at::Tensor gumbels = -((-(uniforms.log())).log());
  at::Tensor scores = (logits + gumbels) / 1.0;
  at::Tensor out = (scores - scores.logsumexp(-1, /*keepdim=*/true)).exp();
  // tensordict overwrites `out.data` with the hard one-hot: values become exact 0/1 while the
  // graph (whose exp backward reads the overwritten result) is left as built.
  at::Tensor hard = (out == std::get<0>(out.max(-1)).unsqueeze(-1)).to(out.scalar_type());
  out.variable_data().copy_(hard);
  return out;
}

at::Tensor OneHotCategorical::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  return categorical_.log_prob(value.argmax(-1));
}

at::Tensor OneHotCategorical::variance() const {
  return categorical_.probs() * (1 - categorical_.probs());
}

at::Tensor OneHotCategorical::mode() const {
  const at::Tensor& logits = categorical_.logits();
  return (logits == std::get<0>(logits.max(-1, /*keepdim=*/true))).to(at::kLong);
}

}  // namespace tdp::dist
