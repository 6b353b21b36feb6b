#include <gtest/gtest.h>

#include "tests/distributions/golden.h"
#include "tests/testing/golden_file.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace tdp::dist::testing {
namespace {

constexpr char kDefaultPath[] = "tests/golden/distributions_golden.txt";

std::string golden_path() {
  const char* path = std::getenv("TDP_GOLDEN_FILE");
  return path != nullptr && *path != '\0' ? std::string(path) : std::string(kDefaultPath);
}


}  // namespace

const Golden& Golden::get() {
  static const Golden* golden = [] {
    auto* g = new Golden();
    g->path_ = golden_path();
    g->records_ = test_util::read_golden_file(g->path_);
    return g;
  }();
  return *golden;
}

at::Tensor Golden::at(const std::string& case_name, const std::string& tag,
                      const std::string& field) const {
  const std::string name = case_name + "/" + tag + "/" + field;
  auto it = records_.find(name);
  if (it == records_.end()) throw std::out_of_range("no golden record " + name);
  return it->second;
}

std::map<std::string, at::Tensor> Golden::with_prefix(const std::string& prefix) const {
  std::map<std::string, at::Tensor> out;
  for (auto it = records_.lower_bound(prefix);
       it != records_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out.emplace(it->first.substr(prefix.size()), it->second);
  }
  return out;
}

::testing::AssertionResult TensorsClose(const at::Tensor& actual, const at::Tensor& expected) {
  const bool is_float = expected.scalar_type() == at::kFloat;
  return TensorsClose(actual, expected, is_float ? 2e-6 : 1e-12, is_float ? 1e-6 : 1e-12);
}

::testing::AssertionResult TensorsClose(const at::Tensor& actual_in, const at::Tensor& expected,
                                        double rtol, double atol) {
  if (!actual_in.defined()) return ::testing::AssertionFailure() << "actual is undefined";
  if (actual_in.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << actual_in.sizes() << " vs expected "
                                         << expected.sizes();
  }
  if (actual_in.scalar_type() != expected.scalar_type()) {
    return ::testing::AssertionFailure() << "dtype " << actual_in.scalar_type()
                                         << " vs expected " << expected.scalar_type();
  }
  at::Tensor a = actual_in.detach().to(at::kDouble).reshape(-1);
  at::Tensor e = expected.to(at::kDouble).reshape(-1);
  for (int64_t i = 0; i < e.numel(); ++i) {
    const double x = a[i].item<double>();
    const double y = e[i].item<double>();
    bool ok;
    if (std::isnan(y)) {
      ok = std::isnan(x);
    } else if (std::isinf(y)) {
      ok = x == y;
    } else {
      ok = std::isfinite(x) && std::abs(x - y) <= atol + rtol * std::abs(y);
    }
    if (!ok) {
      std::ostringstream msg;
      msg.precision(17);
      msg << "entry " << i << ": " << x << " vs expected " << y << " (diff " << x - y << ")";
      return ::testing::AssertionFailure() << msg.str();
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tdp::dist::testing
