// The table of module kinds (sdk/policy/kinds/): every kind the proto's oneofs name has an entry,
// the messages that list kinds follow the proto, and each network kind's build and export agree
// (what a spec builds exports back to the same spec fields).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/policy.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::parse_text_or_fail;

// A spec whose root is `module`, reading a declared [4] observation.
tdpolicy::PolicySpec spec_around(const tdpolicy::Module& module) {
  tdpolicy::PolicySpec spec = parse_text_or_fail(R"pb(inputs { key: "observation" shape: 4 } init_seed: 1)pb");
  *spec.mutable_module() = module;
  return spec;
}

// Each field of `message`'s `kind` oneof, set (to its default) on a copy of `message`.
template <typename Message>
std::vector<std::pair<std::string, Message>> each_kind_of(const Message& message) {
  std::vector<std::pair<std::string, Message>> out;
  const google::protobuf::OneofDescriptor* oneof = Message::descriptor()->FindOneofByName("kind");
  for (int i = 0; i < oneof->field_count(); ++i) {
    Message copy = message;
    copy.GetReflection()->MutableMessage(&copy, oneof->field(i));
    out.emplace_back(oneof->field(i)->name(), copy);
  }
  return out;
}

// A proto field without a kind file would validate to "this SDK has no entry for the ... kind".
TEST(Kinds, EveryModuleAndNetworkKindOfTheProtoHasAnEntry) {
  for (const auto& [name, module] : each_kind_of(tdpolicy::Module())) {
    const absl::Status status = validate_spec(spec_around(module), "t.pbtxt");
    EXPECT_THAT(std::string(status.message()), ::testing::Not(::testing::HasSubstr("no entry"))) << name;
  }
  tdpolicy::Module network;
  network.mutable_network()->add_in_keys("observation");
  network.mutable_network()->add_out_keys("out");
  for (const auto& [name, net] : each_kind_of(network.network().network())) {
    *network.mutable_network()->mutable_network() = net;
    const absl::Status status = validate_spec(spec_around(network), "t.pbtxt");
    EXPECT_THAT(std::string(status.message()), ::testing::Not(::testing::HasSubstr("no entry"))) << name;
  }
}

TEST(Kinds, AMissingKindListsTheProtosKinds) {
  EXPECT_EQ(validate_spec(spec_around(tdpolicy::Module()), "t.pbtxt").message(),
            "t.pbtxt: module: no module kind is set (hint: one of sequential, probabilistic_sequential, network, "
            "probabilistic, ensemble, q_value, egreedy, tanh, lstm, gru)");
  tdpolicy::Module network;
  network.mutable_network()->add_in_keys("observation");
  EXPECT_EQ(validate_spec(spec_around(network), "t.pbtxt").message(),
            "t.pbtxt: module.network.network: no network kind is set (hint: one of mlp, linear, gru_cell, "
            "lstm_cell, torchscript, mapping, normal_param_extractor, add_state_independent_normal_scale, one_hot, "
            "cat, sequence, activation, conv2d, flatten, layer_norm, dueling, multi_agent_mlp, observation_norm, "
            "to_dtype, to_tensor_image, aoti_package, unflatten)");
}

TEST(Kinds, ExportingAnUnknownNetworkListsTheExportableClasses) {
  nn::TensorDictModule function([](const at::Tensor& x) { return x + 1; }, nn::TensorDictModuleOptions({"x"}, {"y"}));
  tdpolicy::PolicySpec header = parse_text_or_fail(R"pb(inputs { key: "x" shape: 2 } output_keys: "y")pb");
  auto spec = export_spec(*function.ptr(), header);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "export_spec: module: a TensorDictModule around a function cannot be written to a spec (supported: Mlp, "
            "Linear, GruCell, LstmCell, MappingModule, NormalParamExtractor, AddStateIndependentNormalScale, OneHot, "
            "Cat, Sequence, Activation, Conv2d, Flatten, LayerNorm, Dueling, MultiAgentMlp, ObservationNorm, ToDtype, "
            "ToTensorImage, Unflatten)");
}

