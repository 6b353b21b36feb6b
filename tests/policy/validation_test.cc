// The loader's validation: each mistake a spec author makes comes back as a Status naming the
// file, the field path and a hint, before any tensor runs. Messages are compared exactly.
#include <absl/strings/str_join.h>
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <string>

#include "sdk/distributions/registry.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using testing::parse_text_or_fail;
using testing::temp_path;
using testing::write_file;

// A valid categorical actor that each test breaks in one place.
constexpr char kValid[] = R"pb(
  name: "t"
  inputs { key: "observation" shape: 4 }
  output_keys: "action"
  module {
    sequential {
      modules {
        network {
          in_keys: "observation"
          out_keys: "logits"
          network { mlp { in_features: 4 hidden_sizes: 8 out_features: 2 activation: "tanh" } }
        }
      }
      modules { probabilistic { in_keys: "logits" out_keys: "action" distribution: "categorical" } }
    }
  }
  init_seed: 1
)pb";

tdpolicy::PolicySpec valid() { return parse_text_or_fail(kValid); }

std::string error_of(const tdpolicy::PolicySpec& spec) {
  absl::Status status = validate_spec(spec, "t.pbtxt");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

tdpolicy::Module& module_at(tdpolicy::PolicySpec& spec, int i) {
  return *spec.mutable_module()->mutable_sequential()->mutable_modules(i);
}

TEST(Validation, TheBaseSpecIsValidAndBuilds) {
  EXPECT_OK(validate_spec(valid(), "t.pbtxt"));
  EXPECT_OK(build_policy(valid(), "t.pbtxt", "."));
}

// Found by //tests/fuzz:spec_binary_fuzzer's oracle: an enum number no DType names (binary and
// JSON specs can hold one) passed validation and was read as float32 by the actor.
TEST(Validation, UnknownInputDtype) {
  tdpolicy::PolicySpec spec = valid();
  spec.mutable_inputs(0)->set_dtype(static_cast<tdpolicy::DType>(42));
  EXPECT_THAT(error_of(spec), ::testing::HasSubstr("t.pbtxt: inputs[0].dtype: unknown dtype 42 (hint: one of FLOAT32"));
}

TEST(Validation, UnknownDistribution) {
  auto spec = valid();
  module_at(spec, 1).mutable_probabilistic()->set_distribution("categorial");
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].probabilistic.distribution: unknown distribution \"categorial\" "
            "(hint: one of " +
                absl::StrJoin(dist::DistributionRegistry::global().names(), ", ") + ")");
}

TEST(Validation, UnknownCompositePartDistribution) {
  auto spec = valid();
  auto* probabilistic = module_at(spec, 1).mutable_probabilistic();
  probabilistic->clear_distribution();
  probabilistic->clear_in_keys();
  probabilistic->add_in_keys("params");
  probabilistic->clear_out_keys();
  module_at(spec, 0).mutable_network()->set_out_keys(0, "params/action/logits");
  auto* part = probabilistic->mutable_composite()->add_parts();
  part->set_key("action");
  part->set_distribution("gaussian");
  EXPECT_THAT(error_of(spec),
              ::testing::StartsWith("t.pbtxt: module.sequential.modules[1].probabilistic.composite.parts[0]"
                                    ".distribution: unknown distribution \"gaussian\" (hint: one of "));
  part->set_distribution("categorical");
  EXPECT_OK(validate_spec(spec, "t.pbtxt")) << "reading the \"params\" sub-TensorDict is fine";
}

TEST(Validation, UnknownActivation) {
  auto spec = valid();
  module_at(spec, 0).mutable_network()->mutable_network()->mutable_mlp()->set_activation("tanhh");
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[0].network.network.mlp.activation: unknown activation \"tanhh\" "
            "(hint: one of tanh, relu, elu, gelu, leaky_relu, sigmoid, softplus, identity)");
}

TEST(Validation, AKeyThatNothingWrites) {
  auto spec = valid();
  module_at(spec, 1).mutable_probabilistic()->set_in_keys(0, "logit");
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].probabilistic.in_keys[0]: key \"logit\" is read but no earlier "
            "module writes it and it is not a declared input (hint: declare it under `inputs`, or check the "
            "spelling; available: [\"logits\", \"observation\"])");
}

