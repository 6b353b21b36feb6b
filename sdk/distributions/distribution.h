// Distribution: the interface every tdpolicy distribution implements, the C++ counterpart of
// torch.distributions.Distribution with tensordict's additions (deterministic_sample). A
// probabilistic module builds one from its parameters, then samples and scores it.
//
//   tdp::dist::Normal normal(loc, scale);                   // loc, scale: [3, 4]
//   at::Generator gen = at::detail::createCPUGenerator(42);
//   at::Tensor x = normal.rsample({10}, gen);               // [10, 3, 4], differentiable
//   at::Tensor lp = normal.log_prob(x);                     // [10, 3, 4]
//   std::cout << normal;                                    // Normal(loc: [3, 4], scale: [3, 4])
//
// Shapes follow PyTorch: a sample has shape sample_shape + batch_shape + event_shape, and
// log_prob reduces the event dims. Methods a distribution does not define throw
// NotImplementedError naming the distribution and the method.
//
// Validate-args mode is off by default (argument checks cost a device sync per call). Turn it
// on for the process with set_default_validate_args(true) or for one distribution through its
// `validate_args` constructor argument; then invalid parameters (NaN, a non-positive scale,
// probs off the simplex, ...) throw std::invalid_argument when the distribution is built, and
// values outside the support throw when passed to log_prob or cdf.
//
// Distributions are immutable after construction, so one may be shared across threads.
#pragma once

#include <ATen/core/DimVector.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sdk/distributions/support.h"

namespace tdp::dist {

// Thrown by methods that a distribution does not define (Python's NotImplementedError).
// CompositeDistribution::entropy catches it to fall back on a Monte-Carlo estimate.
class NotImplementedError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Process-wide default for validate-args mode (false unless set). Thread-safe.
void set_default_validate_args(bool value);
bool default_validate_args();

using GeneratorOpt = c10::optional<at::Generator>;

class Distribution {
 public:
  virtual ~Distribution() = default;

  // Class name as in PyTorch/tensordict: "Normal", "TanhNormal", ...
  virtual std::string name() const = 0;

  c10::IntArrayRef batch_shape() const { return batch_shape_; }
  c10::IntArrayRef event_shape() const { return event_shape_; }
  bool validate_args() const { return validate_args_; }

  // ---- sampling: every call takes an optional generator for reproducible runs -------------
  // Not differentiable. The default draws rsample under no_grad.
  virtual at::Tensor sample(c10::IntArrayRef sample_shape = {},
                            const GeneratorOpt& generator = c10::nullopt) const;
  // Reparameterized: gradients flow to the parameters. Throws unless has_rsample().
  virtual at::Tensor rsample(c10::IntArrayRef sample_shape = {},
                             const GeneratorOpt& generator = c10::nullopt) const;
  virtual bool has_rsample() const { return false; }

  // ---- scoring and moments ----------------------------------------------------------------
  virtual at::Tensor log_prob(const at::Tensor& value) const;
  virtual at::Tensor entropy() const;
  virtual at::Tensor mean() const;
  virtual at::Tensor mode() const;
  virtual at::Tensor variance() const;
  // sqrt(variance()) unless the distribution has a closed form.
  virtual at::Tensor stddev() const;
  // The value tensordict's DETERMINISTIC interaction type takes: the mean for continuous
  // distributions, the mode for discrete ones, unless a distribution says otherwise.
  virtual at::Tensor deterministic_sample() const;
  virtual at::Tensor cdf(const at::Tensor& value) const;
  virtual at::Tensor icdf(const at::Tensor& value) const;

  virtual Support support() const;

  // The parameters shown by to_string(), in constructor order.
  virtual std::vector<std::pair<std::string, at::Tensor>> printed_params() const { return {}; }
  // PyTorch's repr with shapes written as lists: "Normal(loc: [3, 4], scale: [3, 4])"; a
  // one-element parameter prints its value.
  virtual std::string to_string() const;

  // sample_shape + batch_shape + event_shape (inline storage: no allocation up to five dims).
  at::DimVector extended_shape(c10::IntArrayRef sample_shape = {}) const;

 protected:
  Distribution(c10::IntArrayRef batch_shape, c10::IntArrayRef event_shape, c10::optional<bool> validate_args);

  // Throws NotImplementedError("<Name> does not implement <method>").
  [[noreturn]] void not_implemented(const std::string& method) const;
  // In validate-args mode: throws when `value` does not satisfy `constraint`, naming this
  // distribution, the parameter and the first invalid entry.
  // (The names are views: they are only read to build a message.)
  // Inline, as validate_sample(): a distribution built per policy step without validation
  // makes no call for its checks.
  void check_param(std::string_view param, const at::Tensor& value, const Support& constraint) const {
    if (validate_args_) check_param_values(param, value, constraint);
  }
  // In validate-args mode: checks value's shape against batch/event shapes and its entries
  // against support(); `method` names the caller in the error.
  void validate_sample(const at::Tensor& value, std::string_view method) const {
    if (validate_args_) validate_sample_values(value, method);
  }

 private:
  void check_param_values(std::string_view param, const at::Tensor& value, const Support& constraint) const;
  void validate_sample_values(const at::Tensor& value, std::string_view method) const;

  // Inline storage: building a distribution per step allocates no shape.
  at::DimVector batch_shape_;
  at::DimVector event_shape_;
  bool validate_args_;
};

using DistributionPtr = std::shared_ptr<const Distribution>;

std::ostream& operator<<(std::ostream& out, const Distribution& distribution);

}  // namespace tdp::dist
