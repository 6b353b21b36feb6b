#include "sdk/distributions/delta.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <limits>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

std::vector<int64_t> infer_shape(const at::Tensor& param, const std::vector<int64_t>& batch_shape,
                                 const std::vector<int64_t>& event_shape, bool batch) {
  internal::require_defined(param, "Delta", "param");
  if (!batch_shape.empty() || !event_shape.empty()) return batch ? batch_shape : event_shape;
  const auto sizes = param.sizes();
  if (sizes.empty()) return {};
  return batch ? std::vector<int64_t>(sizes.begin(), sizes.end() - 1)
               : std::vector<int64_t>(sizes.end() - 1, sizes.end());
}

}  // namespace

Delta::Delta(const at::Tensor& param, double atol, double rtol, std::vector<int64_t> batch_shape,
             std::vector<int64_t> event_shape, c10::optional<bool> validate_args)
    : Distribution(infer_shape(param, batch_shape, event_shape, true),
                   infer_shape(param, batch_shape, event_shape, false), validate_args),
      param_(param),
      atol_(atol),
      rtol_(rtol) {}

at::Tensor Delta::sample(c10::IntArrayRef sample_shape, const GeneratorOpt&) const {
  // A view made under no_grad still requires grad; detach so that samples never do.
  return param_.detach().expand(internal::concat(sample_shape, param_.sizes()));
}

at::Tensor Delta::rsample(c10::IntArrayRef sample_shape, const GeneratorOpt&) const {
  return param_.expand(internal::concat(sample_shape, param_.sizes()));
}

at::Tensor Delta::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  at::Tensor param = param_.expand_as(value);
  at::Tensor is_equal = at::abs(value - param) < atol_ + rtol_ * at::abs(param);
  for (size_t i = 0; i < event_shape().size(); ++i) is_equal = is_equal.all(-1);
  at::Tensor out = at::zeros_like(is_equal, value.options());
  out.masked_fill_(is_equal, std::numeric_limits<double>::infinity());
  out.masked_fill_(at::logical_not(is_equal), -std::numeric_limits<double>::infinity());
  return out;
}

}  // namespace tdp::dist
