// Policies built in PyTorch (policies/export_from_pytorch.py) compute the same thing in C++:
// the mode action, the log-probs of given actions and the entropy match PyTorch's to 1e-6, and
// the self test PyTorch wrote into each spec passes at load time.
//
// The files come from policies/pytorch/ (committed), or from the folder named by
// TDP_PYTORCH_EXPORTS, where //tests/spec:pytorch_regenerated_test has the script write them
// fresh with the PyTorch installed on the machine.
#include <ATen/ATen.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "sdk/nn/tensordict_sequential.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/spec/policy.h"
#include "sdk/spec/tensor_proto.h"
#include "tests/spec/spec_test_util.h"

namespace tdp::spec {
namespace {

using nn::InteractionType;

constexpr double kTolerance = 1e-6;

std::string exports_dir() {
  const char* dir = std::getenv("TDP_PYTORCH_EXPORTS");
  return dir != nullptr && *dir != '\0' ? dir : "policies/pytorch";
}

// NAME.reference.pbtxt: a tdpolicy.Parameters message used as a list of named tensors.
std::map<std::string, at::Tensor> read_reference(const std::string& name) {
  const std::string path = exports_dir() + "/" + name + ".reference.pbtxt";
  tdpolicy::Parameters reference;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(testing::read_file(path), &reference)) << path;
  std::map<std::string, at::Tensor> tensors;
  for (const auto& named : reference.tensors()) {
    auto value = from_tensor_proto(named.tensor());
    EXPECT_TRUE(value.ok()) << named.name() << ": " << value.status();
    if (value.ok()) tensors[named.name()] = *value;
  }
  return tensors;
}

void expect_close(const at::Tensor& cpp, const at::Tensor& torch, const std::string& what) {
  ASSERT_TRUE(torch.defined()) << what << " is missing from the reference";
  ASSERT_EQ(cpp.sizes(), torch.sizes()) << what;
  ASSERT_EQ(cpp.scalar_type(), torch.scalar_type()) << what;
  const double worst = (cpp.to(at::kDouble) - torch.to(at::kDouble)).abs().max().item<double>();
  EXPECT_LE(worst, kTolerance) << what << ": C++ " << cpp << "\nPyTorch " << torch;
}

struct Loaded {
  Policy policy;
  std::map<std::string, at::Tensor> reference;
  TensorDict inputs;
};

Loaded load(const std::string& name) {
  Loaded loaded;
  LoadOptions options;
  options.run_self_tests = true;  // PyTorch's own deterministic outputs and log-probs, checked
  loaded.policy = testing::load_or_fail(exports_dir() + "/" + name + ".pbtxt", options);
  loaded.reference = read_reference(name);
  at::Tensor observation = loaded.reference["inputs/observation"];
  loaded.inputs = TensorDict({{"observation", observation}}, {observation.size(0)});
  return loaded;
}

// The distribution the policy's last module builds from `td` (whose params are written).
nn::AnyDistribution distribution_of(const Policy& policy, const TensorDict& td) {
  auto sequence = std::dynamic_pointer_cast<nn::TensorDictSequentialImpl>(policy.module);
  EXPECT_NE(sequence, nullptr);
  auto actor = std::dynamic_pointer_cast<nn::ProbabilisticTensorDictModuleImpl>(sequence->modules().back());
  EXPECT_NE(actor, nullptr);
  return actor->get_dist(td);
}

class PytorchInteropTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PytorchInteropTest, MatchesPyTorch) {
  Loaded loaded = load(GetParam());
  ASSERT_NE(loaded.policy.module, nullptr);
  const auto& ref = loaded.reference;

  TensorDict out = testing::run(loaded.policy, loaded.inputs, InteractionType::kMode);
  expect_close(out.get("action"), ref.at("mode/action"), "mode action");
  for (const auto& [key, value] : ref) {
    if (key.rfind("params/", 0) == 0) expect_close(out.get(key.substr(7)), value, key);
  }

  auto dist = distribution_of(loaded.policy, out);
  ASSERT_FALSE(dist.is_composite());
  expect_close(dist.distribution()->log_prob(ref.at("given/action")), ref.at("log_prob/action"),
               "log_prob of the given actions");
  expect_close(dist.distribution()->entropy(), ref.at("entropy"), "entropy");
  expect_close(dist.distribution()->mode(), ref.at("mode/action"), "the distribution's mode");
}

INSTANTIATE_TEST_SUITE_P(Exports, PytorchInteropTest, ::testing::Values("gaussian_actor", "categorical_actor"));

TEST(PytorchInterop, TheExportedParameterNamesAreTheLoadersOwn) {
  for (const char* name : {"gaussian_actor", "categorical_actor"}) {
    auto spec = read_spec(exports_dir() + "/" + name + ".pbtxt");
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto fresh = spec->module();
    tdpolicy::PolicySpec seeded;
    *seeded.mutable_module() = fresh;
    *seeded.mutable_inputs() = spec->inputs();
    seeded.set_init_seed(0);
    auto policy = build_policy(seeded, name, ".");
    ASSERT_TRUE(policy.ok()) << policy.status();
    std::vector<std::string> cpp_names;
    for (const auto& item : policy->module->named_parameters()) cpp_names.push_back(item.key());
    std::vector<std::string> python_names;
    for (const auto& named : spec->parameters().tensors()) python_names.push_back(named.name());
    EXPECT_EQ(cpp_names, python_names) << name;
  }
}

}  // namespace
}  // namespace tdp::spec
