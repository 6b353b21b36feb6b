// dispatch (sdk/nn/dispatch.h): calling a module on tensors by position and by name; the
// dispatch tests of tensordict's TestTDModule.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include "sdk/nn/dispatch.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/nn/wrap_module.h"
#include "tests/testing/error_of.h"
#include "tests/testing/module_keys.h"
#include "tests/testing/tensordicts.h"

namespace tdp::nn {
namespace {

using test_util::error_of;
using test_util::keys;
using test_util::make_td;

TEST(DispatchTest, LinearByName) {
  TensorDictModule tdm(torch::nn::Linear(1, 1), keys({"a"}, {"b"}));
  TensorDict td = make_td({{"a", torch::zeros({1, 1})}}, {1});
  tdm(td);
  auto out = dispatch(tdm, {}, {{"a", torch::zeros({1, 1})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].equal(td.get("b")));
  EXPECT_TRUE(dispatch(tdm, {torch::zeros({1, 1})})[0].equal(td.get("b")));
}

TEST(DispatchTest, NestedKeysJoinWithSeparator) {
  TensorDictModule tdm(torch::nn::Linear(1, 1), keys({{"a", "c"}}, {{"b", "d"}}));
  TensorDict td = make_td({{{"a", "c"}, torch::zeros({1, 1})}}, {1});
  tdm(td);
  EXPECT_TRUE(dispatch(tdm, {}, {{"a_c", torch::zeros({1, 1})}})[0].equal(td.get({"b", "d"})));

  TensorDictModule confusing(torch::nn::Linear(1, 1), keys({{"a_1", "c"}}, {{"b_2", "d"}}));
  td = make_td({{{"a_1", "c"}, torch::zeros({1, 1})}}, {1});
  confusing(td);
  EXPECT_TRUE(dispatch(confusing, {}, {{"a_1_c", torch::zeros({1, 1})}})[0].equal(td.get({"b_2", "d"})));

  TensorDictModule sep([](const at::Tensor& x) { return x + 1; }, keys({{"a", "c"}}, {"b"}));
  auto b = dispatch(sep, {}, {{"asepc", torch::zeros({1, 2})}}, DispatchOptions().separator("sep"));
  EXPECT_TRUE(b[0].eq(1).all().item<bool>());
}

TEST(DispatchTest, PositionalAndNamedArguments) {
  TensorDictModule mod([](const at::Tensor& ac, const at::Tensor& d) { return ac + d; },
                       keys({{"a", "c"}, "d"}, {"b"}));
  auto b = dispatch(mod, {torch::zeros({1, 2})}, {{"d", torch::ones({1, 2})}});
  EXPECT_TRUE(b[0].eq(1).all().item<bool>());
  EXPECT_EQ(error_of<std::invalid_argument>(
                [&] { dispatch(mod, {torch::zeros({1, 2})}, {{"a_c", torch::ones({1, 2})}}); }),
            "dispatch(TensorDictModule): Duplicated argument in args and kwargs: 'a_c' is given "
            "by position and by name.");
  EXPECT_EQ(error_of<std::invalid_argument>(
                [&] { dispatch(mod, {torch::zeros({1, 2})}, {{"e", torch::ones({1, 2})}}); }),
            "dispatch(TensorDictModule): unexpected named tensor 'e'; the accepted names are "
            "['a_c', 'd'].");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              dispatch(mod, {torch::zeros({1}), torch::zeros({1}), torch::zeros({1})});
            }),
            "dispatch(TensorDictModule): got 3 positional tensor(s) but the source keys are "
            "[('a', 'c'), 'd'].");
}

TEST(DispatchTest, AutoBatchSize) {
  for (bool auto_batch : {true, false}) {
    auto fn = [auto_batch](TensorDict td) {
      const std::vector<int64_t> expected =
          auto_batch ? std::vector<int64_t>({2, 3}) : std::vector<int64_t>();
      EXPECT_EQ(td.batch_size().vec(), expected);
      return td.set("b", td.get({"a", "c"}) + td.get("d"));
    };
    auto b = dispatch(fn, {torch::zeros({2, 3})}, {{"d", torch::ones({2, 3})}},
                      DispatchOptions()
                          .source(std::vector<NestedKey>{{"a", "c"}, "d"})
                          .dest(std::vector<NestedKey>{"b"})
                          .auto_batch_size(auto_batch));
    EXPECT_TRUE(b[0].eq(1).all().item<bool>());
  }
}

TEST(DispatchTest, SourceAndDestOverrideTheModuleKeys) {
  WrapModule wrapped([](TensorDict td) { return td.set("b", td.get({"a", "c"}) + 1); });
  auto b = dispatch(wrapped, {}, {{"asepc", torch::zeros({1, 2})}},
                    DispatchOptions()
                        .separator("sep")
                        .source(std::vector<NestedKey>{{"a", "c"}})
                        .dest(std::vector<NestedKey>{"b"}));
  EXPECT_TRUE(b[0].eq(1).all().item<bool>());
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              dispatch([](TensorDict td) { return td; }, {}, {}, DispatchOptions());
            }),
            "dispatch: a function has no in_keys or out_keys; set DispatchOptions source and dest.");
}

TEST(DispatchTest, SequenceReturnsAllOutKeys) {
  TensorDictSequential tdm({TensorDictModule(torch::nn::Linear(1, 1), keys({{"a", "c"}}, {{"b", "d"}})),
                            TensorDictModule(torch::nn::Linear(1, 1), keys({{"a", "c"}}, {"e"}))});
  TensorDict td = make_td({{{"a", "c"}, torch::zeros({1, 1})}}, {1});
  tdm(td);
  auto out = dispatch(tdm, {}, {{"a_c", torch::zeros({1, 1})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].equal(td.get({"b", "d"})));
  EXPECT_TRUE(out[1].equal(td.get("e")));
}

}  // namespace
}  // namespace tdp::nn
