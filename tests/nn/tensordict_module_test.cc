// TensorDictModule and TensorDictModuleBase: the behaviours of tensordict's TestTDModule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/serialize.h>
#include <torch/types.h>

#include <sstream>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "tests/testing/error_of.h"
#include "tests/testing/log_capture.h"
#include "tests/testing/module_keys.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;
using test_util::keys;
using test_util::LogCapture;
using test_util::make_td;

struct MyModule : TensorDictModuleBase {
  MyModule() : TensorDictModuleBase("MyModule", {"a"}, {"b"}) {
    net = register_module("net", torch::nn::Linear(3, 4));
  }
  TensorDict forward_impl(TensorDict td, const std::optional<TensorDict>&) override {
    return td.set("b", net(td.get("a")));
  }
  torch::nn::Linear net{nullptr};
};

TEST(TensorDictModuleTest, ReprOfBaseSubclassShowsChildrenAndKeys) {
  const std::string text = MyModule().to_string();
  EXPECT_EQ(text,
            "MyModule(\n"
            "    net=torch::nn::Linear(in_features=3, out_features=4, bias=true),\n"
            "    in_keys=['a'],\n"
            "    out_keys=['b'])");
}

TEST(TensorDictModuleTest, ReprOfWrappedModuleListsItOnce) {
  TensorDictModule mod(torch::nn::Linear(3, 4), keys({"a"}, {"b"}));
  const std::string text = mod->to_string();
  EXPECT_EQ(text,
            "TensorDictModule(\n"
            "    module=torch::nn::Linear(in_features=3, out_features=4, bias=true),\n"
            "    in_keys=['a'],\n"
            "    out_keys=['b'])");
  std::ostringstream libtorch_form;
  libtorch_form << *mod;
  EXPECT_EQ(libtorch_form.str(),
            "TensorDictModule(in_keys=['a'], out_keys=['b'])(\n"
            "  (module): torch::nn::Linear(in_features=3, out_features=4, bias=true)\n"
            ")");
}

TEST(TensorDictModuleTest, ReprOfFunctionIsNotAChild) {
  TensorDictModule mod([](const at::Tensor& x) { return x + 1; }, keys({"a"}, {"b"}));
  EXPECT_TRUE(mod->named_children().is_empty());
  EXPECT_EQ(mod->to_string(),
            "TensorDictModule(\n    module=<function>,\n    in_keys=['a'],\n    out_keys=['b'])");
}

TEST(TensorDictModuleTest, VariadicFunctionTakesAllInputs) {
  TensorDictModule mod([](const TensorList& x) { return x; }, keys({"a", "b", "c"}, {"d", "e", "f"}));
  TensorDict td = mod(make_td({{"a", torch::zeros({})}, {"b", torch::ones({})}, {"c", torch::full({}, 2.0)}}));
  EXPECT_TRUE(td.contains("d"));
  EXPECT_TRUE(td.contains("e"));
  EXPECT_EQ(td.get("f").item<float>(), 2.0f);
}

// A module called from inside another module's callable, and a list of another length on the
// next call, get their own inputs.
TEST(TensorDictModuleTest, AModuleCalledInsideAnotherModulesCallableGetsItsOwnInputs) {
  TensorDictModule inner([](const at::Tensor& x) { return x * 10; }, keys({"x"}, {"y"}));
  TensorDictModule outer(
      [&](const at::Tensor& a, const at::Tensor& b) {
        const at::Tensor y = inner(make_td({{"x", a}})).get("y");
        return std::make_tuple(y + b, y - b);
      },
      keys({"a", "b"}, {"sum", "difference"}));
  for (int call = 0; call < 2; ++call) {
    TensorDict td = outer(make_td({{"a", torch::ones({})}, {"b", torch::full({}, 2.0)}}));
    EXPECT_EQ(td.get("sum").item<float>(), 12.0f);
    EXPECT_EQ(td.get("difference").item<float>(), 8.0f);
    TensorDict three = TensorDictModule([](const TensorList& x) { return x; }, keys({"a", "b", "c"}, {"d", "e", "f"}))(
        make_td({{"a", torch::zeros({})}, {"b", torch::ones({})}, {"c", torch::full({}, 2.0)}}));
    EXPECT_EQ(three.get("f").item<float>(), 2.0f);
    EXPECT_EQ(inner(make_td({{"x", torch::full({}, 3.0)}})).get("y").item<float>(), 30.0f);
  }
}

