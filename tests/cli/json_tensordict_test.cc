#include "sdk/cli/json_tensordict.h"

#include <ATen/ATen.h>
#include <google/protobuf/text_format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "sdk/policy/signature.h"
#include "tdpolicy/spec.pb.h"
#include "tests/testing/status_matchers.h"

namespace tdp::cli {
namespace {

using ::testing::HasSubstr;

std::vector<policy::TensorSignature> inputs(const std::string& text) {
  tdpolicy::PolicySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  absl::StatusOr<std::vector<policy::TensorSignature>> declared = policy::declared_inputs(spec);
  EXPECT_TRUE(declared.ok()) << declared.status();
  return declared.ok() ? *declared : std::vector<policy::TensorSignature>{};
}

const char* kObsAndReward = R"pb(
  inputs { key: "observation" shape: 3 }
  inputs { key: "next/reward" shape: 1 dtype: FLOAT64 }
)pb";

std::string error_message(const absl::StatusOr<TensorDict>& td) {
  EXPECT_FALSE(td.ok());
  return td.ok() ? "" : std::string(td.status().message());
}

TEST(TensorDictFromJson, InfersTheBatchFromTheDeclaredShapes) {
  auto td = tensordict_from_json(
      R"({"observation": [[0.5, 1, -2], [3, 4, 5]], "next": {"reward": [[0.25], [1e-3]]}})",
      inputs(kObsAndReward));
  ASSERT_OK(td);
  EXPECT_EQ(td->batch_size().vec(), (std::vector<int64_t>{2}));
  EXPECT_EQ(td->get("observation").scalar_type(), at::kFloat);
  EXPECT_TRUE(td->get("observation").equal(at::tensor({0.5f, 1.f, -2.f, 3.f, 4.f, 5.f}).reshape({2, 3})));
  EXPECT_EQ(td->get({"next", "reward"}).scalar_type(), at::kDouble);
  EXPECT_TRUE(td->get({"next", "reward"}).equal(at::tensor({0.25, 1e-3}, at::kDouble).reshape({2, 1})));
  EXPECT_TRUE(td->is_tensordict("next"));
}

TEST(TensorDictFromJson, BatchMayHaveSeveralDimsOrNone) {
  auto unbatched = tensordict_from_json(R"({"observation": [1, 2, 3], "next": {"reward": [0]}})",
                                        inputs(kObsAndReward));
  ASSERT_OK(unbatched);
  EXPECT_EQ(unbatched->batch_size().vec(), std::vector<int64_t>{});

  auto two_dims = tensordict_from_json(
      R"({"observation": [[[1, 2, 3]], [[4, 5, 6]]], "next": {"reward": [[[1]], [[2]]]}})", inputs(kObsAndReward));
  ASSERT_OK(two_dims);
  EXPECT_EQ(two_dims->batch_size().vec(), (std::vector<int64_t>{2, 1}));

  auto scalar = tensordict_from_json(R"({"t": 7})", inputs(R"pb(inputs { key: "t" dtype: INT64 })pb"));
  ASSERT_OK(scalar);
  EXPECT_EQ(scalar->get("t").dim(), 0);
  EXPECT_EQ(scalar->get("t").item<int64_t>(), 7);
}

TEST(TensorDictFromJson, DtypesFollowTheDeclaration) {
  auto td = tensordict_from_json(
      R"({"i": [[-3, 4]], "b": [[true, false, 1]], "u": [[255]], "h": [[0.5]], "big": [[9007199254740992]]})",
      inputs(R"pb(
        inputs { key: "i" shape: 2 dtype: INT32 }
        inputs { key: "b" shape: 3 dtype: BOOL }
        inputs { key: "u" shape: 1 dtype: UINT8 }
        inputs { key: "h" shape: 1 dtype: FLOAT16 }
        inputs { key: "big" shape: 1 dtype: INT64 }
      )pb"));
  ASSERT_OK(td);
  EXPECT_EQ(td->get("i").scalar_type(), at::kInt);
  EXPECT_TRUE(td->get("i").equal(at::tensor({-3, 4}, at::kInt).reshape({1, 2})));
  EXPECT_EQ(td->get("b").scalar_type(), at::kBool);
  EXPECT_TRUE(td->get("b").equal(at::tensor({1, 0, 1}).to(at::kBool).reshape({1, 3})));
  EXPECT_EQ(td->get("u").item<int64_t>(), 255);
  EXPECT_EQ(td->get("h").scalar_type(), at::kHalf);
  EXPECT_EQ(td->get("big").item<int64_t>(), int64_t{1} << 53);
}

TEST(TensorDictFromJson, NonFiniteFloatsAreStrings) {
  auto td = tensordict_from_json(R"({"x": ["NaN", "Infinity", "-Infinity"]})",
                                 inputs(R"pb(inputs { key: "x" shape: 3 })pb"));
  ASSERT_OK(td);
  at::Tensor x = td->get("x");
  EXPECT_TRUE(std::isnan(x[0].item<float>()));
  EXPECT_EQ(x[1].item<float>(), std::numeric_limits<float>::infinity());
  EXPECT_EQ(x[2].item<float>(), -std::numeric_limits<float>::infinity());
}

TEST(TensorDictFromJson, RaggedListsNameTheKeyAndTheIndex) {
  const auto declared = inputs(R"pb(inputs { key: "obs" shape: 3 })pb");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"obs": [[1, 2, 3], [4, 5]]})", declared)),
            "input \"obs\"[1]: ragged nested list: has 2 elements where [0] has 3");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"obs": [[1, 2, 3], 4]})", declared)),
            "input \"obs\"[1]: ragged nested list: expected a list of 3 (as at [0]), got the number 4");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"obs": [[1, 2, 3], [4, [5], 6]]})", declared)),
            "input \"obs\"[1][1]: ragged nested list: expected a number (as at [0][0]), got a list of 1");
}