TEST(Validation, ADeclaredOutputThatNothingWrites) {
  auto spec = valid();
  spec.add_output_keys("value");
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: output_keys[1]: output \"value\" is never written (hint: written keys: [\"action\", "
            "\"logits\", \"observation\"])");
}

TEST(Validation, InputShapeThatDoesNotFitTheFirstLayer) {
  auto spec = valid();
  spec.mutable_inputs(0)->set_shape(0, 5);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[0].network.in_keys[0]: the input has shape [5] but "
            "mlp.in_features is 4 (hint: make the declared input shape and the layer size agree)");
}

TEST(Validation, ShapesFlowThroughLayers) {
  auto spec = valid();
  // A second layer reading the mlp's [2] output with in_features 3.
  auto* extra = spec.mutable_module()->mutable_sequential()->add_modules();
  extra->mutable_network()->add_in_keys("logits");
  extra->mutable_network()->add_out_keys("value");
  extra->mutable_network()->mutable_network()->mutable_linear()->set_in_features(3);
  extra->mutable_network()->mutable_network()->mutable_linear()->set_out_features(1);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[2].network.in_keys[0]: the input has shape [2] but "
            "linear.in_features is 3 (hint: make the declared input shape and the layer size agree)");
}

// one_hot and cat (the autoregressive head's reading of a sampled action): shapes flow through
// them, and their mistakes are named.
TEST(Validation, OneHotAndCatShapes) {
  auto spec = valid();
  auto add = [&](std::vector<std::string> in, const std::string& out) {
    auto* m = spec.mutable_module()->mutable_sequential()->add_modules()->mutable_network();
    for (const auto& key : in) m->add_in_keys(key);
    m->add_out_keys(out);
    return m->mutable_network();
  };
  add({"action"}, "action_one_hot")->mutable_one_hot()->set_num_classes(2);
  add({"observation", "action_one_hot"}, "joined")->mutable_cat();
  auto* linear = add({"joined"}, "value")->mutable_linear();
  linear->set_in_features(6);
  linear->set_out_features(1);
  EXPECT_OK(validate_spec(spec, "t.pbtxt"));
  ASSERT_OK_AND_ASSIGN(Policy policy, build_policy(spec, "t.pbtxt", "."));

  linear->set_in_features(5);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[4].network.in_keys[0]: the input has shape [6] but "
            "linear.in_features is 5 (hint: make the declared input shape and the layer size agree)");
  linear->set_in_features(6);

  module_at(spec, 2).mutable_network()->mutable_network()->mutable_one_hot()->set_num_classes(0);
  EXPECT_EQ(error_of(spec), "t.pbtxt: module.sequential.modules[2].network.network.one_hot.num_classes: must be positive, got 0");
  module_at(spec, 2).mutable_network()->mutable_network()->mutable_one_hot()->set_num_classes(2);

  module_at(spec, 3).mutable_network()->set_in_keys(1, "logits");  // [2] beside [4]: fine, [6]
  EXPECT_OK(validate_spec(spec, "t.pbtxt"));
  module_at(spec, 3).mutable_network()->set_in_keys(1, "action");  // [] cannot be joined
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[3].network.in_keys[1]: a cat input needs at least one dim (it "
            "joins on the last)");
  module_at(spec, 3).mutable_network()->clear_in_keys();
  EXPECT_EQ(error_of(spec), "t.pbtxt: module.sequential.modules[3].network.in_keys: a cat reads at least one key, got 0");
}

TEST(Validation, AKeyWrittenTwiceNeedsOverwriteKeys) {
  auto spec = valid();
  auto* second = spec.mutable_module()->mutable_sequential()->mutable_modules()->Add();
  second->mutable_network()->add_in_keys("observation");
  second->mutable_network()->add_out_keys("logits");
  second->mutable_network()->mutable_network()->mutable_linear()->set_in_features(4);
  second->mutable_network()->mutable_network()->mutable_linear()->set_out_features(2);
  // Move it before the probabilistic module: [mlp, linear, probabilistic].
  spec.mutable_module()->mutable_sequential()->mutable_modules()->SwapElements(1, 2);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[1].network.out_keys[0]: key \"logits\" is already written by "
            "module.sequential.modules[0].network.out_keys[0] (hint: list it in this module's overwrite_keys if "
            "overwriting it is intended)");
  module_at(spec, 1).add_overwrite_keys("logits");
  EXPECT_OK(validate_spec(spec, "t.pbtxt"));
}

