// tdp::nn's mappings, BiasedSoftplus, NormalParamExtractor and AddStateIndependentNormalScale
// against tensordict.nn's own classes (mappings, biased_softplus, NormalParamExtractor,
// AddStateIndependentNormalScale), at float32 and float64, as written by
// tests/golden/make_distribution_golden.py.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sdk/nn/biased_softplus.h"
#include "sdk/nn/mappings.h"
#include "sdk/nn/normal_param_extractor.h"
#include "tests/distributions/golden.h"

namespace tdp::nn {
namespace {

using dist::testing::TensorsClose;

// Deliberate difference: tdp::nn computes biased_softplus's shift, inv_softplus(bias - min_val),
// in double. tensordict's inv_softplus goes through torch.tensor(bias - min_val), a float32
// tensor, so its shift is rounded to float32 (about 3e-8 relative) and, for example, its
// biased_softplus_1.0 maps 0 to 0.99999998379 in float64 where the C++ gives 1 to the last
// bit, as the mapping's definition says. At float32 both agree to rounding; at float64 the
// outputs that go through a biased softplus are compared to float32 precision, and the
// C++'s own rule (0 -> bias) is checked exactly.
bool goes_through_biased_softplus(const std::string& mapping) {
  return mapping.rfind("biased_softplus", 0) == 0 || mapping == "default";
}

class NnGoldenTest : public dist::testing::GoldenDtypeTest {
 protected:
  bool f64() const { return GetParam() == "f64"; }
  // TensorsClose at the dtype's tolerance, or at float32's for a float64 value computed
  // through a biased softplus (see goes_through_biased_softplus).
  ::testing::AssertionResult Close(const at::Tensor& actual, const at::Tensor& expected,
                                   const std::string& mapping) const {
    if (f64() && goes_through_biased_softplus(mapping)) {
      return TensorsClose(actual, expected, 2e-6, 1e-6);
    }
    return TensorsClose(actual, expected);
  }
};

TEST_P(NnGoldenTest, Mappings) {
  const at::Tensor x = g("mappings", "x");
  for (const std::string name :
       {"softplus", "exp", "relu", "expln", "none", "biased_softplus", "biased_softplus_1.0",
        "biased_softplus_0.5_0.1", "biased_softplus_2.0_0.001"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(Close(mappings(name)(x), g("mappings", name), name));
  }
  // "abs" is a tdpolicy mapping that tensordict does not have (its mappings() raises
  // NotImplementedError for it); it is plain |x|.
  EXPECT_TRUE(TensorsClose(mappings("abs")(x), x.abs()));
}

TEST_P(NnGoldenTest, BiasedSoftplus) {
  const at::Tensor x = g("biased_softplus", "x");
  const at::Tensor args = g("biased_softplus", "args");  // rows of (bias, min_val)
  const at::Tensor out = g("biased_softplus", "out");
  const at::Tensor shift = g("biased_softplus", "shift");
  const at::Tensor zero = g("biased_softplus", "zero");
  ASSERT_EQ(args.dim(), 2);
  for (int64_t i = 0; i < args.size(0); ++i) {
    const double bias = args[i][0].item<double>();
    const double min_val = args[i][1].item<double>();
    SCOPED_TRACE("bias " + std::to_string(bias) + ", min_val " + std::to_string(min_val));
    BiasedSoftplus module(BiasedSoftplusOptions(bias).min_val(min_val));
    EXPECT_TRUE(Close(module(x), out[i], "biased_softplus"));
    const at::Tensor at_zero = module(at::zeros({1}, x.options()));
    EXPECT_TRUE(Close(at_zero, zero[i], "biased_softplus"));
    // tensordict's shift is float32-rounded; the C++'s is the double it approximates.
    EXPECT_NEAR(module->shift(), shift[i].item<double>(), 1e-6);
    EXPECT_DOUBLE_EQ(module->shift(), inv_softplus(bias - min_val));
    EXPECT_TRUE(TensorsClose(at_zero, at::full({1}, bias, x.options())));  // 0 -> bias
  }
}

struct ExtractorCase {
  const char* record;  // normal_param_extractor/<tag>/scale_<record>
  const char* scale_mapping;
  double scale_lb;
};

// The same table as NORMAL_PARAM_EXTRACTOR_CASES in make_distribution_golden.py.
const ExtractorCase kExtractorCases[] = {
    {"biased_softplus_1.0", "biased_softplus_1.0", 1e-4},
    {"biased_softplus", "biased_softplus", 1e-4},
    {"biased_softplus_0.5_0.1", "biased_softplus_0.5_0.1", 1e-4},
    {"biased_softplus_2.0_0.001", "biased_softplus_2.0_0.001", 1e-4},
    {"softplus", "softplus", 1e-4},
    {"exp", "exp", 1e-4},
    {"relu", "relu", 1e-4},
    {"expln", "expln", 1e-4},
    {"none", "none", 1e-4},
    {"softplus_lb_0.5", "softplus", 0.5},
};

TEST_P(NnGoldenTest, NormalParamExtractor) {
  const std::string c = "normal_param_extractor";
  const at::Tensor input = g(c, "input");
  {
    SCOPED_TRACE("default options");
    NormalParamExtractor extractor;
    auto [loc, scale] = extractor(input);
    EXPECT_TRUE(TensorsClose(loc, g(c, "loc")));
    EXPECT_TRUE(Close(scale, g(c, "scale_default"), "default"));
  }
  for (const ExtractorCase& k : kExtractorCases) {
    SCOPED_TRACE(k.record);
    NormalParamExtractor extractor(
        NormalParamExtractorOptions().scale_mapping(k.scale_mapping).scale_lb(k.scale_lb));
    auto [loc, scale] = extractor(input);
    EXPECT_TRUE(TensorsClose(loc, g(c, "loc")));
    EXPECT_TRUE(Close(scale, g(c, std::string("scale_") + k.record), k.scale_mapping));
  }
}

struct StateIndependentCase {
  const char* record;
  std::vector<int64_t> scale_shape;
  const char* scale_mapping;
  double scale_lb;
  double init_value;
  bool set_values;  // the "parameter" record was written into the parameter after construction
};

// The same table as STATE_INDEPENDENT_CASES in make_distribution_golden.py.
const StateIndependentCase kStateIndependentCases[] = {
    {"add_scale_default", {3}, "exp", 1e-4, 0.0, false},
    {"add_scale_exp_values", {3}, "exp", 1e-4, 0.0, true},
    {"add_scale_biased_softplus", {3}, "biased_softplus_1.0", 1e-4, 0.5, false},
    {"add_scale_softplus_lb", {2, 3}, "softplus", 0.5, 0.0, true},
};

TEST_P(NnGoldenTest, AddStateIndependentNormalScale) {
  for (const StateIndependentCase& k : kStateIndependentCases) {
    SCOPED_TRACE(k.record);
    const bool defaults = std::string(k.record) == "add_scale_default";
    AddStateIndependentNormalScale module(
        defaults ? AddStateIndependentNormalScaleOptions(k.scale_shape)
                 : AddStateIndependentNormalScaleOptions(k.scale_shape)
                       .scale_mapping(k.scale_mapping)
                       .scale_lb(k.scale_lb)
                       .init_value(k.init_value));
    const at::Tensor parameter = g(k.record, "parameter");
    if (k.set_values) {
      c10::NoGradGuard no_grad;
      module->state_independent_scale.copy_(parameter);
    }
    // As in tensordict, the parameter has the default dtype (float32) whatever loc's dtype, and
    // so has the scale.
    EXPECT_TRUE(TensorsClose(module->state_independent_scale, parameter));
    auto [loc, scale] = module(g(k.record, "loc"));
    EXPECT_TRUE(TensorsClose(loc, g(k.record, "loc")));
    EXPECT_TRUE(TensorsClose(scale, g(k.record, "scale")));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NnGoldenTest, ::testing::Values("f32", "f64"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tdp::nn
