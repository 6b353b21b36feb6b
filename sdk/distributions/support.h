// Support: the set of values a distribution can produce, as PyTorch's `constraints` describe
// it. A distribution reports its support for printing and for validate-args mode, where a
// value passed to log_prob/cdf that falls outside it throws.
//
//   tdp::dist::Support s = tdp::dist::Support::integer_interval(0, 9);
//   s.to_string();                            // "IntegerInterval(lower_bound=0, upper_bound=9)"
//   at::Tensor ok = s.check(values);          // bool, one entry per value
//   s.is_discrete();                          // true
//   Support::real().is_real();                // true: deterministic samples use the mean
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tdp::dist {

class Support {
 public:
  enum class Kind {
    kReal,
    kGreaterThan,
    kInterval,          // closed [lower, upper]
    kHalfOpenInterval,  // [lower, upper)
    kBoolean,
    kIntegerInterval,
    kSimplex,
    kOneHot,
    kIndependent,
  };

  // The fixed supports are built once: distributions name them on every construction.
  static const Support& real();
  static const Support& positive();
  static Support greater_than(double lower_bound);
  static const Support& unit_interval();
  // Bounds broadcast against the checked value; tensors let each batch entry have its own.
  static Support interval(const at::Tensor& lower_bound, const at::Tensor& upper_bound);
  static Support half_open_interval(const at::Tensor& lower_bound,
                                    const at::Tensor& upper_bound);
  static const Support& boolean();
  static Support integer_interval(int64_t lower_bound, int64_t upper_bound);
  static const Support& simplex();
  static const Support& one_hot();
  // Treats the rightmost `reinterpreted_batch_ndims` dims of `base` as one event.
  static Support independent(const Support& base, int64_t reinterpreted_batch_ndims);

  Kind kind() const { return kind_; }
  // PyTorch's repr of the constraint, e.g. "GreaterThan(lower_bound=0.0)".
  const std::string& to_string() const { return description_; }
  bool is_discrete() const { return discrete_; }
  // Number of rightmost dims that form one event (check() reduces over them).
  int64_t event_dim() const { return event_dim_; }
  // The whole real line: tensordict's DETERMINISTIC fallback takes the mean there.
  bool is_real() const { return kind_ == Kind::kReal; }
  // Boolean tensor: whether each event of `value` lies in the support.
  at::Tensor check(const at::Tensor& value) const;

 private:
  using CheckFn = std::function<at::Tensor(const at::Tensor&)>;
  Support(Kind kind, std::string description, bool discrete, int64_t event_dim, CheckFn check);

  Kind kind_;
  std::string description_;
  bool discrete_;
  int64_t event_dim_;
  CheckFn check_;
};

}  // namespace tdp::dist
