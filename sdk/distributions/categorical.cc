#include "sdk/distributions/categorical.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <limits>
#include <stdexcept>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

const at::Tensor& checked_param(const at::Tensor& probs, const at::Tensor& logits,
                                const std::string& name) {
  if (probs.defined() == logits.defined()) {
    throw std::invalid_argument(name +
                                ": either `probs` or `logits` must be specified, but not both.");
  }
  const at::Tensor& param = probs.defined() ? probs : logits;
  if (param.dim() < 1) {
    throw std::invalid_argument(name + ": `" + (probs.defined() ? "probs" : "logits") +
                                "` parameter must be at least one-dimensional.");
  }
  return param;
}

// The logits' constraint, built once: a Categorical is built on every policy step, and the
// constraint's name and check would otherwise be allocated each time, validating or not.
const Support& real_vectors() {
  static const Support support = Support::independent(Support::real(), 1);
  return support;
}

std::vector<int64_t> batch_of(const at::Tensor& param) {
  return std::vector<int64_t>(param.sizes().begin(), param.sizes().end() - 1);
}

}  // namespace

Categorical::Categorical(const at::Tensor& probs, const at::Tensor& logits,
                         c10::optional<bool> validate_args)
    : Distribution(batch_of(checked_param(probs, logits, "Categorical")), {}, validate_args),
      from_probs_(probs.defined()) {
  if (from_probs_) {
    // Checked before normalizing: PyTorch would rescale probs that do not sum to one.
    probs_ = probs;
    check_param("probs", probs, Support::simplex());
    probs_ = probs / probs.sum(-1, /*keepdim=*/true);
    logits_ = internal::probs_to_logits(probs_, /*is_binary=*/false);
  } else {
    logits_ = logits;
    check_param("logits", logits, real_vectors());
    logits_ = logits - logits.logsumexp(-1, /*keepdim=*/true);
    probs_ = internal::logits_to_probs(logits_, /*is_binary=*/false);
  }
  num_events_ = probs_.size(-1);
}

at::Tensor Categorical::sample(c10::IntArrayRef sample_shape,
                               const GeneratorOpt& generator) const {
  int64_t n = 1;
  for (int64_t s : sample_shape) n *= s;
  // A batch of one dim (a policy's [B, K]) is multinomial's 2-D input already.
  at::Tensor probs_2d = probs_.dim() == 2 ? probs_ : probs_.reshape({-1, num_events_});
  if (n == 1 && probs_2d.is_cuda()) {
    // One draw per row on a GPU: multinomial's own one-sample algorithm (argmax of probs / q,
    // q ~ Exp(1): the same numbers from the same generator), without the input checks it runs
    // first: max, min, sum, comparisons and two device-side asserts, 10 of the 32 kernels of a
    // CartPole step. On a GPU those asserts cannot throw; a bad input kills the process's CUDA
    // context instead. validate_args checks the parameters where a caller wants it.
    at::Tensor q = at::empty_like(probs_2d).exponential_(1, generator);
    at::div_out(q, probs_2d, q);
    return q.argmax(-1).reshape(extended_shape(sample_shape));
  }
  at::Tensor samples_2d = at::multinomial(probs_2d, n, /*replacement=*/true, generator).t();
  return samples_2d.reshape(extended_shape(sample_shape));
}

at::Tensor Categorical::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  at::Tensor index = value.to(at::kLong).unsqueeze(-1);
  // A value of the batch shape (the distribution's own sample, as a policy scores it) needs
  // no broadcasting: gather picks the same entries without the broadcast and narrow ops.
  if (value.sizes().equals(batch_shape())) return logits_.gather(-1, index).squeeze(-1);
  std::vector<at::Tensor> both = at::broadcast_tensors({index, logits_});
  index = both[0].narrow(-1, 0, 1);
  return both[1].gather(-1, index).squeeze(-1);
}

at::Tensor Categorical::entropy() const {
  const double min_real = logits_.scalar_type() == at::kDouble
                              ? std::numeric_limits<double>::lowest()
                              : static_cast<double>(std::numeric_limits<float>::lowest());
  at::Tensor logits = at::clamp(logits_, min_real);
  at::Tensor p_log_p = logits * probs_;
  return -p_log_p.sum(-1);
}

at::Tensor Categorical::mean() const {
  return at::full(extended_shape(), std::numeric_limits<double>::quiet_NaN(), probs_.options());
}

at::Tensor Categorical::variance() const { return mean(); }

at::Tensor Categorical::mode() const { return probs_.argmax(-1); }

std::vector<std::pair<std::string, at::Tensor>> Categorical::printed_params() const {
  if (from_probs_) return {{"probs", probs_}};
  return {{"logits", logits_}};
}

}  // namespace tdp::dist