TEST(TensorDictModuleTest, NestedKeysAreFlattened) {
  TensorDictModule mod([](const TensorList& x) { return x; },
                       keys({"a", {"b"}, {"c", {"d"}}}, {"e", {"f"}, {"g", {"h"}}}));
  EXPECT_EQ(test_util::key_strings(mod->in_keys()),
            (std::vector<std::string>{"'a'", "'b'", "('c', 'd')"}));
  EXPECT_EQ(test_util::key_strings(mod->out_keys()),
            (std::vector<std::string>{"'e'", "'f'", "('g', 'h')"}));
}

TEST(TensorDictModuleTest, InputKeysAsList) {
  TensorDictModule mod([](const at::Tensor& a) { return a + 1; }, keys({"1"}, {"a"}));
  TensorDict td = mod(make_td({{"1", torch::ones({1})}}));
  EXPECT_TRUE(td.get("a").eq(2).all().item<bool>());
}

TEST(TensorDictModuleTest, InputKeysMapKeyToArgument) {
  // tensordict: in_keys={"1": "a", ("2", "smth"): "b", ("3", ("other", ("thing",))): "c"},
  // out_to_in_map=False.
  TensorDictModule mod(
      [](const TensorKwargs& kw) {
        EXPECT_TRUE(kw.at("b").defined());
        EXPECT_TRUE(kw.at("c").defined());
        return kw.at("a") + 1;
      },
      TensorDictModuleOptions()
          .in_keys_map({{"1", "a"}, {{"2", "smth"}, "b"}, {{"3", {"other", {"thing"}}}, "c"}})
          .out_to_in_map(false)
          .out_keys({"a"}));
  EXPECT_EQ(test_util::key_strings(mod->in_keys()),
            (std::vector<std::string>{"'1'", "('2', 'smth')", "('3', 'other', 'thing')"}));
  EXPECT_EQ(mod->arg_names(), (std::vector<std::string>{"a", "b", "c"}));
  TensorDict td = make_td({{"1", torch::ones({1})},
                           {{"2", "smth"}, torch::ones({2})},
                           {{"3", "other", "thing"}, torch::ones({3})}});
  EXPECT_TRUE(mod(td).get("a").eq(2).all().item<bool>());
}

TEST(TensorDictModuleTest, InputKeysMapArgumentToKeyByDefault) {
  auto fn = [](const TensorKwargs& kw) { return kw.at("y") - kw.at("x"); };
  TensorDictModule by_default(fn, TensorDictModuleOptions().in_keys_map({{"x", "1"}, {"y", "2"}}).out_keys({"a"}));
  TensorDictModule reversed(fn, TensorDictModuleOptions()
                                    .in_keys_map({{"1", "x"}, {"2", "y"}})
                                    .out_to_in_map(false)
                                    .out_keys({"a"}));
  TensorDict td = make_td({{"1", torch::ones({1})}, {"2", torch::full({1}, 3.0)}});
  EXPECT_EQ(by_default(td.clone()).get("a").item<float>(), 2.0f);
  EXPECT_EQ(reversed(td.clone()).get("a").item<float>(), 2.0f);
}

TEST(TensorDictModuleTest, SameKeyForTwoArguments) {
  TensorDictModule mod([](const TensorKwargs& kw) { return kw.at("x") + kw.at("y") + kw.at("z"); },
                       TensorDictModuleOptions()
                           .in_keys_map({{"x", "1"}, {"y", "2"}, {"z", "2"}})
                           .out_to_in_map(true)
                           .out_keys({"t"}));
  TensorDict td = mod(make_td({{"1", torch::ones({})}, {"2", torch::full({}, 2.0)}}));
  EXPECT_EQ(td.get("t").item<float>(), 5.0f);
}

TEST(TensorDictModuleTest, UnusedOutToInMapWarns) {
  LogCapture log;
  TensorDictModule mod([](const at::Tensor& x) { return x; },
                       keys({"x"}, {"a"}).out_to_in_map(false));
  EXPECT_THAT(log.text(),
              HasSubstr("out_to_in_map is not None but is only used when in_key is a dictionary"));
}