TEST(Validation, OverwritingADeclaredInputNeedsOverwriteKeys) {
  auto spec = parse_text_or_fail(testing::read_file("policies/recurrent_gru.pbtxt"));
  ASSERT_OK(validate_spec(spec, "gru.pbtxt"));
  module_at(spec, 0).clear_overwrite_keys();
  absl::Status status = validate_spec(spec, "gru.pbtxt");
  EXPECT_EQ(status.message(),
            "gru.pbtxt: module.sequential.modules[0].network.out_keys[0]: key \"hidden\" is already written by "
            "inputs[1] (hint: list it in this module's overwrite_keys if overwriting it is intended)");
}

// Parameters: exported from a loaded policy, then broken.
absl::StatusOr<tdpolicy::PolicySpec> with_parameters() {
  auto policy = build_policy(valid(), "t.pbtxt", ".");
  if (!policy.ok()) return policy.status();
  return export_spec(*policy->module, policy->spec);
}

TEST(Validation, ParameterShapeMismatch) {
  ASSERT_OK_AND_ASSIGN(auto spec, with_parameters());
  ASSERT_EQ(spec.parameters().tensors(0).name(), "module.0.module.layers.0.weight");
  *spec.mutable_parameters()->mutable_tensors(0)->mutable_tensor() = to_tensor_proto(at::zeros({8, 5}));
  auto policy = build_policy(spec, "t.pbtxt", ".");
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(),
            "t.pbtxt: parameters.tensors[0] (\"module.0.module.layers.0.weight\"): has shape [8, 5] but the "
            "layer's is [8, 4] (hint: the layer sizes in the spec and the trained weights disagree)");
}

TEST(Validation, MissingParameter) {
  ASSERT_OK_AND_ASSIGN(auto spec, with_parameters());
  const int last = spec.parameters().tensors_size() - 1;
  ASSERT_EQ(spec.parameters().tensors(last).name(), "module.0.module.layers.2.bias");
  spec.mutable_parameters()->mutable_tensors()->RemoveLast();
  auto policy = build_policy(spec, "t.pbtxt", ".");
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(), "t.pbtxt: parameters: missing parameters: module.0.module.layers.2.bias");
}

TEST(Validation, UnknownAndDuplicateParameters) {
  ASSERT_OK_AND_ASSIGN(auto spec, with_parameters());
  spec.mutable_parameters()->mutable_tensors(1)->set_name("module.0.module.layers.9.bias");
  auto policy = build_policy(spec, "t.pbtxt", ".");
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(),
            "t.pbtxt: parameters.tensors[1] (\"module.0.module.layers.9.bias\"): the policy has no such parameter "
            "(it has: module.0.module.layers.0.bias, module.0.module.layers.0.weight, "
            "module.0.module.layers.2.bias, module.0.module.layers.2.weight)");

  ASSERT_OK_AND_ASSIGN(spec, with_parameters());
  *spec.mutable_parameters()->add_tensors() = spec.parameters().tensors(0);
  policy = build_policy(spec, "t.pbtxt", ".");
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(), "t.pbtxt: parameters.tensors[4] (\"module.0.module.layers.0.weight\"): given twice");
}

TEST(Validation, NoParametersAndNoSeed) {
  auto spec = valid();
  spec.clear_init_seed();
  auto policy = build_policy(spec, "t.pbtxt", ".");
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(),
            "t.pbtxt: the spec has no parameters, no parameters_file and no init_seed (hint: set init_seed for a "
            "freshly initialized policy)");
}

