// TorchScript modules in a TensorDictModule (tensordict wraps any callable, including
// torch.jit.script modules). The modules are compiled here from TorchScript source with
// torch::jit::Module::define, so no binary test data is needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/types.h>

#include <sstream>

#include "sdk/nn/scripted_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "tests/testing/error_of.h"
#include "tests/testing/files.h"
#include "tests/testing/module_keys.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;
using test_util::keys;
using test_util::make_td;

torch::jit::Module make_affine() {
  // Modules scripted in Python carry a "training" attribute; ones built in C++ need it added.
  torch::jit::Module inner("Inner");
  inner.register_attribute("training", c10::BoolType::get(), true);
  inner.register_parameter("scale", torch::full({3}, 2.0), /*is_buffer=*/false);
  torch::jit::Module m("Affine");
  m.register_attribute("training", c10::BoolType::get(), true);
  m.register_parameter("bias", torch::ones({3}), /*is_buffer=*/false);
  m.register_buffer("offset", torch::zeros({3}));
  m.register_module("inner", inner);
  m.define(R"JIT(
def forward(self, x):
    return x * self.inner.scale + self.bias + self.offset

def split(self, x):
    return x - 1, x + 1

def combine(self, x, y):
    return y - x

def as_dict(self, x):
    return {"b": x + 1, "c": x}

def maybe(self, x, y: Optional[Tensor]):
    if y is None:
        return x
    return x + y
)JIT");
  return m;
}

TEST(ScriptedModuleTest, ForwardReadsAndWritesKeys) {
  TensorDictModule module = scripted_module(make_affine(), keys({"x"}, {"y"}));
  TensorDict td = module(make_td({{"x", torch::ones({4, 3})}}, {4}));
  EXPECT_TRUE(td.get("y").eq(3).all().item<bool>());
}

TEST(ScriptedModuleTest, ParametersAreMirrored) {
  torch::jit::Module jit = make_affine();
  TensorDictModule module = scripted_module(jit, keys({"x"}, {"y"}));
  auto params = module->named_parameters();
  ASSERT_TRUE(params.contains("module.bias"));
  ASSERT_TRUE(params.contains("module.inner.scale"));
  EXPECT_TRUE(module->named_buffers().contains("module.offset"));
  // The same tensors: training the C++ side trains the TorchScript module.
  {
    torch::NoGradGuard no_grad;
    params["module.bias"].fill_(5);
  }
  TensorDict td = module(make_td({{"x", torch::zeros({3})}}));
  EXPECT_TRUE(td.get("y").eq(5).all().item<bool>());
  module->to(torch::kFloat64);
  td = module(make_td({{"x", torch::zeros({3}, torch::kFloat64)}}));
  EXPECT_EQ(td.get("y").scalar_type(), torch::kFloat64);
  module->eval();
  EXPECT_FALSE(jit.is_training());
  std::ostringstream printed;
  printed << *module;
  EXPECT_THAT(printed.str(), HasSubstr("(module): TorchScript(__torch__.Affine, method=forward)"));
}

TEST(ScriptedModuleTest, OtherMethodsAndOutputForms) {
  auto split = scripted_module(make_affine(), keys({"x"}, {"lo", "hi"}), "split");
  TensorDict td = split(make_td({{"x", torch::zeros({})}}));
  EXPECT_EQ(td.get("lo").item<float>(), -1.0f);
  EXPECT_EQ(td.get("hi").item<float>(), 1.0f);

  auto as_dict = scripted_module(make_affine(), keys({"a"}, {"c", "b"}), "as_dict");
  td = as_dict(make_td({{"a", torch::zeros({})}}));
  EXPECT_EQ(td.get("b").item<float>(), 1.0f);
  EXPECT_EQ(td.get("c").item<float>(), 0.0f);

  auto bad_dict = scripted_module(make_affine(), keys({"a"}, {"z"}), "as_dict");
  EXPECT_EQ(error_of<KeyError>([&] { bad_dict(make_td({{"a", torch::zeros({})}})); }),
            "TensorDictModule(in_keys=['a'], out_keys=['z']): the TorchScript method returned a "
            "dict without the out_key 'z'; it has keys ['b', 'c'].");
}

TEST(ScriptedModuleTest, KeywordArgumentsFromInKeysMap) {
  auto combine = scripted_module(
      make_affine(), TensorDictModuleOptions().in_keys_map({{"x", "1"}, {"y", "2"}}).out_keys({"a"}),
      "combine");
  TensorDict td = make_td({{"1", torch::ones({1})}, {"2", torch::full({1}, 3.0)}});
  EXPECT_EQ(combine(td).get("a").item<float>(), 2.0f);

  // Wrong direction: "1" and "2" are taken as argument names, which TorchScript rejects.
  auto wrong = scripted_module(
      make_affine(),
      TensorDictModuleOptions().in_keys_map({{"x", "1"}, {"y", "2"}}).out_to_in_map(false).out_keys({"a"}),
      "combine");
  const std::string message =
      error_of<c10::Error>([&] { wrong(make_td({{"x", torch::ones({1})}, {"y", torch::ones({1})}})); });
  EXPECT_THAT(message, HasSubstr("combine() is missing value for argument 'x'"));
  EXPECT_THAT(message, HasSubstr("TensorDictModule(in_keys=['x', 'y'], out_keys=['a'])"));
}

TEST(ScriptedModuleTest, MissingInputIsNoneWhenNotStrict) {
  auto maybe = scripted_module(make_affine(), keys({"x", "y"}, {"z"}), "maybe");
  EXPECT_EQ(maybe(make_td({{"x", torch::ones({})}})).get("z").item<float>(), 1.0f);
  EXPECT_EQ(maybe(make_td({{"x", torch::ones({})}, {"y", torch::ones({})}})).get("z").item<float>(),
            2.0f);
}

TEST(ScriptedModuleTest, UnknownMethodListsMethods) {
  EXPECT_EQ(error_of<std::invalid_argument>(
                [] { scripted_module(make_affine(), keys({"x"}, {"y"}), "nope"); }),
            "scripted_module: the TorchScript module __torch__.Affine has no method 'nope'; its "
            "methods are ['forward', 'split', 'combine', 'as_dict', 'maybe'].");
}

TEST(ScriptedModuleTest, LoadsASavedFileIntoASequence) {
  const std::string path = test_util::temp_path("affine.pt");
  make_affine().save(path);
  TensorDictSequential seq({load_scripted_module(path, keys({"x"}, {"y"})),
                            load_scripted_module(path, keys({"y"}, {"lo", "hi"}), "split")});
  TensorDict td = seq(make_td({{"x", torch::zeros({2, 3})}}, {2}));
  EXPECT_TRUE(td.get("hi").eq(2).all().item<bool>());
  EXPECT_THROW(load_scripted_module(path + ".missing", keys({"x"}, {"y"})), c10::Error);
}

}  // namespace
}  // namespace tdp::nn