TEST(TensorDictModuleTest, UnderscoreInputKeyWarns) {
  LogCapture log;
  TensorDictModule mod([](const at::Tensor& x) { return x; }, keys({"_"}, {""}));
  EXPECT_THAT(log.text(),
              HasSubstr("key \"_\" is for ignoring output, it should not be used in input keys"));
}

TEST(TensorDictModuleTest, MapNeedsCallableTakingNames) {
  const std::string message = error_of<std::invalid_argument>([] {
    TensorDictModule(torch::nn::Linear(1, 1),
                     TensorDictModuleOptions().in_keys_map({{"x", "1"}}).out_keys({"a"}));
  });
  EXPECT_EQ(message,
            "TensorDictModule(in_keys=['1'], out_keys=['a']): in_keys_map passes inputs by name, "
            "but the wrapped callable takes positional tensors. Use in_keys, or wrap a callable "
            "taking tdp::nn::TensorKwargs or a TorchScript method.");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              TensorDictModule([](const TensorKwargs& kw) { return kw.at("x"); }, keys({"x"}, {"a"}));
            }),
            "TensorDictModule(in_keys=['x'], out_keys=['a']): the wrapped callable takes its "
            "tensors by name (tdp::nn::TensorKwargs), so the inputs must be given with in_keys_map, "
            "which names the argument of each key.");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              TensorDictModule([](const at::Tensor& x) { return x; },
                               TensorDictModuleOptions().in_keys({"y"}).in_keys_map({{"x", "y"}}));
            }),
            "TensorDictModule: give the inputs either as in_keys or as in_keys_map, not both; got "
            "in_keys=['y'].");
}

TEST(TensorDictModuleTest, ArityMismatchIsReportedAtConstruction) {
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              TensorDictModule([](const at::Tensor& x, const at::Tensor& y) { return x + y; },
                               keys({"x"}, {"z"}));
            }),
            "TensorDictModule(in_keys=['x'], out_keys=['z']): the wrapped callable takes 2 tensor "
            "argument(s) but in_keys has 1 key(s).");
  EXPECT_EQ(error_of<std::invalid_argument>(
                [] { TensorDictModule(torch::nn::Linear(2, 2), keys({"x", "y"}, {"z"})); }),
            "TensorDictModule(in_keys=['x', 'y'], out_keys=['z']): the wrapped callable takes 1 "
            "tensor argument(s) but in_keys has 2 key(s).");
}

TEST(TensorDictModuleTest, EmptyModuleIsRejected) {
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              TensorDictModule(torch::nn::Linear(nullptr), keys({"in"}, {"out"}));
            }),
            "TensorDictModule(in_keys=['in'], out_keys=['out']): the module to wrap is empty (a "
            "null module, an empty module holder or an empty std::function).");
  EXPECT_THROW(TensorDictModule(std::function<at::Tensor(at::Tensor)>(), keys({"in"}, {"out"})),
               std::invalid_argument);
}

TEST(TensorDictModuleTest, ResetParametersRecursive) {
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(1, 1), torch::nn::ReLU());
  at::Tensor weight = net[0]->as<torch::nn::Linear>()->weight;
  at::Tensor old = weight.clone();
  TensorDictModule module(net, keys({"in"}, {"out"}));
  TensorDictModule another(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 1, 1)), keys({"in"}, {"out"}));
  TensorDictSequential seq({module, another});
  EXPECT_TRUE(seq->reset_parameters_recursive());
  // Same tensor (optimizers keep working), new values.
  EXPECT_TRUE(net[0]->as<torch::nn::Linear>()->weight.is_same(weight));
  EXPECT_FALSE(torch::equal(old, weight));
}

TEST(TensorDictModuleTest, ResetParametersWarnsWhenNothingToReset) {
  LogCapture log;
  TensorDictModule module(torch::nn::Sequential(torch::nn::Tanh(), torch::nn::ReLU()), keys({"in"}, {"out"}));
  EXPECT_FALSE(module->reset_parameters_recursive());
  EXPECT_THAT(log.text(),
              HasSubstr("TensorDictModule(in_keys=['in'], out_keys=['out']): "
                        "reset_parameters_recursive was called without the parameters argument "
                        "and did not find any parameters to reset"));
}

