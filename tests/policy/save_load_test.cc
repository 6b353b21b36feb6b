// save_policy then load_policy gives the same policy: the same parameters bit for bit and the
// same outputs, in text, binary and JSON form, with the parameters embedded or in a file next
// to the spec; and a module tree built in C++ exports and loads back.
#include <ATen/ATen.h>
#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>

#include <fstream>
#include <string>
#include <vector>

#include "sdk/nn/networks.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using nn::InteractionType;
using testing::run;
using testing::temp_path;

TensorDict example_inputs(const Policy& policy, int64_t batch) {
  TensorDict td({batch});
  for (const auto& input : policy.spec.inputs()) {
    std::vector<int64_t> shape = {batch};
    shape.insert(shape.end(), input.shape().begin(), input.shape().end());
    td.set(input.key(), at::randn(shape));
  }
  return td;
}

void expect_same_parameters(const Policy& a, const Policy& b) {
  auto pa = a.module->named_parameters();
  auto pb = b.module->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  ASSERT_GT(pa.size(), 0u);
  for (const auto& item : pa) {
    const at::Tensor* other = pb.find(item.key());
    ASSERT_NE(other, nullptr) << item.key();
    EXPECT_EQ(item.value().scalar_type(), other->scalar_type()) << item.key();
    EXPECT_TRUE(item.value().equal(*other)) << item.key();
  }
}

void expect_same_outputs(const Policy& a, const Policy& b) {
  at::manual_seed(21);
  const TensorDict inputs = example_inputs(a, 16);
  for (InteractionType type : {InteractionType::kDeterministic, InteractionType::kRandom}) {
    at::manual_seed(99);
    TensorDict x = run(a, inputs, type);
    at::manual_seed(99);
    TensorDict y = run(b, inputs, type);
    for (const std::string& key : a.spec.output_keys()) {
      EXPECT_TRUE(x.get(key).equal(y.get(key))) << key << " under " << nn::to_string(type);
    }
  }
}

SaveOptions saving(bool embed) {
  SaveOptions options;
  options.embed_parameters = embed;
  return options;
}

struct Form {
  std::string extension;
  bool embed;
};

class SaveLoadTest : public ::testing::TestWithParam<std::tuple<std::string, Form>> {};

TEST_P(SaveLoadTest, LoadOfSaveGivesTheSamePolicy) {
  const auto& [name, form] = GetParam();
  ASSERT_OK_AND_ASSIGN(Policy original, load_policy("policies/" + name + ".pbtxt"));
  const std::string path = temp_path(name + (form.embed ? "_embedded" : "_separate") + form.extension);
  ASSERT_OK(save_policy(original, path, saving(form.embed)));

  auto spec = read_spec(path);
  ASSERT_OK(spec);
  EXPECT_EQ(spec->name(), original.spec.name());
  EXPECT_FALSE(spec->has_init_seed()) << "a saved policy carries its parameters, not a seed";
  if (form.embed) {
    EXPECT_TRUE(spec->has_parameters());
    EXPECT_TRUE(spec->parameters_file().empty());
  } else {
    EXPECT_FALSE(spec->has_parameters());
    const size_t slash = path.find_last_of('/');
    EXPECT_EQ(spec->parameters_file(), path.substr(slash + 1) + ".params.pb");
    EXPECT_TRUE(std::ifstream(path + ".params.pb").good());
  }

  ASSERT_OK_AND_ASSIGN(Policy loaded, load_policy(path));
  expect_same_parameters(original, loaded);
  expect_same_outputs(original, loaded);

  // Saving the loaded policy again writes the same bytes: nothing drifts through a cycle.
  const std::string again = temp_path(name + "_again" + (form.embed ? "_embedded" : "_separate") + form.extension);
  ASSERT_OK(save_policy(loaded, again, saving(form.embed)));
  auto respec = read_spec(again);
  ASSERT_OK(respec);
  // (Compared as messages: map fields such as distribution_kwargs serialize in any order.)
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(respec->module(), spec->module()));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(respec->parameters(), spec->parameters()));
}

INSTANTIATE_TEST_SUITE_P(
    AllForms, SaveLoadTest,
    ::testing::Combine(::testing::Values("pendulum_tanh_gaussian", "cartpole_categorical", "goal_hybrid",
                                         "goal_autoregressive", "recurrent_gru"),
                       ::testing::Values(Form{".pbtxt", true}, Form{".pb", true}, Form{".json", true},
                                         Form{".pbtxt", false}, Form{".pb", false}, Form{".json", false})),
    [](const ::testing::TestParamInfo<std::tuple<std::string, Form>>& info) {
      const Form& form = std::get<1>(info.param);
      return std::get<0>(info.param) + "_" + form.extension.substr(1) + (form.embed ? "_embedded" : "_file");
    });

