#include "sdk/nn/tensor_spec.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <sstream>
#include <stdexcept>

namespace tdp::nn {
namespace {

// An index in [0, n) per entry of `shape`: uniform (torch.randint), or among the allowed
// entries of `mask` [*shape, n] (torch.multinomial over the mask as weights), as TorchRL's
// Categorical.rand and OneHot.rand draw.
at::Tensor draw_index(int64_t n, c10::IntArrayRef shape, const at::Tensor& mask,
                      const std::optional<at::Generator>& generator, const at::TensorOptions& options) {
  if (!mask.defined()) return at::randint(n, shape, generator, options.dtype(at::kLong));
  std::vector<int64_t> full(shape.begin(), shape.end());
  full.push_back(n);
  const at::Tensor expanded = mask.expand(full);
  const at::Tensor flat = expanded.dim() > 2 ? expanded.flatten(0, -2) : expanded;
  return at::multinomial(flat.to(at::kFloat), 1, /*replacement=*/false, generator).reshape(shape);
}

}  // namespace


TensorSpec TensorSpec::bounded(at::Tensor low, at::Tensor high, std::vector<int64_t> shape, at::ScalarType dtype) {
  if (!low.defined() || !high.defined())
    throw std::invalid_argument("TensorSpec::bounded: low and high must be defined");
  TensorSpec spec(Kind::kBounded, std::move(shape), dtype);
  spec.low_ = std::move(low);
  spec.high_ = std::move(high);
  return spec;
}

TensorSpec TensorSpec::one_hot(int64_t n, std::vector<int64_t> shape, at::ScalarType dtype) {
  if (n <= 0) throw std::invalid_argument("TensorSpec::one_hot: n must be positive, got " + std::to_string(n));
  if (shape.empty()) shape = {n};
  TensorSpec spec(Kind::kOneHot, std::move(shape), dtype);
  spec.n_ = n;
  return spec;
}

TensorSpec TensorSpec::categorical(int64_t n, std::vector<int64_t> shape, at::ScalarType dtype) {
  if (n <= 0) throw std::invalid_argument("TensorSpec::categorical: n must be positive, got " + std::to_string(n));
  TensorSpec spec(Kind::kCategorical, std::move(shape), dtype);
  spec.n_ = n;
  return spec;
}

bool TensorSpec::shape_matches(const at::Tensor& value) const {
  const int64_t dims = static_cast<int64_t>(shape_.size());
  if (value.dim() < dims) return false;
  for (int64_t i = 1; i <= dims; ++i) {
    const int64_t want = shape_[dims - i];
    if (want != 1 && want != value.size(-i)) return false;
  }
  return true;
}

bool TensorSpec::is_in(const at::Tensor& value) const {
  if (!shape_matches(value) || value.scalar_type() != dtype_) return false;
  switch (kind_) {
    case Kind::kBounded:
      return (value >= low_.to(value.device())).all().item<bool>() &&
             (value <= high_.to(value.device())).all().item<bool>();
    case Kind::kOneHot:
      return (value.sum(-1) == 1).all().item<bool>();
    case Kind::kCategorical:
      return (value >= 0).all().item<bool>() && (value < n_).all().item<bool>();
  }
  return false;
}

at::Tensor TensorSpec::project(const at::Tensor& value, const std::optional<at::Generator>& generator) const {
  if (is_in(value)) return value;
  switch (kind_) {
    case Kind::kBounded: {
      const at::Tensor low = low_.to(value.device()).expand_as(value);
      const at::Tensor high = high_.to(value.device()).expand_as(value);
      return at::clamp(value, low, high);
    }
    case Kind::kOneHot: {
      // torch.multinomial(value.float(), 1) per row of the last dim.
      if (value.dim() == 0 || value.size(-1) != n_) {
        throw std::invalid_argument("OneHot(n=" + std::to_string(n_) + "): cannot project a value of shape " +
                                    shape_to_string(value.sizes()) + " (its last dim must be n)");
      }
      const at::Tensor rows = value.to(at::kFloat).reshape({-1, n_});
      at::Tensor index =
          at::multinomial(rows, 1, /*replacement=*/false, generator).reshape(value.sizes().slice(0, value.dim() - 1));
      return at::one_hot(index, n_).to(dtype_);
    }
    case Kind::kCategorical: {
      at::Tensor rounded = value.scalar_type() == at::kInt || value.scalar_type() == at::kLong ? value : value.round();
      return rounded.clamp(0, n_ - 1);
    }
  }
  return value;
}

std::string TensorSpec::to_string() const {
  std::ostringstream out;
  out << (kind_ == Kind::kBounded ? "Bounded" : kind_ == Kind::kOneHot ? "OneHot" : "Categorical") << "(";
  if (kind_ != Kind::kBounded) out << "n=" << n_ << ", ";
  out << "shape=" << shape_to_string(shape_) << ", dtype=" << c10::toString(dtype_) << ")";
  return out.str();
}

void project_entries(const std::vector<SpecProjection>& projections, TensorDict& out,
                     const std::optional<at::Generator>& generator) {
  static const at::Tensor kAbsent;
  for (const SpecProjection& projection : projections) {
    const at::Tensor value = out.get(projection.key, kAbsent);
    if (!value.defined()) continue;
    at::Tensor projected = projection.spec.project(value, generator);
    if (!projected.is_same(value)) out.set(projection.key, std::move(projected));
  }
}

at::Tensor TensorSpec::rand(const at::Tensor& action, const at::Tensor& mask,
                            const std::optional<at::Generator>& generator) const {
  switch (kind_) {
    case Kind::kCategorical:
      return draw_index(n_, action.sizes(), mask, generator, action.options()).to(dtype_);
    case Kind::kOneHot:
      return at::one_hot(draw_index(n_, action.sizes().slice(0, action.dim() - 1), mask, generator, action.options()), n_)
          .to(dtype_);
    case Kind::kBounded: {
      // TorchRL's Bounded.rand for floating dtypes: low + (high - low) * U[0, 1), then values
      // rounded past a bound put back on it.
      const at::Tensor a = low_.to(action.device(), dtype_);
      const at::Tensor b = high_.to(action.device(), dtype_);
      at::Tensor out = at::empty(action.sizes(), action.options().dtype(dtype_)).uniform_(0, 1, generator) * (b - a) + a;
      out = at::where(out > b, b.expand_as(out), out);
      return at::where(out < a, a.expand_as(out), out);
    }
  }
  throw std::logic_error("TensorSpec: unknown kind");
}

}  // namespace tdp::nn