struct Resettable : torch::nn::Module, ParameterResettable {
  Resettable() { w = register_parameter("w", torch::zeros({2})); }
  void reset_parameters() override { torch::NoGradGuard g; w.fill_(7); }
  at::Tensor forward(const at::Tensor& x) { return x * w; }
  at::Tensor w;
};

TEST(TensorDictModuleTest, ResetParametersReachesUserModules) {
  auto inner = std::make_shared<Resettable>();
  TensorDictModule module(inner, keys({"x"}, {"y"}));
  EXPECT_TRUE(module->reset_parameters_recursive());
  EXPECT_TRUE(inner->w.eq(7).all().item<bool>());
}

TEST(TensorDictModuleTest, StatefulLinear) {
  torch::manual_seed(0);
  TensorDictModule module(torch::nn::Linear(3, 4), keys({"in"}, {"out"}));
  TensorDict td = make_td({{"in", torch::randn({3, 3})}}, {3});
  TensorDict out = module(td);
  EXPECT_TRUE(out.is_same(td));
  EXPECT_EQ(td.get("out").sizes(), (std::vector<int64_t>{3, 4}));
}

TEST(TensorDictModuleTest, ParametersTrainEvalAndDtypeReachTheWrappedModule) {
  torch::nn::Linear linear(3, 4);
  TensorDictModule module(linear, keys({"in"}, {"out"}));
  auto params = module->named_parameters();
  ASSERT_TRUE(params.contains("module.weight"));
  EXPECT_TRUE(params["module.weight"].is_same(linear->weight));
  module->eval();
  EXPECT_FALSE(linear->is_training());
  module->to(torch::kFloat64);
  EXPECT_EQ(linear->weight.scalar_type(), torch::kFloat64);
}

TEST(TensorDictModuleTest, SaveAndLoadThroughTorchSerialize) {
  torch::manual_seed(0);
  TensorDictSequential saved({TensorDictModule(torch::nn::Linear(3, 4), keys({"x"}, {"h"})),
                              TensorDictModule(torch::nn::Linear(4, 2), keys({"h"}, {"y"}))});
  TensorDictSequential loaded({TensorDictModule(torch::nn::Linear(3, 4), keys({"x"}, {"h"})),
                               TensorDictModule(torch::nn::Linear(4, 2), keys({"h"}, {"y"}))});
  std::stringstream buffer;
  torch::save(saved, buffer);
  torch::load(loaded, buffer);
  TensorDict td = make_td({{"x", torch::randn({5, 3})}}, {5});
  EXPECT_TRUE(saved(td.clone()).get("y").equal(loaded(td.clone()).get("y")));
  EXPECT_TRUE(loaded->named_parameters().contains("module.1.module.bias"));
}

TEST(TensorDictModuleTest, StrictMissingInputThrowsKeyError) {
  auto check = [](const at::Tensor& a, const at::Tensor& b) {
    EXPECT_FALSE(b.defined());
    return a;
  };
  TensorDictModule strict(check, keys({"present", "missing"}, {"new_present"}).strict(true));
  TensorDict td = make_td({{"present", torch::zeros({})}});
  EXPECT_EQ(error_of<KeyError>([&] { strict(td); }),
            "TensorDictModule(in_keys=['present', 'missing'], out_keys=['new_present']): the input "
            "TensorDict has no entry 'missing' (strict=True); it has keys ['present'].");

  TensorDictModule lenient(check, keys({"present", "missing"}, {"new_present"}));
  TensorDict out = lenient(td);
  EXPECT_TRUE(out.get("new_present").is_same(td.get("present")));
}

TEST(TensorDictModuleTest, MissingInputOfFailingModuleIsAKeyError) {
  TensorDictModule module(torch::nn::Linear(2, 3), keys({"a"}, {"b"}));
  const std::string message =
      error_of<KeyError>([&] { module(make_td({{"c", torch::randn({})}})); });
  EXPECT_THAT(message,
              HasSubstr("TensorDictModule(in_keys=['a'], out_keys=['b']): Some tensors that are "
                        "necessary for the module call may not have not been found in the input "
                        "tensordict: the following inputs are None: ['a']. The TensorDict has "
                        "keys ['c']. The module failed with: "));
}

