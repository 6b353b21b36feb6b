// Reads the golden file written by tests/golden/make_distribution_golden.py: one tensor per line,
// "<name> <dtype> <ndim> <dims...> <values...>". The file is tests/golden/distributions_golden.txt
// (the committed one, a data dependency of the test), or the file named by the environment
// variable TDP_GOLDEN_FILE when it is set (//tests/golden:distributions_golden_regenerated_test
// points it at a file freshly written from the installed torch/tensordict/torchrl).
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
  // Every record whose name starts with `prefix`, keyed by the rest of its name, e.g.
  // with_prefix("composite/f32/log_prob/") -> {"agent.action_log_prob": ..., ...}.
  std::map<std::string, at::Tensor> with_prefix(const std::string& prefix) const;
  // The file the records came from.
  const std::string& path() const { return path_; }
  size_t size() const { return records_.size(); }

 private:
  std::map<std::string, at::Tensor> records_;
  std::string path_;
};

// Base of the suites parameterized by the dtype tag ("f32", "f64"): g(case, field) is the record
// `case/<tag>/field`.
class GoldenDtypeTest : public ::testing::TestWithParam<std::string> {
 protected:
  at::Tensor g(const std::string& case_name, const std::string& field) const {
    return Golden::get().at(case_name, GetParam(), field);
  }
};

// gtest assertion: same shape, NaN and inf in the same places, finite entries within
// atol + rtol * |expected| (rtol/atol chosen from the dtype: float32 rounding or 1e-12).
::testing::AssertionResult TensorsClose(const at::Tensor& actual, const at::Tensor& expected);
// The same with explicit tolerances, for the few places where the C++ deliberately computes
// more precisely than the reference (each caller says why).
::testing::AssertionResult TensorsClose(const at::Tensor& actual, const at::Tensor& expected,
                                        double rtol, double atol);

}  // namespace tdp::dist::testing
