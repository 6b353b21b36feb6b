#include "sdk/distributions/support.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <sstream>
#include <stdexcept>
#include <utility>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

std::string bound_to_string(const at::Tensor& bound) {
  return internal::param_to_string(bound);
}

std::string double_to_string(double value) {
  std::ostringstream out;
  out << value;
  std::string text = out.str();
  // PyTorch prints float bounds with a decimal point: "GreaterThan(lower_bound=0.0)".
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

Support::Support(Kind kind, std::string description, bool discrete, int64_t event_dim,
                 CheckFn check)
    : kind_(kind),
      description_(std::move(description)),
      discrete_(discrete),
      event_dim_(event_dim),
      check_(std::move(check)) {}

at::Tensor Support::check(const at::Tensor& value) const { return check_(value); }

const Support& Support::real() {
  // NaN is the one real-typed value outside the real line.
  static const Support support(Kind::kReal, "Real()", false, 0,
                               [](const at::Tensor& v) { return v == v; });
  return support;
}

const Support& Support::positive() {
  static const Support support = greater_than(0.0);
  return support;
}

Support Support::greater_than(double lower_bound) {
  return Support(Kind::kGreaterThan, "GreaterThan(lower_bound=" + double_to_string(lower_bound) + ")",
                 false, 0, [lower_bound](const at::Tensor& v) { return v > lower_bound; });
}

const Support& Support::unit_interval() {
  static const Support support(Kind::kInterval, "Interval(lower_bound=0.0, upper_bound=1.0)",
                               false, 0, [](const at::Tensor& v) { return (v >= 0) & (v <= 1); });
  return support;
}

Support Support::interval(const at::Tensor& lower_bound, const at::Tensor& upper_bound) {
  return Support(Kind::kInterval,
                 "Interval(lower_bound=" + bound_to_string(lower_bound) +
                     ", upper_bound=" + bound_to_string(upper_bound) + ")",
                 false, 0, [lower_bound, upper_bound](const at::Tensor& v) {
                   return (lower_bound <= v) & (v <= upper_bound);
                 });
}

Support Support::half_open_interval(const at::Tensor& lower_bound,
                                    const at::Tensor& upper_bound) {
  return Support(Kind::kHalfOpenInterval,
                 "HalfOpenInterval(lower_bound=" + bound_to_string(lower_bound) +
                     ", upper_bound=" + bound_to_string(upper_bound) + ")",
                 false, 0, [lower_bound, upper_bound](const at::Tensor& v) {
                   return (lower_bound <= v) & (v < upper_bound);
                 });
}

const Support& Support::boolean() {
  static const Support support(Kind::kBoolean, "Boolean()", true, 0,
                               [](const at::Tensor& v) { return (v == 0) | (v == 1); });
  return support;
}

Support Support::integer_interval(int64_t lower_bound, int64_t upper_bound) {
  return Support(Kind::kIntegerInterval,
                 "IntegerInterval(lower_bound=" + std::to_string(lower_bound) +
                     ", upper_bound=" + std::to_string(upper_bound) + ")",
                 true, 0, [lower_bound, upper_bound](const at::Tensor& v) {
                   return (at::remainder(v, 1) == 0) & (v >= lower_bound) & (v <= upper_bound);
                 });
}

const Support& Support::simplex() {
  static const Support support(Kind::kSimplex, "Simplex()", false, 1, [](const at::Tensor& v) {
    return at::all(v >= 0, -1) & ((v.sum(-1) - 1).abs() < 1e-6);
  });
  return support;
}

const Support& Support::one_hot() {
  static const Support support(Kind::kOneHot, "OneHot()", true, 1, [](const at::Tensor& v) {
    at::Tensor is_boolean = (v == 0) | (v == 1);
    at::Tensor is_normalized = v.sum(-1).eq(1);
    return at::all(is_boolean, -1) & is_normalized;
  });
  return support;
}

Support Support::independent(const Support& base, int64_t reinterpreted_batch_ndims) {
  if (reinterpreted_batch_ndims < 0) {
    throw std::invalid_argument("Support::independent: reinterpreted_batch_ndims must be >= 0, got " +
                                std::to_string(reinterpreted_batch_ndims));
  }
  if (reinterpreted_batch_ndims == 0) return base;
  CheckFn base_check = base.check_;
  return Support(Kind::kIndependent,
                 "IndependentConstraint(" + base.to_string() + ", " +
                     std::to_string(reinterpreted_batch_ndims) + ")",
                 base.is_discrete(), base.event_dim() + reinterpreted_batch_ndims,
                 [base_check, reinterpreted_batch_ndims](const at::Tensor& v) {
                   at::Tensor result = base_check(v);
                   if (result.dim() < reinterpreted_batch_ndims) {
                     throw std::invalid_argument(
                         "IndependentConstraint: value has too few dims for its event");
                   }
                   std::vector<int64_t> shape(result.sizes().begin(),
                                              result.sizes().end() - reinterpreted_batch_ndims);
                   shape.push_back(-1);
                   return result.reshape(shape).all(-1);
                 });
}

}  // namespace tdp::dist