TEST(Validation, ErrorsFromAFileNameTheFile) {
  auto spec = valid();
  module_at(spec, 1).mutable_probabilistic()->set_default_interaction_type("greedy");
  const std::string path = temp_path("bad_interaction.pbtxt");
  ASSERT_OK(write_spec(spec, path));
  auto policy = load_policy(path);
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(std::string(policy.status().message()),
              ::testing::StartsWith(path + ": module.sequential.modules[1].probabilistic.default_interaction_type: "));
}

TEST(Validation, SyntaxErrorsNameTheLine) {
  const std::string path = temp_path("syntax.pbtxt");
  write_file(path, "name: \"x\"\nmodule {\n  sequential { modules { netwrk {} } }\n}\n");
  auto policy = load_policy(path);
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(std::string(policy.status().message()),
              ::testing::StartsWith(path + ": not a valid text PolicySpec: line 3, column "));
  EXPECT_EQ(load_policy(temp_path("does_not_exist.pbtxt")).status().code(), absl::StatusCode::kNotFound);
}

// Sizes from a file are untrusted: a 1G-weight layer is refused before anything is allocated.
TEST(Validation, LayersTooLargeToAllocate) {
  auto spec = valid();
  auto* mlp = module_at(spec, 0).mutable_network()->mutable_network()->mutable_mlp();
  mlp->clear_hidden_sizes();
  mlp->add_hidden_sizes(32768);
  mlp->add_hidden_sizes(32768);
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[0].network.network.mlp: the layer sizes make a network that has "
            "1074003970 weights, more than the limit of 268435456 (max_tensor_elements: raise it with "
            "LoadOptions.limits.max_tensor_elements or the tdp flag --max_tensor_elements)");
  auto policy = build_policy(spec, "t.pbtxt", ".");
  EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Validation, InvalidKeysAndEmptySequences) {
  auto spec = valid();
  module_at(spec, 0).mutable_network()->set_out_keys(0, "a//b");
  EXPECT_EQ(error_of(spec),
            "t.pbtxt: module.sequential.modules[0].network.out_keys[0]: key \"a//b\" is empty or has an empty level "
            "(levels are separated by \"/\")");
  spec = valid();
  spec.mutable_module()->mutable_sequential()->clear_modules();
  EXPECT_EQ(error_of(spec), "t.pbtxt: module.sequential.modules: a sequence needs at least one module");
  spec.clear_module();
  EXPECT_EQ(error_of(spec), "t.pbtxt: module: the spec has no module (hint: add `module { sequential { ... } }`)");
}

// Key fields that the loader parses but that name nothing to read or write (a selection, log-prob
// keys with return_log_prob off, a composite's key names, self-test entries) are checked too:
// they used to reach the loader unparsed and abort the process.
TEST(Validation, EveryKeyFieldMustParseEvenWhenUnused) {
  const std::string bad = "key \"a//b\" is empty or has an empty level (levels are separated by \"/\")";
  auto spec = valid();
  spec.mutable_module()->mutable_sequential()->add_selected_out_keys("a//b");
  EXPECT_EQ(error_of(spec), "t.pbtxt: module.sequential.selected_out_keys[0]: " + bad);

  spec = valid();
  module_at(spec, 1).mutable_probabilistic()->set_log_prob_key("a//b");
  EXPECT_EQ(error_of(spec), "t.pbtxt: module.sequential.modules[1].probabilistic.log_prob_key: " + bad);

  spec = valid();
  module_at(spec, 1).mutable_probabilistic()->add_log_prob_keys("a//b");
  EXPECT_EQ(error_of(spec), "t.pbtxt: module.sequential.modules[1].probabilistic.log_prob_keys[0]: " + bad);

  for (const char* field : {"log_prob_key", "entropy_key"}) {
    spec = valid();
    auto* composite = module_at(spec, 1).mutable_probabilistic()->mutable_composite();
    if (std::string(field) == "log_prob_key") composite->set_log_prob_key("a//b");
    else composite->set_entropy_key("a//b");
    EXPECT_EQ(error_of(spec), "t.pbtxt: module.sequential.modules[1].probabilistic.composite." + std::string(field) +
                                  ": " + bad);
  }

  spec = valid();
  auto* entry = spec.add_self_tests()->add_inputs();
  entry->set_name("");
  EXPECT_EQ(error_of(spec), "t.pbtxt: self_tests[0].inputs[0].name: key \"\" is empty or has an empty level "
                            "(levels are separated by \"/\")");
}