TEST(TensorDictModuleTest, WrongNumberOfOutputs) {
  TensorDictModule too_many([](const at::Tensor& x) { return std::make_tuple(x, x); },
                            keys({"x"}, {"y"}));
  EXPECT_EQ(error_of<std::runtime_error>([&] { too_many(make_td({{"x", torch::zeros({})}})); }),
            "TensorDictModule(in_keys=['x'], out_keys=['y']): the module returned 2 tensor(s) but "
            "out_keys has 1 key(s): ['y'].");
  TensorDictModule too_few([](const at::Tensor& x) { return x; }, keys({"x"}, {"y", "z"}));
  EXPECT_EQ(error_of<std::runtime_error>([&] { too_few(make_td({{"x", torch::zeros({})}})); }),
            "TensorDictModule(in_keys=['x'], out_keys=['y', 'z']): the module returned 1 "
            "tensor(s) but out_keys has 2 key(s): ['y', 'z'].");
}

TEST(TensorDictModuleTest, UnderscoreOutKeyDropsThatOutput) {
  TensorDictModule mod([](const at::Tensor& x) { return std::make_tuple(x - 1, x + 1); },
                       keys({{"input", "x"}}, {{"output", "x-1"}, "_"}));
  TensorDict td = mod(make_td({{{"input", "x"}, torch::zeros({})}}));
  EXPECT_EQ(td.get({"output", "x-1"}).item<float>(), -1.0f);
  EXPECT_FALSE(td.contains("_"));
  EXPECT_EQ(td.keys(true, true).size(), 2u);
}

TEST(TensorDictModuleTest, FunctionWithoutInputsPopulates) {
  TensorDictModule mod([]() { return torch::ones({3}); }, keys({}, {"x"}));
  EXPECT_EQ(mod(TensorDict()).get("x").sizes(), (std::vector<int64_t>{3}));
}

TEST(TensorDictModuleTest, DictLikeOutputsAreReadAtOutKeys) {
  TensorDictModule from_td([](const at::Tensor& x) { return make_td({{"b", x}, {"other", x}}); },
                           keys({"a"}, {"b"}));
  TensorDict out = from_td(make_td({{"a", torch::randn({3})}}));
  EXPECT_TRUE(out.get("b").equal(out.get("a")));
  EXPECT_FALSE(out.contains("other"));

  TensorDictModule from_map([](const at::Tensor& x) { return TensorKwargs{{"b", x}}; }, keys({"a"}, {"b"}));
  out = from_map(make_td({{"a", torch::randn({3})}}));
  EXPECT_TRUE(out.get("b").equal(out.get("a")));

  TensorDictModule missing([](const at::Tensor& x) { return TensorKwargs{{"c", x}}; }, keys({"a"}, {"b"}));
  EXPECT_EQ(error_of<KeyError>([&] { missing(make_td({{"a", torch::randn({3})}})); }),
            "TensorDictModule(in_keys=['a'], out_keys=['b']): the module returned a map without "
            "the out_key 'b'; it has keys ['c'].");
}

TEST(TensorDictModuleTest, InplaceFalseEmptyAndTensordictOut) {
  auto twice = [](const at::Tensor& x) { return std::make_tuple(x, x); };
  TensorDict td(make_td({{"x", torch::zeros({1})}}, {1}));
  TensorDictModule not_inplace(twice, keys({"x"}, {"y", "z"}).inplace(false));
  TensorDict out = not_inplace(td);
  EXPECT_FALSE(out.is_same(td));
  EXPECT_FALSE(out.contains("x"));
  EXPECT_TRUE(out.contains("y"));
  EXPECT_TRUE(out.contains("z"));
  EXPECT_EQ(out.batch_size().size(), 0u);
  EXPECT_FALSE(out.device().has_value());

  TensorDict on_cpu({{"x", torch::zeros({1})}}, {1}, c10::Device(c10::kCPU));
  TensorDictModule empty(twice, keys({"x"}, {"y", "z"}).inplace(Inplace::kEmpty));
  out = empty(on_cpu);
  EXPECT_FALSE(out.contains("x"));
  EXPECT_TRUE(out.contains("y"));
  EXPECT_EQ(out.batch_size().vec(), (std::vector<int64_t>{1}));
  EXPECT_EQ(out.device(), c10::Device(c10::kCPU));

  TensorDict target;
  out = empty(on_cpu, target);
  EXPECT_TRUE(out.is_same(target));
  EXPECT_FALSE(out.contains("x"));
  EXPECT_TRUE(out.contains("z"));
  EXPECT_EQ(out.batch_size().size(), 0u);
  EXPECT_FALSE(out.device().has_value());
}

