#include "sdk/distributions/dist_utils.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <limits>
#include <sstream>
#include <stdexcept>

namespace tdp::dist::internal {

bool same_shape(c10::ArrayRef<at::Tensor> values) {
  for (const at::Tensor& value : values) {
    if (!value.defined() || !value.sizes().equals(values.front().sizes())) return false;
  }
  return true;
}

at::Tensor sum_rightmost(const at::Tensor& value, int64_t dims) {
  if (dims == 0) return value;
  // One event dim (a policy's action vector) is the last dim already: no reshape op needed.
  if (dims == 1) return value.sum(-1);
  std::vector<int64_t> shape(value.sizes().begin(), value.sizes().end() - dims);
  shape.push_back(-1);
  return value.reshape(shape).sum(-1);
}

at::Tensor clamp_probs(const at::Tensor& probs) {
  const double eps = probs.scalar_type() == at::kDouble
                         ? std::numeric_limits<double>::epsilon()
                         : static_cast<double>(std::numeric_limits<float>::epsilon());
  return probs.clamp(eps, 1 - eps);
}

at::Tensor probs_to_logits(const at::Tensor& probs, bool is_binary) {
  at::Tensor clamped = clamp_probs(probs);
  if (is_binary) return at::log(clamped) - at::log1p(-clamped);
  return at::log(clamped);
}

at::Tensor logits_to_probs(const at::Tensor& logits, bool is_binary) {
  if (is_binary) return at::sigmoid(logits);
  return at::softmax(logits, -1);
}

std::vector<int64_t> concat(c10::IntArrayRef a, c10::IntArrayRef b) {
  std::vector<int64_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::string param_to_string(const at::Tensor& value) {
  if (!value.defined()) return "None";
  if (value.numel() == 1) {
    std::ostringstream out;
    at::Tensor scalar = value.detach().reshape({}).cpu();
    if (at::isIntegralType(scalar.scalar_type(), /*includeBool=*/true)) {
      out << scalar.item<int64_t>();
    } else {
      out << scalar.item<double>();
    }
    return out.str();
  }
  return shape_to_string(value.sizes());
}

void throw_undefined(std::string_view distribution, std::string_view param) {
  throw std::invalid_argument(std::string(distribution) + ": parameter '" + std::string(param) +
                              "' is an undefined tensor");
}

}  // namespace tdp::dist::internal