// Map fields (distribution kwargs) iterate in a per-map order; written specs sort them, so one
// policy always saves the same bytes, in every format.
TEST(SaveLoad, TheSameSpecAlwaysWritesTheSameBytes) {
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f", "g", "h", "low", "high", "upscale"};
  for (const char* extension : {".pb", ".pbtxt", ".json"}) {
    std::string first;
    for (int copy = 0; copy < 16; ++copy) {
      tdpolicy::PolicySpec spec;
      spec.set_name("deterministic");
      auto* kwargs = spec.mutable_module()->mutable_probabilistic()->mutable_distribution_kwargs();
      // Insert in a different rotation each time, so insertion order cannot make the bytes agree.
      for (size_t i = 0; i < names.size(); ++i) {
        const size_t name = (i + copy) % names.size();
        (*kwargs)[names[name]].set_double_value(static_cast<double>(name));
      }
      const std::string path = temp_path("deterministic" + std::to_string(copy) + extension);
      ASSERT_OK(write_spec(spec, path));
      const std::string bytes = testing::read_file(path);
      if (copy == 0) {
        first = bytes;
      } else {
        ASSERT_EQ(bytes, first) << extension << " copy " << copy;
      }
    }
  }
}

TEST(SaveLoad, AModuleTreeBuiltInCppExportsAndLoadsBack) {
  torch::manual_seed(4);
  auto mlp = nn::TensorDictModule(nn::Mlp(nn::MlpOptions(5, {16}, 3).activation("relu").layer_norm(true)),
                                  nn::TensorDictModuleOptions({"obs"}, {"logits"}));
  auto actor = nn::ProbabilisticTensorDictModule(
      nn::ProbabilisticTensorDictModuleOptions({"logits"}, {"act"}).distribution("categorical").return_log_prob(true));
  Policy built;
  built.module = std::make_shared<nn::TensorDictSequentialImpl>(
      std::vector<std::pair<std::string, nn::TensorDictModuleRef>>{{"net", mlp.ptr()}, {"actor", actor.ptr()}});
  built.spec.set_name("built_in_cpp");
  auto* input = built.spec.add_inputs();
  input->set_key("obs");
  input->add_shape(5);
  built.spec.add_output_keys("act");
  built.spec.add_output_keys("act_log_prob");

  auto exported = export_spec(*built.module, built.spec);
  ASSERT_OK(exported);
  ASSERT_EQ(exported->module().sequential().modules_size(), 2);
  EXPECT_EQ(exported->module().sequential().modules(0).name(), "net");
  EXPECT_EQ(exported->module().sequential().modules(0).network().network().mlp().activation(), "relu");
  EXPECT_TRUE(exported->module().sequential().modules(0).network().network().mlp().layer_norm());
  EXPECT_EQ(exported->module().sequential().modules(1).probabilistic().distribution(), "categorical");
  std::vector<std::string> names;
  for (const auto& named : exported->parameters().tensors()) names.push_back(named.name());
  // LayerNorm's weight and bias sit between the two Linear layers.
  EXPECT_THAT(names, ::testing::ElementsAre("module.net.module.layers.0.weight", "module.net.module.layers.0.bias",
                                            "module.net.module.layers.1.weight", "module.net.module.layers.1.bias",
                                            "module.net.module.layers.3.weight", "module.net.module.layers.3.bias"));

  const std::string path = temp_path("built_in_cpp.pb");
  ASSERT_OK(save_policy(built, path));
  ASSERT_OK_AND_ASSIGN(Policy loaded, load_policy(path));
  expect_same_parameters(built, loaded);
  expect_same_outputs(built, loaded);
}

TEST(SaveLoad, ParameterNamesOfALoadedSpecAreLibTorchs) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/cartpole_categorical.pbtxt"));
  std::vector<std::string> names;
  for (const auto& item : policy.module->named_parameters()) names.push_back(item.key());
  // probabilistic_sequential children are numbered; each network sits in its module's "module".
  EXPECT_THAT(names, ::testing::ElementsAre("module.0.module.layers.0.weight", "module.0.module.layers.0.bias",
                                            "module.0.module.layers.2.weight", "module.0.module.layers.2.bias",
                                            "module.0.module.layers.4.weight", "module.0.module.layers.4.bias"));
}

TEST(SaveLoad, UnexportableModulesAreErrorsNamingThem) {
  auto fn = nn::TensorDictModule(torch::nn::ReLU(),
                                 nn::TensorDictModuleOptions({"a"}, {"b"}));
  tdpolicy::PolicySpec header;
  auto exported = export_spec(*fn.ptr(), header);
  ASSERT_FALSE(exported.ok());
  EXPECT_THAT(std::string(exported.status().message()),
              ::testing::StartsWith("export_spec: module: a TensorDictModule around "));
}

TEST(SaveLoad, AMissingParametersFileIsAnErrorNamingIt) {
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy("policies/cartpole_categorical.pbtxt"));
  const std::string path = temp_path("orphan.pbtxt");
  ASSERT_OK(save_policy(policy, path, saving(false)));
  ASSERT_EQ(std::remove((path + ".params.pb").c_str()), 0);
  auto loaded = load_policy(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().message(),
            path + ": parameters_file: " + path + ".params.pb: cannot open the parameters file: no such file");
}

}  // namespace
}  // namespace tdp::policy
