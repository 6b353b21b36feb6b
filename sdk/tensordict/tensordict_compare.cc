// TensorDict comparison: equal and allclose.
#include "sdk/tensordict/tensordict.h"

namespace tdp {

namespace {
bool leaves_match(const TensorDict& a, const TensorDict& b,
                  const std::function<bool(const at::Tensor&, const at::Tensor&)>& same) {
  if (a.batch_size() != b.batch_size()) return false;
  const auto a_items = a.items(true, true);
  if (a_items.size() != b.items(true, true).size()) return false;
  for (const auto& [key, entry] : a_items) {
    if (!b.contains(key) || b.is_tensordict(key)) return false;
    const at::Tensor& x = entry.tensor();
    const at::Tensor y = b.get(key);
    if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type() || !same(x, y)) return false;
  }
  return true;
}
}  // namespace

bool TensorDict::equal(const TensorDict& other) const {
  return leaves_match(*this, other, [](const at::Tensor& x, const at::Tensor& y) { return x.equal(y); });
}

bool TensorDict::allclose(const TensorDict& other, double rtol, double atol) const {
  return leaves_match(*this, other,
                      [rtol, atol](const at::Tensor& x, const at::Tensor& y) { return x.allclose(y, rtol, atol); });
}

}  // namespace tdp
