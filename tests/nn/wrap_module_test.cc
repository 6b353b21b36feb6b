// WrapModule (sdk/nn/wrap_module.h): a TensorDict -> TensorDict function as a module.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/nn/wrap_module.h"
#include "tests/testing/module_keys.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using test_util::key_strings;
using test_util::keys;
using test_util::make_td;

TEST(WrapModuleTest, ReshapesInsideASequence) {
  TensorDictSequential seq({TensorDictModule([](const at::Tensor& x) { return x * 2; }, keys({"x"}, {"y"})),
                            WrapModule([](TensorDict td) { return td.reshape({-1}); })});
  TensorDict td = seq(make_td({{"x", torch::ones({3, 4, 5})}}, {3, 4}));
  EXPECT_EQ(td.batch_size().vec(), (std::vector<int64_t>{12}));
  EXPECT_TRUE(td.get("y").eq(2).all().item<bool>());
  EXPECT_EQ(td.get("y").sizes(), (std::vector<int64_t>{12, 5}));
}

TEST(WrapModuleTest, InplaceUpdatesTheInput) {
  auto fn = [](TensorDict td) { return make_td({{"z", td.get("x") + 1}}); };
  WrapModule copying(fn, WrapModuleOptions().in_keys({"x"}).out_keys({"z"}));
  WrapModule inplace(fn, WrapModuleOptions().inplace(true).in_keys({"x"}).out_keys({"z"}));
  EXPECT_EQ(key_strings(copying->in_keys()), (std::vector<std::string>{"'x'"}));
  TensorDict td = make_td({{"x", torch::zeros({})}});
  TensorDict out = copying(td);
  EXPECT_FALSE(out.is_same(td));
  EXPECT_FALSE(td.contains("z"));
  out = inplace(td);
  EXPECT_TRUE(out.is_same(td));
  EXPECT_EQ(td.get("z").item<float>(), 1.0f);
}

}  // namespace
}  // namespace tdp::nn