// ---- aoti_package -------------------------------------------------------------------------------

// The first module reads the observation through an AOTInductor package instead of the mlp.
tdpolicy::PolicySpec with_aoti_package(const std::string& fields) {
  tdpolicy::PolicySpec spec = valid();
  auto* network = module_at(spec, 0).mutable_network()->mutable_network();
  network->Clear();
  if (!google::protobuf::TextFormat::ParseFromString(fields, network->mutable_aoti_package())) {
    ADD_FAILURE() << "cannot parse " << fields;
  }
  return spec;
}

constexpr char kDigest[] = "sha256: \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"";

TEST(Validation, AotiPackageFields) {
  const std::string at = "t.pbtxt: module.sequential.modules[0].network.network.aoti_package";
  EXPECT_EQ(error_of(with_aoti_package(kDigest)),
            at + ".file: no file given (hint: a .pt2 file written by torch._inductor.aoti_compile_and_package, "
                 "next to the spec)");
  EXPECT_EQ(error_of(with_aoti_package("file: \"actor.0.pt2\" sha256: \"abc\"")),
            at + ".sha256: expected the file's SHA-256 as 64 hex digits, got \"abc\" (hint: sha256sum actor.0.pt2)");
  EXPECT_EQ(error_of(with_aoti_package("file: \"actor.0.pt2\"")),
            at + ".sha256: expected the file's SHA-256 as 64 hex digits, got \"\" (hint: sha256sum actor.0.pt2)");
  EXPECT_EQ(error_of(with_aoti_package(std::string("file: \"actor.0.pt2\" device: \"gpu\" ") + kDigest)),
            at + ".device: unknown device \"gpu\" (hint: cpu (the default) or cuda: what the package was "
                 "compiled for)");
  EXPECT_EQ(error_of(with_aoti_package(std::string("file: \"../actor.0.pt2\" ") + kDigest)),
            at + ".file: \"../actor.0.pt2\" leaves the spec's folder (\"..\") (hint: name a file in the spec's "
                 "folder, or allow outside files with LoadOptions.allow_outside_files or the tdp flag "
                 "--allow_outside_files)");
  EXPECT_OK(
      validate_spec(with_aoti_package(std::string("file: \"actor.0.pt2\" device: \"cuda\" ") + kDigest), "t.pbtxt"));
}

TEST(Validation, AotiPackageFileErrorsAreLoadErrors) {
  const std::string folder = temp_path("");
  const tdpolicy::PolicySpec missing = with_aoti_package(std::string("file: \"no_such_package.pt2\" ") + kDigest);
  auto policy = build_policy(missing, "t.pbtxt", folder);
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(),
            "t.pbtxt: module: cannot build the policy: " + folder +
                "/no_such_package.pt2: cannot open the AOTInductor package (aoti_package.file): no such file");

  write_file(folder + "/not_a_package.pt2", "not a zip");
  policy = build_policy(with_aoti_package(std::string("file: \"not_a_package.pt2\" ") + kDigest), "t.pbtxt", folder);
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(),
            "t.pbtxt: module: cannot build the policy: " + folder +
                "/not_a_package.pt2: the file's SHA-256 is "
                "a3989126344744ef800dbc88bf7e744853f3f2eac75c9ab3301f4e845ef22078, not the aoti_package.sha256 "
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef of the spec (hint: "
                "tdpolicy.export(..., fallback=\"aoti\") writes the package and its digest)");

  // The right digest of a file that is no package.
  policy =
      build_policy(with_aoti_package("file: \"not_a_package.pt2\" "
                                     "sha256: \"a3989126344744ef800dbc88bf7e744853f3f2eac75c9ab3301f4e845ef22078\""),
                   "t.pbtxt", folder);
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(std::string(policy.status().message()),
              ::testing::HasSubstr(folder + "/not_a_package.pt2: not an AOTInductor package: "));
}

}  // namespace
}  // namespace tdp::policy