TEST(TensorDictModuleTest, AnyModuleKeepsDefaultArguments) {
  torch::manual_seed(0);
  TensorDict td = make_td({{"input", torch::randn({3, 4})}, {"hidden", torch::randn({3, 8})}}, {3});
  // Direct call: both arguments from the TensorDict.
  TensorDictModule both(torch::nn::GRUCell(4, 8), keys({"input", "hidden"}, {"output"}));
  EXPECT_EQ(both(td.clone()).get("output").sizes(), (std::vector<int64_t>{3, 8}));
  // Through AnyModule, the hidden state may be left to its default.
  TensorDictModule only_input(torch::nn::AnyModule(torch::nn::GRUCell(4, 8)), keys({"input"}, {"output"}));
  EXPECT_EQ(only_input(td.clone()).get("output").sizes(), (std::vector<int64_t>{3, 8}));
  EXPECT_TRUE(only_input->named_parameters().contains("module.weight_ih"));
}

TEST(TensorDictModuleTest, AnyModuleTupleOutputs) {
  torch::manual_seed(0);
  TensorDictModule lstm(torch::nn::AnyModule(torch::nn::LSTM(4, 8)), keys({"x"}, {"y", "h", "_"}));
  TensorDict td = lstm(make_td({{"x", torch::randn({5, 2, 4})}}));
  EXPECT_EQ(td.get("y").sizes(), (std::vector<int64_t>{5, 2, 8}));
  EXPECT_EQ(td.get("h").sizes(), (std::vector<int64_t>{1, 2, 8}));
  EXPECT_FALSE(td.contains("_"));
}

TEST(TensorDictModuleTest, ModuleErrorsCarryTheModule) {
  TensorDictModule module(torch::nn::Linear(3, 4), keys({"x"}, {"y"}));
  EXPECT_THAT(error_of<c10::Error>([&] { module(make_td({{"x", torch::zeros({2, 5})}}, {2})); }),
              HasSubstr("TensorDictModule(in_keys=['x'], out_keys=['y'])"));
}

// tensordict's `method` / `method_kwargs`: TensorDictModule(MyNet(), in_keys=["a"], out_keys=["b"],
// method="my_func", method_kwargs={...}) calls that method, not forward.
struct TwoHeads : torch::nn::Module {
  TwoHeads() { scale = register_parameter("scale", torch::full({}, 3.0)); }
  at::Tensor forward(const at::Tensor& x) { return x + 1; }
  at::Tensor encode(const at::Tensor& x) { return x * scale; }
  at::Tensor shifted(const at::Tensor& x, const at::Tensor& y) const { return x - y; }
  TensorList by_name(const TensorKwargs& kw) { return {kw.at("x") * kw.at("temperature")}; }
  at::Tensor scale;
};

TEST(TensorDictModuleMethodTest, CallsTheNamedMemberFunctionAndKeepsTheModuleAsChild) {
  auto net = std::make_shared<TwoHeads>();
  TensorDictModule encode(net, &TwoHeads::encode, keys({"x"}, {"z"}));
  TensorDict td = make_td({{"x", torch::full({2}, 2.0)}}, {2});
  encode(td);
  EXPECT_TRUE(torch::equal(td.get("z"), torch::full({2}, 6.0)));
  ASSERT_EQ(encode->named_parameters().size(), 1u);
  EXPECT_EQ(encode->named_parameters().begin()->key(), "module.scale");
  TensorDictModule shifted(net, &TwoHeads::shifted, keys({"x", "y"}, {"d"}));
  shifted(td.set("y", torch::ones({2})));
  EXPECT_TRUE(torch::equal(td.get("d"), torch::ones({2})));
}