TEST(TensorDictFromJson, ShapesMustEndWithTheDeclaredOne) {
  EXPECT_EQ(error_message(tensordict_from_json(R"({"observation": [[1, 2], [3, 4]], "next": {"reward": [[1], [2]]}})",
                                               inputs(kObsAndReward))),
            "input \"observation\": shape [2, 2] does not end with the declared per-env shape [3]");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"observation": 1, "next": {"reward": [1]}})",
                                               inputs(kObsAndReward))),
            "input \"observation\": shape [] does not end with the declared per-env shape [3]");
}

TEST(TensorDictFromJson, InputsMustAgreeOnTheBatch) {
  EXPECT_EQ(error_message(tensordict_from_json(R"({"observation": [[1, 2, 3], [4, 5, 6]], "next": {"reward": [[1]]}})",
                                               inputs(kObsAndReward))),
            "input \"next/reward\" has batch dims [1] (shape [1, 1]) but input \"observation\" has [2]; "
            "all inputs share the batch dims");
}

TEST(TensorDictFromJson, MissingAndUnknownKeys) {
  EXPECT_EQ(error_message(tensordict_from_json(R"({"observation": [1, 2, 3]})", inputs(kObsAndReward))),
            "missing input \"next/reward\" (declared shape [1], FLOAT64)");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"observation": [1, 2, 3], "next": {"reward": [1], "done": [0]}})",
                                               inputs(kObsAndReward))),
            "unknown input \"next/done\"; the spec declares \"observation\", \"next/reward\"");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"observation": [1, 2, 3], "next/reward": [1]})",
                                               inputs(kObsAndReward))),
            "missing input \"next/reward\" (declared shape [1], FLOAT64)");
  EXPECT_THAT(error_message(tensordict_from_json(R"({"observation": [1, 2, 3], "next": {"reward": [1]}, "a/b": 1})",
                                                 inputs(kObsAndReward))),
              HasSubstr("unknown input \"a/b\"; the spec declares \"observation\", \"next/reward\" "
                        "(a nested key is written as nested objects"));
  EXPECT_EQ(error_message(tensordict_from_json(R"({"observation": [1, 2, 3], "next": [1]})", inputs(kObsAndReward))),
            "input \"next\" must be an object holding \"reward\" (for the declared input \"next/reward\"), "
            "got a list of 1");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"observation": {"x": 1}, "next": {"reward": [1]}})",
                                               inputs(kObsAndReward))),
            "input \"observation\": expected a nested list of numbers, got an object");
}

// A recurrent policy's state keys may be left out (the actor supplies them), or given.
TEST(TensorDictFromJson, OptionalKeysMayBeLeftOut) {
  auto declared = inputs(R"pb(
    inputs { key: "observation" shape: 2 }
    inputs { key: "memory/hidden" shape: 3 }
  )pb");
  declared[1].state = true;
  const bool state = true;
  auto without = tensordict_from_json(R"({"observation": [[1, 2]]})", declared, state);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->batch_size().vec(), std::vector<int64_t>{1});
  EXPECT_FALSE(without->contains("memory"));

  auto with = tensordict_from_json(R"({"observation": [[1, 2]], "memory": {"hidden": [[0, 0, 1]]}})", declared, state);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_TRUE(with->get({"memory", "hidden"}).equal(at::tensor({0.f, 0.f, 1.f}).reshape({1, 3})));

  // Given, an optional input is checked like any other.
  EXPECT_THAT(error_message(tensordict_from_json(R"({"observation": [[1, 2]], "memory": {"hidden": [[0, 1]]}})",
                                                 declared, state)),
              HasSubstr("input \"memory/hidden\": shape [1, 2] does not end with the declared per-env shape [3]"));
  // The others are still required.
  EXPECT_THAT(error_message(tensordict_from_json(R"({"memory": {"hidden": [[0, 0, 1]]}})", declared, state)),
              HasSubstr("missing input \"observation\""));
  EXPECT_THAT(error_message(tensordict_from_json(R"({"observation": [[1, 2]]})", declared)),
              HasSubstr("missing input \"memory/hidden\""));
}

