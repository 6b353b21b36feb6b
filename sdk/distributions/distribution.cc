#include "sdk/distributions/distribution.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>

#include <atomic>
#include <sstream>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

std::atomic<bool> g_default_validate_args{false};

// "first invalid entry: -1 at index [1, 0]" for the error messages of validate-args mode.
std::string describe_invalid(const at::Tensor& value, const at::Tensor& valid) {
  at::Tensor invalid = at::logical_not(valid);
  const int64_t count = invalid.sum().item<int64_t>();
  std::ostringstream out;
  out << count << " invalid " << (count == 1 ? "entry" : "entries");
  at::Tensor where = at::nonzero(invalid);
  if (where.size(0) == 0) return out.str();
  at::Tensor first = where[0].cpu();
  std::vector<int64_t> index(first.data_ptr<int64_t>(), first.data_ptr<int64_t>() + first.numel());
  out << ", the first at index " << internal::shape_to_string(index);
  // For a constraint over whole events (simplex, one-hot) index covers the batch dims only.
  if (static_cast<int64_t>(index.size()) == value.dim()) {
    at::Tensor entry = value.detach();
    for (int64_t i : index) entry = entry[i];
    out << " is " << internal::param_to_string(entry);
  }
  return out.str();
}

}  // namespace

void set_default_validate_args(bool value) { g_default_validate_args.store(value); }
bool default_validate_args() { return g_default_validate_args.load(); }

Distribution::Distribution(c10::IntArrayRef batch_shape, c10::IntArrayRef event_shape,
                           c10::optional<bool> validate_args)
    : batch_shape_(batch_shape.begin(), batch_shape.end()),
      event_shape_(event_shape.begin(), event_shape.end()),
      validate_args_(validate_args.value_or(default_validate_args())) {}

at::Tensor Distribution::sample(c10::IntArrayRef sample_shape,
                                const GeneratorOpt& generator) const {
  c10::NoGradGuard no_grad;
  return rsample(sample_shape, generator);
}

at::Tensor Distribution::rsample(c10::IntArrayRef, const GeneratorOpt&) const {
  not_implemented("rsample");
}
at::Tensor Distribution::log_prob(const at::Tensor&) const { not_implemented("log_prob"); }
at::Tensor Distribution::entropy() const { not_implemented("entropy"); }
at::Tensor Distribution::mean() const { not_implemented("mean"); }
at::Tensor Distribution::mode() const { not_implemented("mode"); }
at::Tensor Distribution::variance() const { not_implemented("variance"); }
at::Tensor Distribution::stddev() const { return variance().sqrt(); }
at::Tensor Distribution::cdf(const at::Tensor&) const { not_implemented("cdf"); }
at::Tensor Distribution::icdf(const at::Tensor&) const { not_implemented("icdf"); }
Support Distribution::support() const { not_implemented("support"); }

at::Tensor Distribution::deterministic_sample() const {
  // tensordict's fallback: the mean on the real line, the mode elsewhere.
  bool real = true;
  try {
    real = support().is_real();
  } catch (const NotImplementedError&) {
  }
  return real ? mean() : mode();
}

std::string Distribution::to_string() const {
  std::ostringstream out;
  out << name() << "(";
  bool first = true;
  for (const auto& [param, value] : printed_params()) {
    out << (first ? "" : ", ") << param << ": " << internal::param_to_string(value);
    first = false;
  }
  out << ")";
  return out.str();
}

at::DimVector Distribution::extended_shape(c10::IntArrayRef sample_shape) const {
  at::DimVector shape(sample_shape.begin(), sample_shape.end());
  shape.append(batch_shape_.begin(), batch_shape_.end());
  shape.append(event_shape_.begin(), event_shape_.end());
  return shape;
}

void Distribution::not_implemented(const std::string& method) const {
  throw NotImplementedError(name() + " does not implement " + method);
}

void Distribution::check_param_values(std::string_view param, const at::Tensor& value,
                                      const Support& constraint) const {
  at::Tensor valid = constraint.check(value);
  if (!valid.all().item<bool>()) {
    throw std::invalid_argument("Expected parameter " + std::string(param) + " (Tensor of shape " +
                                internal::shape_to_string(value.sizes()) + ") of distribution " + to_string() +
                                " to satisfy the constraint " + constraint.to_string() + ", but found " +
                                describe_invalid(value, valid));
  }
}

void Distribution::validate_sample_values(const at::Tensor& value, std::string_view method) const {
  const std::string where = name() + "." + std::string(method) + ": ";
  if (!value.defined()) throw std::invalid_argument(where + "the value is an undefined tensor");
  const int64_t event_dims = static_cast<int64_t>(event_shape_.size());
  const auto sizes = value.sizes();
  if (value.dim() < event_dims ||
      !std::equal(event_shape_.begin(), event_shape_.end(), sizes.end() - event_dims)) {
    throw std::invalid_argument(where + "the right-most size of value must match event_shape: " +
                                internal::shape_to_string(sizes) + " vs " +
                                internal::shape_to_string(event_shape_));
  }
  const std::vector<int64_t> expected = internal::concat(batch_shape_, event_shape_);
  for (size_t i = 0; i < std::min(expected.size(), sizes.size()); ++i) {
    const int64_t a = sizes[sizes.size() - 1 - i];
    const int64_t b = expected[expected.size() - 1 - i];
    if (a != 1 && b != 1 && a != b) {
      throw std::invalid_argument(where + "value is not broadcastable with batch_shape+event_shape: " +
                                  internal::shape_to_string(sizes) + " vs " +
                                  internal::shape_to_string(expected));
    }
  }
  // A distribution without a declared support (Delta) accepts any value, as in PyTorch.
  c10::optional<Support> declared;
  try {
    declared = support();
  } catch (const NotImplementedError&) {
    return;
  }
  const Support& s = *declared;
  at::Tensor valid = s.check(value);
  if (!valid.all().item<bool>()) {
    throw std::invalid_argument(where + "expected value argument (Tensor of shape " +
                                internal::shape_to_string(sizes) + ") to be within the support (" +
                                s.to_string() + ") of the distribution " + to_string() +
                                ", but found " + describe_invalid(value, valid));
  }
}

std::ostream& operator<<(std::ostream& out, const Distribution& distribution) {
  return out << distribution.to_string();
}

}  // namespace tdp::dist