// One network module per kind a C++ tree exports to, every field given (export writes defaults
// out): built, exported, it is the same module spec.
TEST(Kinds, EachNetworkKindExportsWhatItBuilds) {
  const char* kNetworks[] = {
      R"pb(in_keys: "x" out_keys: "y"
           network { mlp { in_features: 4 hidden_sizes: [8, 3] out_features: 2 activation: "relu" layer_norm: true
                           activate_last_layer: true } })pb",
      R"pb(in_keys: "x" out_keys: "y" network { linear { in_features: 4 out_features: 3 no_bias: true } })pb",
      R"pb(in_keys: ["x", "h"] out_keys: "h" network { gru_cell { input_size: 4 hidden_size: 5 } })pb",
      R"pb(in_keys: ["x", "h", "c"] out_keys: ["h", "c"] network { lstm_cell { input_size: 4 hidden_size: 5 } })pb",
      R"pb(in_keys: "x" out_keys: "y" network { mapping { name: "softplus" } })pb",
      R"pb(in_keys: "x" out_keys: ["loc", "scale"]
           network { normal_param_extractor { scale_mapping: "exp" scale_lb: 0.01 } })pb",
      R"pb(in_keys: "x" out_keys: ["loc", "scale"]
           network { add_state_independent_normal_scale { scale_shape: 4 scale_mapping: "softplus" scale_lb: 0.001
                                                           init_value: 0.5 } })pb",
      R"pb(in_keys: "i" out_keys: "y" network { one_hot { num_classes: 3 } })pb",
      R"pb(in_keys: ["x", "h"] out_keys: "y" network { cat {} })pb",
      R"pb(in_keys: "x" out_keys: ["loc", "scale"]
           network {
             sequence {
               layers { linear { in_features: 4 out_features: 6 no_bias: true } }
               layers { activation { name: "elu" alpha: 0.5 } }
               layers { layer_norm { normalized_shape: 6 eps: 1e-5 } }
               layers { sequence { layers { mapping { name: "exp" } } } }
               layers { normal_param_extractor { scale_mapping: "exp" scale_lb: 0.01 } }
             }
           })pb",
      R"pb(in_keys: "x" out_keys: "y" network { activation { name: "softplus" beta: 2 threshold: 10 } })pb",
      R"pb(in_keys: "x" out_keys: "y" network { activation { name: "gelu" approximate: "tanh" } })pb",
      R"pb(in_keys: "p" out_keys: "y"
           network {
             conv2d {
               in_channels: 2 out_channels: 4 kernel_size: [3, 2] stride: [1, 2] padding: [1, 0] dilation: [2, 1]
               groups: 2 no_bias: true
             }
           })pb",
      R"pb(in_keys: "p" out_keys: "y" network { flatten { num_dims: 2 } })pb",
      R"pb(in_keys: "p" out_keys: "y" network { unflatten { sizes: [2, 1, 3] } })pb",
      R"pb(in_keys: "x" out_keys: "y" network { layer_norm { normalized_shape: 4 eps: 0.001 no_affine: true } })pb",
      R"pb(in_keys: "p" out_keys: "y"
           network {
             dueling {
               features {
                 sequence {
                   layers {
                     conv2d {
                       in_channels: 2 out_channels: 3 kernel_size: [3, 3] stride: [1, 1] padding: [0, 0]
                       dilation: [1, 1] groups: 1
                     }
                   }
                   layers { flatten { num_dims: 3 } }
                 }
               }
               advantage { linear { in_features: 48 out_features: 3 } }
               value { mlp { in_features: 48 hidden_sizes: 8 out_features: 1 activation: "relu" } }
             }
           })pb",
      R"pb(in_keys: "a" out_keys: "y"
           network { multi_agent_mlp { n_agents: 2 n_agent_inputs: 2 n_agent_outputs: 3 centralized: true
                                       mlp { in_features: 4 hidden_sizes: 5 out_features: 3 activation: "relu"
                                             activate_last_layer: true } } })pb",
      R"pb(in_keys: "x" out_keys: "y" network { observation_norm { shape: 4 standard_normal: true clip: 5 } })pb",
      R"pb(in_keys: "x" out_keys: "y" network { to_dtype { dtype: FLOAT64 } })pb",
      R"pb(in_keys: "u" out_keys: "y" network { to_tensor_image { from_int: true } })pb",
  };
  for (const char* text : kNetworks) {
    tdpolicy::PolicySpec spec = parse_text_or_fail(
        R"pb(inputs { key: "x" shape: 4 } inputs { key: "h" shape: 5 } inputs { key: "c" shape: 5 }
             inputs { key: "i" dtype: INT64 } inputs { key: "p" shape: [2, 6, 6] } inputs { key: "a" shape: [2, 2] }
             inputs { key: "u" shape: [2, 2, 3] dtype: UINT8 } init_seed: 1)pb");
    auto* network = spec.mutable_module()->mutable_network();
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, network)) << text;
    for (const std::string& key : network->out_keys()) {
      spec.add_output_keys(key);
      if (key == "h" || key == "c") spec.mutable_module()->add_overwrite_keys(key);
    }
    ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "t.pbtxt", "."));
    ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*policy.module, spec));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(exported.module(), spec.module()))
        << "built from:\n" << spec.module().DebugString() << "exported:\n" << exported.module().DebugString();
  }
}

// Module kinds beyond the containers: what each builds exports back to the same fields.
TEST(Kinds, EachLeafModuleKindExportsWhatItBuilds) {
  const char* kModules[] = {
      R"pb(tanh { in_keys: "x" out_keys: "y" clamp: true
                  bounds { low { dtype: FLOAT32 data: "\000\000\000\300" }
                           high { dtype: FLOAT32 shape: 4 data: "\000\000\200?\000\000\200?\000\000\200?\000\000\200?" } } })pb",
      R"pb(tanh { in_keys: "x" bounds { low { dtype: FLOAT32 data: "\000\000\200\277" }
                                        high { dtype: FLOAT32 data: "\000\000\200?" } } }
           projections { key: "x" spec { shape: 4 dtype: FLOAT32 bounded {
             low { dtype: FLOAT32 data: "\000\000\000\277" } high { dtype: FLOAT32 data: "\000\000\000?" } } } })pb",
  };
  for (const char* text : kModules) {
    tdpolicy::PolicySpec spec = parse_text_or_fail(R"pb(inputs { key: "x" shape: 4 } init_seed: 1)pb");
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, spec.mutable_module())) << text;
    ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "t.pbtxt", "."));
    ASSERT_OK_AND_ASSIGN(tdpolicy::PolicySpec exported, export_spec(*policy.module, spec));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(exported.module(), spec.module()))
        << "built from:\n" << spec.module().DebugString() << "exported:\n" << exported.module().DebugString();
  }
}

}  // namespace
}  // namespace tdp::policy