TEST(TensorDictFromJson, ValuesMustFitTheDtype) {
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [1, "two"]})", inputs(R"pb(inputs { key: "x" shape: 2 })pb"))),
            "input \"x\"[1]: expected a number (FLOAT32; or \"NaN\", \"Infinity\", \"-Infinity\"), got the string \"two\"");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [null]})", inputs(R"pb(inputs { key: "x" shape: 1 })pb"))),
            "input \"x\"[0]: expected a number (FLOAT32; or \"NaN\", \"Infinity\", \"-Infinity\"), got null");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [true]})", inputs(R"pb(inputs { key: "x" shape: 1 })pb"))),
            "input \"x\"[0]: expected a number (FLOAT32; or \"NaN\", \"Infinity\", \"-Infinity\"), got true");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [1.5]})",
                                               inputs(R"pb(inputs { key: "x" shape: 1 dtype: INT64 })pb"))),
            "input \"x\"[0]: expected an integer (INT64), got the number 1.5");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [300]})",
                                               inputs(R"pb(inputs { key: "x" shape: 1 dtype: UINT8 })pb"))),
            "input \"x\"[0]: 300 is out of range for UINT8");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [2]})",
                                               inputs(R"pb(inputs { key: "x" shape: 1 dtype: BOOL })pb"))),
            "input \"x\"[0]: expected true, false, 0 or 1 (BOOL), got the number 2");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [[1], [1e300]]})",
                                               inputs(R"pb(inputs { key: "x" shape: 1 })pb"))),
            "input \"x\"[1][0]: 1e+300 is out of range for FLOAT32");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [0.1, 3]})",
                                               inputs(R"pb(inputs { key: "x" shape: 2 dtype: INT8 })pb"))),
            "input \"x\"[0]: expected an integer (INT8), got the number 0.1");
  EXPECT_EQ(error_message(tensordict_from_json(R"({"x": [1e5]})",
                                               inputs(R"pb(inputs { key: "x" shape: 1 dtype: FLOAT16 })pb"))),
            "input \"x\"[0]: 100000 is out of range for FLOAT16");
}

TEST(TensorDictFromJson, BadJson) {
  const auto declared = inputs(R"pb(inputs { key: "x" shape: 1 })pb");
  EXPECT_THAT(error_message(tensordict_from_json(R"({"x": [1,)", declared)), HasSubstr("the input is not valid JSON: "));
  EXPECT_THAT(error_message(tensordict_from_json("", declared)), HasSubstr("the input is not valid JSON"));
  EXPECT_THAT(error_message(tensordict_from_json(R"({"x": [1]} trailing)", declared)),
              HasSubstr("the input is not valid JSON"));
  EXPECT_EQ(error_message(tensordict_from_json("[[1]]", declared)),
            "the input must be a JSON object of named tensors ({\"observation\": [[...], ...]}), got a list of 1");
}

TEST(TensorDictToJson, PrintsNestedListsAndObjects) {
  TensorDict td({{"action", at::tensor({0.1f, -2.5f, 3.f, 1e-8f}).reshape({2, 2})},
                 {"index", at::tensor({3, -1}, at::kLong)},
                 {"done", at::tensor({1, 0}).to(at::kBool)},
                 {{"next", "value"}, at::tensor({0.1, 1.0 / 3}, at::kDouble)}},
                {2});
  auto json = tensordict_to_json(td);
  ASSERT_OK(json);
  EXPECT_EQ(*json,
            "{\n"
            "  \"action\": [[0.1, -2.5], [3, 1e-08]],\n"
            "  \"index\": [3, -1],\n"
            "  \"done\": [true, false],\n"
            "  \"next\": {\n"
            "    \"value\": [0.1, 0.3333333333333333]\n"
            "  }\n"
            "}\n");
}