TEST(TensorDictModuleMethodTest, MethodKwargsAreAddedToEveryCall) {
  auto net = std::make_shared<TwoHeads>();
  TensorDictModule module(net, &TwoHeads::by_name,
                          TensorDictModuleOptions()
                              .in_keys_map({{"x", "obs"}})
                              .out_keys({"y"})
                              .method_kwargs({{"temperature", torch::full({}, 0.5)}}));
  TensorDict td = make_td({{"obs", torch::full({2}, 4.0)}}, {2});
  module(td);
  EXPECT_TRUE(torch::equal(td.get("y"), torch::full({2}, 2.0)));
}

TEST(TensorDictModuleMethodTest, PerCallKwargsReachACallableTakingArgumentsByName) {
  TensorDictModule module([](const TensorKwargs& kw) { return kw.at("x") * kw.at("temperature"); },
                          TensorDictModuleOptions().in_keys_map({{"x", "obs"}}).out_keys({"y"}));
  TensorDict td = make_td({{"obs", torch::full({2}, 4.0)}}, {2});
  module->forward_with_kwargs(td, {{"temperature", torch::full({}, 0.25)}});
  EXPECT_TRUE(torch::equal(td.get("y"), torch::ones({2})));
  // The TensorDict's input wins over a kwarg of the same name (tensordict's merge order).
  module->forward_with_kwargs(td, {{"temperature", torch::ones({})}, {"x", torch::zeros({2})}});
  EXPECT_TRUE(torch::equal(td.get("y"), torch::full({2}, 4.0)));
}

TEST(TensorDictModuleMethodTest, MethodKwargsWinOverPerCallKwargs) {
  TensorDictModule module([](const TensorKwargs& kw) { return kw.at("x") * kw.at("temperature"); },
                          TensorDictModuleOptions()
                              .in_keys_map({{"x", "obs"}})
                              .out_keys({"y"})
                              .method_kwargs({{"temperature", torch::full({}, 2.0)}}));
  TensorDict td = make_td({{"obs", torch::ones({2})}}, {2});
  module->forward_with_kwargs(td, {{"temperature", torch::full({}, 100.0)}});
  EXPECT_TRUE(torch::equal(td.get("y"), torch::full({2}, 2.0)));
}

TEST(TensorDictModuleMethodTest, PositionalCallablesRejectKwargs) {
  TensorDictModule module([](const at::Tensor& x) { return x; }, keys({"x"}, {"y"}));
  EXPECT_THAT(error_of<std::invalid_argument>([&] {
                module->forward_with_kwargs(make_td({{"x", torch::ones({})}}), {{"temperature", torch::ones({})}});
              }),
              HasSubstr("got keyword arguments (temperature) but the wrapped callable takes its arguments by position"));
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                TensorDictModule([](const at::Tensor& x) { return x; },
                                 TensorDictModuleOptions({"x"}, {"y"}).method_kwargs({{"t", torch::ones({})}}));
              }),
              HasSubstr("method_kwargs need a callable that takes its arguments by name"));
}

TEST(TensorDictModuleDefaultsTest, MissingInputTakesItsDefaultStrictOrNot) {
  for (bool strict : {false, true}) {
    TensorDictModule module([](const at::Tensor& x, const at::Tensor& h) { return x + h; },
                            TensorDictModuleOptions({"x", "h"}, {"y"})
                                .strict(strict)
                                .in_key_defaults({{"h", torch::full({}, 10.0)}}));
    TensorDict td = make_td({{"x", torch::ones({2})}}, {2});
    module(td);
    EXPECT_TRUE(torch::equal(td.get("y"), torch::full({2}, 11.0))) << strict;
    EXPECT_FALSE(td.contains("h"));  // the default is read, not written
    module(td.set("h", torch::zeros({2})));
    EXPECT_TRUE(torch::equal(td.get("y"), torch::ones({2})));
  }
}

TEST(TensorDictModuleDefaultsTest, DefaultForAKeyThatIsNotAnInputIsRejected) {
  EXPECT_THAT(error_of<std::invalid_argument>([] {
                TensorDictModule([](const at::Tensor& x) { return x; },
                                 TensorDictModuleOptions({"x"}, {"y"}).in_key_defaults({{"h", torch::zeros({})}}));
              }),
              HasSubstr("in_key_defaults has 'h', which is not one of in_keys ['x']"));
}

}  // namespace
}  // namespace tdp::nn
