// Reads tests/golden/distributions_golden.txt (written by make_distribution_golden.py): one
// tensor per line, "<name> <dtype> <ndim> <dims...> <values...>".
#pragma once

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tdp::dist::testing {

class Golden {
 public:
  // Loads the file once per process; a missing or malformed file fails the test that asks.
  static const Golden& get();

  // The tensor named `case_name/<tag>/<field>`, e.g. at("normal", "f32", "log_prob").
  at::Tensor at(const std::string& case_name, const std::string& tag,
                const std::string& field) const;
  bool contains(const std::string& name) const { return records_.count(name) > 0; }
  size_t size() const { return records_.size(); }

 private:
  std::map<std::string, at::Tensor> records_;
};

// gtest assertion: same shape, NaN and inf in the same places, finite entries within
// atol + rtol * |expected| (rtol/atol chosen from the dtype: float32 rounding or 1e-12).
::testing::AssertionResult TensorsClose(const at::Tensor& actual, const at::Tensor& expected);

}  // namespace tdp::dist::testing