TEST(TensorDictToJson, ScalarsEmptyAndNonFinite) {
  EXPECT_EQ(*tensordict_to_json(TensorDict()), "{}\n");
  TensorDict td({{"s", at::scalar_tensor(2.5)},
                 {"bad", at::tensor({NAN, INFINITY, -INFINITY})},
                 {"quote\"d", at::zeros({0}, at::kInt)}},
                {});
  EXPECT_EQ(*tensordict_to_json(td),
            "{\n  \"s\": 2.5,\n  \"bad\": [\"NaN\", \"Infinity\", \"-Infinity\"],\n  \"quote\\\"d\": []\n}\n");
  TensorDict complex({{"z", at::zeros({1}, at::kComplexFloat)}}, {});
  auto json = tensordict_to_json(complex);
  ASSERT_FALSE(json.ok());
  EXPECT_THAT(std::string(json.status().message()), HasSubstr("entry \"z\": dtype ComplexFloat has no JSON form"));
}

// What `tdp run` prints reads back, through the same declaration, to the same bits.
TEST(TensorDictJson, RoundTripsBitExactly) {
  const auto declared = inputs(R"pb(
    inputs { key: "f" shape: 4 }
    inputs { key: "nested/d" shape: [2, 2] dtype: FLOAT64 }
    inputs { key: "nested/deeper/i" shape: 3 dtype: INT64 }
    inputs { key: "h" shape: 2 dtype: BFLOAT16 }
    inputs { key: "b" shape: 1 dtype: BOOL }
  )pb");
  at::manual_seed(3);
  TensorDict td({{"f", at::randn({5, 4}) * 1e3},
                 {{"nested", "d"}, at::randn({5, 2, 2}, at::kDouble)},
                 {{"nested", "deeper", "i"}, at::randint(-1000000, 1000000, {5, 3}, at::kLong)},
                 {"h", at::randn({5, 2}).to(at::kBFloat16)},
                 {"b", at::rand({5, 1}) > 0.5}},
                {5});
  td.get("f")[0][0] = NAN;
  td.get("f")[0][1] = -INFINITY;
  td.get("f")[0][2] = -0.0;
  td.get("f")[1][0] = 16777216.0f;
  td.get("f")[1][1] = 1e-40f;  // subnormal
  td.get("f")[1][2] = std::numeric_limits<float>::max();
  td.get("f")[1][3] = 300.0f;
  td.get({"nested", "d"})[0][0][0] = 1e15 + 0.5;
  td.get({"nested", "d"})[0][0][1] = 1e16;
  td.get({"nested", "d"})[0][1][0] = std::numeric_limits<double>::denorm_min();
  td.get({"nested", "d"})[0][1][1] = -std::numeric_limits<double>::max();
  auto json = tensordict_to_json(td);
  ASSERT_OK(json);
  auto back = tensordict_from_json(*json, declared);
  ASSERT_OK(back) << "\n" << *json;
  EXPECT_EQ(back->batch_size().vec(), std::vector<int64_t>{5});
  for (const NestedKey& key : td.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    const at::Tensor a = td.get(key);
    const at::Tensor b = back->get(key);
    EXPECT_EQ(a.scalar_type(), b.scalar_type()) << key;
    // Compare bits, so that NaN and -0.0 count.
    if (a.is_floating_point()) {
      const at::ScalarType bits = a.element_size() == 8 ? at::kLong : a.element_size() == 4 ? at::kInt : at::kShort;
      EXPECT_TRUE(a.view(bits).equal(b.view(bits))) << key << "\n" << *json;
    } else {
      EXPECT_TRUE(a.equal(b)) << key;
    }
  }
}

// Deep nesting was quadratic and then a protobuf "transcoder" error; now it is a limit.
TEST(TensorDictFromJson, NestingDeeperThanTheLimitIsAnError) {
  const std::string deep = "{\"observation\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto td = tensordict_from_json(deep, inputs(kObsAndReward));
  ASSERT_FALSE(td.ok());
  EXPECT_EQ(td.status().message(),
            "the input's JSON nesting has 33 levels (or more), more than the limit of 32 (max_json_depth: raise it "
            "with LoadOptions.limits.max_json_depth or the tdp flag --max_json_depth)");
  policy::Limits limits;
  limits.max_json_depth = 4;
  auto shallow = tensordict_from_json(R"({"observation": [[1, 2, 3]], "next": {"reward": [[0]]}})",
                                      inputs(kObsAndReward), {}, limits);
  EXPECT_TRUE(shallow.ok()) << shallow.status();
  limits.max_json_depth = 3;
  EXPECT_THAT(std::string(tensordict_from_json(R"({"observation": [[1, 2, 3]], "next": {"reward": [[0]]}})",
                                               inputs(kObsAndReward), {}, limits).status().message()),
              HasSubstr("has 4 levels (or more), more than the limit of 3"));
}

}  // namespace
}  // namespace tdp::cli
