// as_tensordict_module (sdk/nn/as_tensordict_module.h): free functions and methods as modules;
// tensordict's TestAsTDM.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "sdk/nn/as_tensordict_module.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using test_util::make_td;

struct Counter {
  at::Tensor add(const at::Tensor& c) {
    ++calls;
    return c + 1;
  }
  at::Tensor scaled(const at::Tensor& c) const { return c * factor; }
  int calls = 0;
  double factor = 3.0;
};

TEST(AsTensorDictModuleTest, FreeFunctionAndMethod) {
  auto func = as_tensordict_module([](const at::Tensor& c) { return c + 1; }, {"c"}, {"d"});
  EXPECT_EQ(func(make_td({{"c", torch::zeros({})}})).get("d").item<float>(), 1.0f);

  Counter counter;
  auto method = as_tensordict_module(&Counter::add, &counter, {"c"}, {"d"});
  EXPECT_EQ(method(make_td({{"c", torch::zeros({})}})).get("d").item<float>(), 1.0f);
  EXPECT_EQ(counter.calls, 1);
  const Counter& const_counter = counter;
  auto const_method = as_tensordict_module(&Counter::scaled, &const_counter, {"c"}, {"d"});
  EXPECT_EQ(const_method(make_td({{"c", torch::ones({})}})).get("d").item<float>(), 3.0f);
}

}  // namespace
}  // namespace tdp::nn
